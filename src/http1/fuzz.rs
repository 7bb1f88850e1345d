//! The `http1_request` fuzz target's body as a plain function: `fuzz/fuzz_targets/http1_request.rs`
//! calls it under libFuzzer, and a seeded proptest in `tests/http1/fuzz_body.rs` runs it in
//! `cargo test`. Whatever the bytes, framing must not panic and must stay inside the buffer
//! and the limits, and every answer must be a well-formed HTTP response. NOT part of the
//! relay: nothing on the request path calls it.

use super::error::HttpError;
use super::limits::Limits;
use super::request::{Framed, Needed, frame, needed, parse};
use super::write::{ERROR_RESPONSE_LEN_MAX, write_error, write_response};

/// The first byte picks the limits (low nibble: head, high nibble: body; 0 means the
/// default), so small limits are reached too; the rest is the receive buffer.
pub fn request(data: &[u8]) {
    let Some((&pick, buf)) = data.split_first() else {
        return;
    };
    let limits = limits_from(pick);
    let framed = frame(buf, &limits);
    check_agreement(buf, &limits, &framed);
    match framed {
        Ok(Framed::Request(req)) => {
            let range = buf.as_ptr_range();
            let within = |s: &[u8]| {
                s.is_empty() || range.contains(&s.as_ptr()) && s.as_ptr_range().end <= range.end
            };
            assert!(req.len <= buf.len());
            assert_eq!(req.head.as_ptr(), buf.as_ptr());
            assert!(req.head.len() <= limits.head_bytes_max);
            assert!(req.body.len() <= limits.body_bytes_max);
            assert_eq!(req.head.len() + req.body.len(), req.len);
            assert_eq!(req.body, &buf[req.head.len()..req.len]);
            assert!(within(req.query));
            assert!(within(req.path) || req.path == b"/");
            // A request is framed from its own bytes only: whatever follows it changes nothing.
            let alone = frame(&buf[..req.len], &limits);
            assert_eq!(alone, Ok(Framed::Request(req)));
            // One byte fewer is never a request.
            let short = frame(&buf[..req.len - 1], &limits);
            assert!(
                matches!(short, Ok(Framed::NeedHead { .. } | Framed::NeedBody { .. })),
                "{short:?}"
            );
            // A hop's field is found where a first one is, inside the head, and the client a
            // proxy forwards for is read from it without panicking, canonical when it is one.
            let last = req.last_header("x-forwarded-for");
            assert_eq!(last.is_some(), req.header("x-forwarded-for").is_some());
            if let Some(v) = last {
                let head = req.head.as_ptr_range();
                assert!(v.is_empty() || head.contains(&v.as_ptr()));
                if let Ok(ip) = super::forwarded::last_hop(v) {
                    assert_eq!(ip, ip.to_canonical());
                }
            }
            let mut out = [0u8; 1024];
            let body = &req.body[..req.body.len().min(512)];
            let n = write_response(
                &mut out,
                200,
                req.keep_alive,
                "application/json",
                &[("x-bundle-id", b"ab")],
                body,
            )
            .expect("fits");
            let content_length = response_content_length(&out[..n], 200);
            assert_eq!(content_length, body.len());
        }
        Ok(Framed::NeedHead { len_max }) => {
            assert!(buf.len() < limits.head_bytes_max);
            assert_eq!(len_max, limits.request_bytes_max());
        }
        Ok(Framed::NeedBody { len, .. }) => {
            assert!(len > buf.len());
            assert!(len <= limits.request_bytes_max());
        }
        Err(e) => {
            assert!(HttpError::ALL.contains(&e), "{e:?}");
            let mut out = [0u8; ERROR_RESPONSE_LEN_MAX];
            let n = write_error(&mut out, &e).expect("every error answer fits");
            let content_length = response_content_length(&out[..n], e.status);
            assert_eq!(content_length, e.what.len() + 1);
        }
    }
}

fn limits_from(pick: u8) -> Limits {
    let d = Limits::default();
    let head = (pick & 0x0f) as usize;
    let body = (pick >> 4) as usize;
    Limits {
        head_bytes_max: if head == 0 {
            d.head_bytes_max
        } else {
            head * 24
        },
        body_bytes_max: if body == 0 {
            d.body_bytes_max
        } else {
            (body - 1) * 16
        },
    }
}

/// `parse` and `needed` say what `frame` says.
fn check_agreement(buf: &[u8], limits: &Limits, framed: &Result<Framed<'_>, HttpError>) {
    let parsed = parse(buf, limits);
    let need = needed(buf, limits);
    match framed {
        Err(e) => {
            assert_eq!(parsed, Err(*e));
            assert_eq!(need, Err(*e));
        }
        Ok(Framed::Request(r)) => {
            assert_eq!(parsed, Ok(Some(*r)));
            assert_eq!(need, Ok(Needed::Complete { len: r.len }));
        }
        Ok(Framed::NeedHead { len_max }) => {
            assert_eq!(parsed, Ok(None));
            assert_eq!(need, Ok(Needed::Head { len_max: *len_max }));
        }
        Ok(Framed::NeedBody {
            len,
            expect_continue,
        }) => {
            assert_eq!(parsed, Ok(None));
            assert_eq!(
                need,
                Ok(Needed::Body {
                    len: *len,
                    expect_continue: *expect_continue
                })
            );
        }
    }
}

/// Reads a written response back with httparse: the whole of it, with the given status.
fn response_content_length(resp: &[u8], status: u16) -> usize {
    let mut fields = [httparse::EMPTY_HEADER; 16];
    let mut r = httparse::Response::new(&mut fields);
    let head = match r.parse(resp) {
        Ok(httparse::Status::Complete(n)) => n,
        other => panic!(
            "unreadable response {other:?}: {:?}",
            String::from_utf8_lossy(resp)
        ),
    };
    assert_eq!(r.code, Some(status));
    let cl = r
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
        .expect("Content-Length");
    let n: usize = std::str::from_utf8(cl.value).unwrap().parse().unwrap();
    assert_eq!(head + n, resp.len());
    n
}
