//! The intake connection state machine, without sockets: what it answers, when it holds
//! requests back, what a half-closed client is still owed, and each deadline. A decision table
//! in test names; the "handler" answers every request with a fixed body naming its path.

use bundle_relay::clock::{Instant, Ticks};
use bundle_relay::http1::conn::{Answer, Close, Conn, ConnConfig};
use bundle_relay::http1::{HttpError, Limits, Request, write_response};

const MS: u64 = 1_000_000; // ticks are nanoseconds here

fn cfg() -> ConnConfig {
    ConnConfig {
        limits: Limits::default(),
        response_bytes_max: 256,
        out_bytes: 1024,
        head_timeout: Ticks(100 * MS),
        idle_timeout: Ticks(1_000 * MS),
        send_timeout: Ticks(300 * MS),
        linger: Ticks(60 * MS),
    }
}

fn at(ms: u64) -> Instant {
    Instant(ms * MS)
}

fn answer(req: &Request<'_>, out: &mut [u8]) -> usize {
    write_response(out, 200, req.keep_alive, "text/plain", &[], req.path).unwrap()
}

fn ping(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").into_bytes()
}

/// Sends everything pending (as a socket that takes it all would) and returns it.
fn drain(c: &mut Conn, now: Instant) -> String {
    let out = String::from_utf8(c.poll_transmit().to_vec()).unwrap();
    let n = out.len();
    c.handle_sent(n, now);
    out
}

fn answers(text: &str) -> Vec<&str> {
    text.split("HTTP/1.1 ").filter(|s| !s.is_empty()).collect()
}

#[test]
fn a_whole_request_is_answered_at_once_and_the_connection_stays_open() {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    c.handle_bytes(&ping("/a"), at(1));
    let served = c.serve(&cfg, at(1), answer);
    assert_eq!(served.requests, 1);
    assert!(drain(&mut c, at(1)).ends_with("/a"));
    assert_eq!(c.poll_close(), None);
}

#[test]
fn pipelined_requests_are_answered_in_order_and_held_back_while_the_output_is_full() {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    let all: Vec<u8> = (0..20).flat_map(|i| ping(&format!("/{i}"))).collect();
    c.handle_bytes(&all, at(1));
    let first = c.serve(&cfg, at(1), answer).requests;
    assert!(first < 20, "held back: {first}");
    let mut sent = String::new();
    let mut total = first;
    while total < 20 {
        // A send in flight pins the output: nothing more is answered until it completes.
        let pending = String::from_utf8(c.poll_transmit().to_vec()).unwrap();
        assert_eq!(c.serve(&cfg, at(2), answer).requests, 0);
        c.handle_sent(pending.len(), at(2));
        total += c.serve(&cfg, at(2), answer).requests;
        sent.push_str(&pending);
    }
    sent.push_str(&drain(&mut c, at(3)));
    let bodies: Vec<&str> = answers(&sent)
        .into_iter()
        .map(|a| a.rsplit("\r\n\r\n").next().unwrap())
        .collect();
    let want: Vec<String> = (0..20).map(|i| format!("/{i}")).collect();
    assert_eq!(bodies, want, "every request answered once, in order");
    assert_eq!(c.input_len(), 0);
}

#[test]
fn a_request_split_at_every_byte_is_answered_exactly_once() {
    let cfg = cfg();
    let req = b"POST /api/v1/bundles HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
    for split in 1..req.len() {
        let mut c = Conn::new(&cfg);
        c.reset(at(0));
        c.handle_bytes(&req[..split], at(1));
        assert_eq!(c.serve(&cfg, at(1), answer).requests, 0, "split {split}");
        c.handle_bytes(&req[split..], at(2));
        assert_eq!(c.serve(&cfg, at(2), answer).requests, 1, "split {split}");
    }
}

#[test]
fn a_head_trickled_one_byte_per_receive_is_parsed_a_logarithmic_number_of_times() {
    let cfg = cfg();
    let mut head = b"POST /api/v1/bundles HTTP/1.1\r\nHost: x\r\n".to_vec();
    while head.len() < 7_000 {
        // Long values keep the head under the 64-field limit.
        head.extend_from_slice(format!("X-Padding: {}\r\n", "a".repeat(150)).as_bytes());
    }
    head.extend_from_slice(b"Content-Length: 2\r\n\r\nok");
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    for (i, b) in head.iter().enumerate() {
        c.handle_bytes(std::slice::from_ref(b), at(1));
        let served = c.serve(&cfg, at(1), answer);
        assert_eq!(served.requests, u32::from(i == head.len() - 1));
    }
    let parses = c.head_parses();
    assert!(
        parses <= 30,
        "{parses} head parses for a {}-byte request sent a byte at a time",
        head.len()
    );
}

#[test]
fn expect_100_continue_is_written_once_before_the_body_and_never_after() {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    c.handle_bytes(
        b"POST /x HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n",
        at(1),
    );
    c.serve(&cfg, at(1), answer);
    assert_eq!(drain(&mut c, at(1)), "HTTP/1.1 100 Continue\r\n\r\n");
    c.handle_bytes(b"ab", at(2));
    c.serve(&cfg, at(2), answer);
    assert_eq!(drain(&mut c, at(2)), "", "once per request");
    c.handle_bytes(b"cd", at(3));
    assert_eq!(c.serve(&cfg, at(3), answer).requests, 1);
    assert!(drain(&mut c, at(3)).starts_with("HTTP/1.1 200"));
}

#[test]
fn half_closed_after_whole_requests_answers_them_all_then_closes() {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    let all: Vec<u8> = (0..20).flat_map(|i| ping(&format!("/{i}"))).collect();
    c.handle_bytes(&all, at(1));
    c.handle_eof(at(1));
    let mut total = c.serve(&cfg, at(1), answer).requests;
    let mut text = String::new();
    while c.poll_close().is_none() {
        text.push_str(&drain(&mut c, at(2)));
        total += c.serve(&cfg, at(2), answer).requests;
    }
    assert_eq!(total, 20);
    assert_eq!(answers(&text).len(), 20, "{text}");
    assert_eq!(c.poll_close(), Some(Close::Client));
}

/// A client that half-closes in the middle of a head is waiting for an answer that can never
/// come from what it sent: it is told why, after the answers to what it sent whole.
#[test]
fn half_closed_in_the_middle_of_a_head_answers_the_whole_requests_then_400_head_cut_short() {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    c.handle_bytes(b"GET /a HTTP/1.1\r\n\r\n\r\nGET /b HTT", at(1));
    c.handle_eof(at(1));
    let served = c.serve(&cfg, at(1), answer);
    assert_eq!(served.requests, 1);
    assert_eq!(served.error, Some(HttpError::HEAD_CUT_SHORT));
    let text = drain(&mut c, at(1));
    let answers = answers(&text);
    assert_eq!(answers.len(), 2, "{text}");
    assert!(answers[0].ends_with("/a"), "{text}");
    assert!(
        answers[1].starts_with("400 Bad Request")
            && answers[1].contains("Connection: close")
            && answers[1].ends_with(
                "request head cut short: the client closed its side before the head's blank line (10 bytes came)\n"
            ),
        "{text}"
    );
    assert_eq!(c.poll_close(), Some(Close::BadRequest));
}

/// The same in the middle of a body: the answer names how much of the body came.
/// What a connection answers that got `input` (a request whose body was cut short) and then
/// the client's half-close; the close it ends with.
fn answer_to_a_body_cut_short(input: &[u8]) -> (String, Option<Close>) {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    c.handle_bytes(input, at(1));
    assert_eq!(c.serve(&cfg, at(1), answer).requests, 0);
    c.handle_eof(at(2));
    let served = c.serve(&cfg, at(2), answer);
    assert_eq!(served.error, Some(HttpError::BODY_CUT_SHORT));
    (drain(&mut c, at(2)), c.poll_close())
}

#[test]
fn half_closed_in_the_middle_of_a_body_answers_400_naming_how_much_of_it_came() {
    let (text, close) =
        answer_to_a_body_cut_short(b"POST /b HTTP/1.1\r\nContent-Length: 50\r\n\r\n{\"jsonrpc\":");
    assert!(
        text.starts_with("HTTP/1.1 400 Bad Request")
            && text.ends_with(
                "request body cut short: the client closed its side before all of its Content-Length (11 of 50 bytes came)\n"
            ),
        "{text}"
    );
    assert_eq!(close, Some(Close::BadRequest));
}

/// The same after a stray empty line in front of the request (RFC 9112 §2.2): the line is no
/// part of the request, so it counts in neither what came nor what was due.
#[test]
fn half_closed_in_a_body_after_a_stray_empty_line_names_the_bodys_own_bytes() {
    let (text, _) = answer_to_a_body_cut_short(
        b"\r\nPOST /b HTTP/1.1\r\nContent-Length: 50\r\n\r\n{\"jsonrpc\":",
    );
    assert!(
        text.ends_with("before all of its Content-Length (11 of 50 bytes came)\n"),
        "{text}"
    );
}

/// Empty lines after the last request are no request: a half-close then closes quietly.
#[test]
fn half_closed_after_stray_empty_lines_closes_without_an_answer() {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    c.handle_bytes(b"GET /a HTTP/1.1\r\n\r\n\r\n\r\n", at(1));
    c.handle_eof(at(1));
    let served = c.serve(&cfg, at(1), answer);
    assert_eq!((served.requests, served.error), (1, None));
    assert_eq!(answers(&drain(&mut c, at(1))).len(), 1);
    assert_eq!(c.poll_close(), Some(Close::Client));
}

#[test]
fn connection_close_is_answered_then_closed_and_what_follows_is_not_read() {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    c.handle_bytes(
        b"GET /a HTTP/1.1\r\nConnection: close\r\n\r\nGET /b HTTP/1.1\r\n\r\n",
        at(1),
    );
    assert_eq!(c.serve(&cfg, at(1), answer).requests, 1);
    assert_eq!(c.closing(), Some(Close::Client));
    assert_eq!(c.poll_close(), None, "the answer is owed first");
    let text = drain(&mut c, at(1));
    assert!(
        text.contains("Connection: close") && text.ends_with("/a"),
        "{text}"
    );
    assert_eq!(c.poll_close(), Some(Close::Client));
}

#[test]
fn a_request_that_cannot_be_framed_is_answered_with_its_error_then_closed() {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    c.handle_bytes(
        b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        at(1),
    );
    let served = c.serve(&cfg, at(1), answer);
    assert_eq!(served.error.map(|e| e.status), Some(501));
    assert!(drain(&mut c, at(1)).starts_with("HTTP/1.1 501"));
    assert_eq!(c.poll_close(), Some(Close::BadRequest));
}

/// A HEAD refused for its framing (here a body over the limit, or a head past its deadline)
/// is answered with the head alone, as every answer to HEAD is (RFC 9110 §9.3.2): the same
/// status and Content-Length, no body for the client to take for the next answer.
#[test]
fn a_head_request_refused_or_timed_out_is_answered_without_a_body() {
    let cfg = cfg();
    let over = format!(
        "HEAD /a HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        cfg.limits.body_bytes_max + 1
    );
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    c.handle_bytes(over.as_bytes(), at(1));
    assert_eq!(
        c.serve(&cfg, at(1), answer).error.map(|e| e.status),
        Some(413)
    );
    let text = drain(&mut c, at(1));
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(text.contains("Content-Length: "), "{text}");
    assert!(
        text.ends_with("\r\n\r\n"),
        "a body after the head: {text:?}"
    );

    // Behind an empty line, as a client may send between requests.
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    c.handle_bytes(format!("\r\n{over}").as_bytes(), at(1));
    assert_eq!(
        c.serve(&cfg, at(1), answer).error.map(|e| e.status),
        Some(413)
    );
    let text = drain(&mut c, at(1));
    assert!(
        text.ends_with("\r\n\r\n"),
        "a body after the head: {text:?}"
    );

    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    c.handle_bytes(b"HEAD /a HTTP/1.1\r\nHo", at(10));
    c.serve(&cfg, at(10), answer);
    assert_eq!(c.handle_timeout(&cfg, at(111)), Some(Close::HeadTimeout));
    let text = drain(&mut c, at(111));
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(
        text.ends_with("\r\n\r\n"),
        "a body after the head: {text:?}"
    );
}

#[test]
fn a_head_past_its_deadline_is_answered_408_then_closed() {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    c.handle_bytes(b"GET /a HTTP/1.1\r\nHo", at(10));
    c.serve(&cfg, at(10), answer);
    assert_eq!(c.handle_timeout(&cfg, at(110)), None, "not yet");
    assert_eq!(c.handle_timeout(&cfg, at(111)), Some(Close::HeadTimeout));
    let text = drain(&mut c, at(111));
    assert!(text.starts_with("HTTP/1.1 408 Request Timeout"), "{text}");
    assert_eq!(c.poll_close(), Some(Close::HeadTimeout));
}

/// The deadline covers the whole request: a head that came whole in time and a body that did
/// not is answered 408 naming the body, not the head.
#[test]
fn a_body_past_the_deadline_is_answered_408_naming_the_body() {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    c.handle_bytes(
        b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc",
        at(10),
    );
    c.serve(&cfg, at(10), answer);
    assert_eq!(c.handle_timeout(&cfg, at(111)), Some(Close::HeadTimeout));
    let text = drain(&mut c, at(111));
    assert!(text.starts_with("HTTP/1.1 408 Request Timeout"), "{text}");
    assert!(text.contains("request body not received in time"), "{text}");
}

#[test]
fn an_idle_connection_is_closed_quietly_after_its_deadline() {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    c.handle_bytes(&ping("/a"), at(5));
    c.serve(&cfg, at(5), answer);
    drain(&mut c, at(6));
    assert_eq!(c.handle_timeout(&cfg, at(1_006)), None);
    assert_eq!(c.handle_timeout(&cfg, at(1_007)), Some(Close::Idle));
    assert_eq!(c.poll_close(), Some(Close::Idle));
    assert_eq!(c.poll_transmit(), b"");
}

/// A client that ends a request with a stray CRLF (RFC 9112 §2.2 asks a server to ignore
/// empty lines before a request line) and then keeps the connection warm: it is idle, closed
/// quietly at the idle deadline, not answered 408 for a head it never began.
#[test]
fn a_stray_crlf_after_a_request_leaves_the_connection_idle_not_timed_out() {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    let mut bytes = ping("/a");
    bytes.extend_from_slice(b"\r\n");
    c.handle_bytes(&bytes, at(5));
    c.serve(&cfg, at(5), answer);
    drain(&mut c, at(6));
    assert_eq!(c.handle_timeout(&cfg, at(500)), None, "no head was begun");
    assert_eq!(c.handle_timeout(&cfg, at(1_007)), Some(Close::Idle));
    assert_eq!(c.poll_transmit(), b"", "closed without an answer");
    // The next request after the empty line is served as usual.
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    c.handle_bytes(&bytes, at(5));
    c.serve(&cfg, at(5), answer);
    drain(&mut c, at(6));
    c.handle_bytes(&ping("/b"), at(300));
    c.serve(&cfg, at(300), answer);
    let text = drain(&mut c, at(300));
    assert_eq!(answers(&text).len(), 1, "{text}");
    assert!(text.ends_with("/b"), "{text}");
}

#[test]
fn output_that_makes_no_progress_past_the_send_deadline_closes_at_once() {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    c.handle_bytes(&ping("/a"), at(0));
    c.serve(&cfg, at(0), answer);
    let n = c.poll_transmit().len();
    // Part of it goes out at 200 ms: the deadline runs from there.
    c.handle_sent(10, at(200));
    assert_eq!(
        c.handle_timeout(&cfg, at(400)),
        None,
        "progress restarted the deadline"
    );
    let _ = n;
    let _ = c.poll_transmit();
    assert_eq!(c.handle_timeout(&cfg, at(501)), Some(Close::SendTimeout));
    assert_eq!(
        c.poll_close(),
        Some(Close::SendTimeout),
        "no draining: nothing moves"
    );
}

#[test]
fn requests_held_back_behind_a_stalled_output_are_covered_by_the_send_deadline() {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    let all: Vec<u8> = (0..50).flat_map(|i| ping(&format!("/{i}"))).collect();
    c.handle_bytes(&all, at(0));
    c.serve(&cfg, at(0), answer);
    let _ = c.poll_transmit(); // sent, never completes
    assert_eq!(c.handle_timeout(&cfg, at(299)), None);
    assert_eq!(c.handle_timeout(&cfg, at(301)), Some(Close::SendTimeout));
}

#[test]
fn shutdown_sends_what_was_answered_and_reads_no_more() {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    c.handle_bytes(&ping("/a"), at(0));
    c.serve(&cfg, at(0), answer);
    c.begin_shutdown();
    c.handle_bytes(&ping("/b"), at(1));
    assert_eq!(c.serve(&cfg, at(1), answer).requests, 0);
    assert!(drain(&mut c, at(1)).ends_with("/a"));
    assert_eq!(c.poll_close(), Some(Close::Shutdown));
}

#[test]
fn more_than_the_input_holds_is_refused_413_and_closed() {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    let big = vec![b'a'; cfg.limits.request_bytes_max() + 1];
    c.handle_bytes(&big, at(0));
    assert!(drain(&mut c, at(0)).starts_with("HTTP/1.1 413"));
    assert_eq!(c.poll_close(), Some(Close::BadRequest));
}

/// A handler that answers `/later` afterwards and everything else at once.
fn later_or_now(req: &Request<'_>, out: &mut [u8]) -> Answer {
    if req.path == b"/later" {
        Answer::Later
    } else {
        Answer::Now(answer(req, out))
    }
}

fn owed_body(out: &mut [u8], keep_alive: bool) -> usize {
    write_response(out, 200, keep_alive, "text/plain", &[], b"/later").unwrap()
}

#[test]
fn a_request_answered_later_holds_the_pipelined_ones_behind_it_until_its_answer() {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    let mut bytes = ping("/a");
    bytes.extend(ping("/later"));
    bytes.extend(ping("/b"));
    c.handle_bytes(&bytes, at(1));
    assert_eq!(c.serve_deferring(&cfg, at(1), later_or_now).requests, 2);
    assert!(c.is_owed());
    assert_eq!(answers(&drain(&mut c, at(1))).len(), 1, "only /a so far");
    // Serving again while owed answers nothing: /b stays behind the owed answer.
    assert_eq!(c.serve_deferring(&cfg, at(2), later_or_now).requests, 0);
    assert!(c.answer_owed(at(3), owed_body));
    assert!(!c.is_owed());
    assert_eq!(c.serve_deferring(&cfg, at(3), later_or_now).requests, 1);
    let text = drain(&mut c, at(3));
    let order: Vec<&str> = answers(&text)
        .iter()
        .map(|a| a.rsplit("\r\n").next().unwrap())
        .collect();
    assert_eq!(order, ["/later", "/b"]);
}

#[test]
fn a_connection_owed_an_answer_is_not_idle_and_not_closed_by_a_drain() {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    c.handle_bytes(&ping("/later"), at(1));
    c.serve_deferring(&cfg, at(1), later_or_now);
    c.begin_drain(at(2));
    assert_eq!(
        c.handle_timeout(&cfg, at(5_000)),
        None,
        "owed: neither idle nor drained"
    );
    // The drain began after the request: its answer says close, then the connection closes.
    assert!(c.answer_owed(at(5_001), owed_body));
    let text = drain(&mut c, at(5_001));
    assert!(
        text.contains("Connection: close") || text.contains("connection: close"),
        "{text}"
    );
    assert_eq!(c.poll_close(), Some(Close::Client));
}

#[test]
fn a_half_closed_client_still_gets_its_owed_answer_then_the_connection_closes() {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    c.handle_bytes(&ping("/later"), at(1));
    c.handle_eof(at(1));
    c.serve_deferring(&cfg, at(1), later_or_now);
    assert_eq!(c.poll_close(), None, "the answer is still owed");
    assert!(c.answer_owed(at(2), owed_body));
    c.serve_deferring(&cfg, at(2), later_or_now);
    assert!(drain(&mut c, at(2)).ends_with("/later"));
    assert_eq!(c.poll_close(), Some(Close::Client));
}

#[test]
fn nothing_is_written_for_an_answer_not_owed() {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    assert!(!c.answer_owed(at(1), owed_body));
    assert_eq!(c.output_len(), 0);
}

// ---- lingering: a connection that ends while its client may still be sending ----

/// A head whose Content-Length is over the limit, answered 413 before its body arrives.
fn over_the_limit(c: &mut Conn, cfg: &ConnConfig, now: Instant) -> String {
    let head = format!(
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        cfg.limits.body_bytes_max + 1
    );
    c.handle_bytes(head.as_bytes(), now);
    let served = c.serve(cfg, now, answer);
    assert!(served.error.is_some());
    drain(c, now)
}

#[test]
fn a_body_over_the_limit_is_answered_413_naming_the_setting_and_its_bytes() {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    let out = over_the_limit(&mut c, &cfg, at(1));
    assert!(out.starts_with("HTTP/1.1 413"), "{out}");
    assert!(
        out.contains(&format!(
            "(intake.body_bytes_max = {} bytes)",
            cfg.limits.body_bytes_max
        )),
        "{out}"
    );
}

#[test]
fn more_than_the_input_holds_names_both_limits_and_their_sum() {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    let big = vec![b'a'; cfg.limits.request_bytes_max() + 1];
    c.handle_bytes(&big, at(0));
    let out = drain(&mut c, at(0));
    assert!(
        out.contains(&format!(
            "(intake.head_bytes_max + intake.body_bytes_max = {} bytes)",
            cfg.limits.request_bytes_max()
        )),
        "{out}"
    );
}

#[test]
fn a_refused_request_lingers_dropping_what_arrives_until_the_clients_end_of_stream() {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    over_the_limit(&mut c, &cfg, at(1));
    assert_eq!(c.poll_close(), Some(Close::BadRequest), "answer out: ends");
    assert!(
        c.begin_linger(&cfg, at(1)),
        "the body may still be arriving"
    );
    assert!(c.is_lingering());
    assert_eq!(c.poll_close(), None, "not closed while lingering");
    c.handle_bytes(&vec![b' '; 4096], at(2));
    assert_eq!(c.serve(&cfg, at(2), answer).requests, 0);
    assert_eq!(
        c.poll_transmit(),
        b"",
        "what arrives is dropped, not answered"
    );
    assert_eq!(c.poll_close(), None);
    c.handle_eof(at(3));
    assert_eq!(
        c.poll_close(),
        Some(Close::BadRequest),
        "the client ended: close"
    );
    assert!(!c.begin_linger(&cfg, at(3)), "lingers once");
}

#[test]
fn a_lingering_connection_closes_at_the_linger_deadline_or_the_head_deadline_if_sooner() {
    for (head_ms, closes_at) in [(100, 61), (40, 41)] {
        let cfg = ConnConfig {
            head_timeout: Ticks(head_ms * MS),
            ..cfg()
        };
        let mut c = Conn::new(&cfg);
        c.reset(at(0));
        over_the_limit(&mut c, &cfg, at(1));
        assert!(c.begin_linger(&cfg, at(1)));
        assert_eq!(
            c.poll_timeout(&cfg),
            Some(at(closes_at)),
            "wakes at the deadline (head {head_ms} ms)"
        );
        assert!(!c.linger_over(at(closes_at - 1)));
        assert!(c.linger_over(at(closes_at)), "head {head_ms} ms");
        assert!(!c.linger_over(at(closes_at + 1)), "once");
        assert_eq!(c.poll_close(), Some(Close::BadRequest));
        assert!(!c.begin_linger(&cfg, at(closes_at + 1)), "lingers once");
    }
}

#[test]
fn a_client_that_asked_to_close_lingers_for_what_it_pipelined_behind() {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    c.handle_bytes(
        b"GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /b HTTP/1.1\r\n",
        at(1),
    );
    assert_eq!(c.serve(&cfg, at(1), answer).requests, 1);
    assert!(drain(&mut c, at(1)).ends_with("/a"));
    assert_eq!(c.poll_close(), Some(Close::Client));
    assert!(c.begin_linger(&cfg, at(1)));
}

#[test]
fn a_client_that_asked_to_close_with_nothing_behind_is_closed_at_once_without_lingering() {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    c.handle_bytes(
        b"GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        at(1),
    );
    assert_eq!(c.serve(&cfg, at(1), answer).requests, 1);
    assert!(drain(&mut c, at(1)).ends_with("/a"));
    assert_eq!(c.poll_close(), Some(Close::Client));
    assert!(!c.begin_linger(&cfg, at(1)));
}

#[test]
fn a_client_that_already_ended_its_side_is_closed_at_once_without_lingering() {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    c.handle_bytes(&ping("/a"), at(1));
    c.handle_eof(at(1));
    assert_eq!(c.serve(&cfg, at(1), answer).requests, 1);
    assert!(drain(&mut c, at(1)).ends_with("/a"));
    assert_eq!(c.poll_close(), Some(Close::Client));
    assert!(!c.begin_linger(&cfg, at(1)));
}

#[test]
fn idle_send_timeout_and_shutdown_closes_do_not_linger() {
    let cfg = cfg();
    for reason in Close::ALL {
        assert_eq!(
            reason.lingers(),
            matches!(
                reason,
                Close::Client | Close::BadRequest | Close::HeadTimeout
            ),
            "{reason:?}"
        );
    }
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    assert_eq!(c.handle_timeout(&cfg, at(1_001)), Some(Close::Idle));
    assert!(!c.begin_linger(&cfg, at(1_001)));
}

#[test]
fn a_late_body_is_answered_408_and_lingers() {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    c.handle_bytes(
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc",
        at(1),
    );
    assert_eq!(c.serve(&cfg, at(1), answer).requests, 0);
    assert_eq!(c.handle_timeout(&cfg, at(102)), Some(Close::HeadTimeout));
    assert!(drain(&mut c, at(102)).starts_with("HTTP/1.1 408"));
    assert!(c.begin_linger(&cfg, at(102)));
}

/// A stop that begins while a refusal is still being sent: the linger that follows ends at
/// the drain's idle deadline, not a whole linger later.
#[test]
fn a_drain_that_began_while_the_refusal_was_being_sent_bounds_the_linger_that_follows() {
    let cfg = cfg();
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    let head = format!(
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        cfg.limits.body_bytes_max + 1
    );
    c.handle_bytes(head.as_bytes(), at(1));
    c.serve(&cfg, at(1), answer);
    assert!(!c.poll_transmit().is_empty(), "the 413 is being sent");
    c.begin_drain(at(10));
    let n = c.output_len();
    c.handle_sent(n, at(2));
    assert!(c.begin_linger(&cfg, at(2)));
    assert!(!c.linger_over(at(9)));
    assert!(c.linger_over(at(10)));
}

#[test]
fn a_drain_bounds_lingering_to_its_idle_deadline() {
    let cfg = cfg();
    // Lingering when the drain begins.
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    over_the_limit(&mut c, &cfg, at(1));
    assert!(c.begin_linger(&cfg, at(1)));
    c.begin_drain(at(20));
    assert!(c.linger_over(at(20)));
    // Draining when it begins to linger.
    let mut c = Conn::new(&cfg);
    c.reset(at(0));
    c.begin_drain(at(30));
    over_the_limit(&mut c, &cfg, at(1));
    assert!(c.begin_linger(&cfg, at(1)));
    assert!(!c.linger_over(at(29)));
    assert!(c.linger_over(at(30)));
}
