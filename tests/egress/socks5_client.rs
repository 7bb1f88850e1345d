//! The SOCKS5 CONNECT client byte for byte (RFC 1928, RFC 1929): requests on the wire, every
//! reply it must accept, and every failure named as the RFC names it.

use crate::counting_alloc;

use std::net::SocketAddr;

use bundle_relay::egress::socks5::{Method, Phase, Progress, ReplyCode, Socks5, Socks5Error};

fn v4() -> SocketAddr {
    "127.0.0.11:443".parse().unwrap()
}

/// Sends whatever is due, as the reactor would, and returns it.
fn send(s: &mut Socks5) -> Vec<u8> {
    let out = s.poll_transmit().to_vec();
    s.advance_transmit(out.len());
    out
}

const OK_V4: [u8; 10] = [5, 0, 0, 1, 10, 0, 0, 1, 0x1f, 0x90];

#[test]
fn no_auth_greeting_then_connect_ipv4_on_the_wire() {
    let mut s = Socks5::new(v4(), None).unwrap();
    assert_eq!(send(&mut s), [5, 1, 0]);
    assert_eq!(
        send(&mut s),
        [] as [u8; 0],
        "nothing more until the proxy answers"
    );
    assert_eq!(s.handle_bytes(&[5, 0]), Ok(Progress::NeedMore));
    assert_eq!(send(&mut s), [5, 1, 0, 1, 127, 0, 0, 11, 0x01, 0xbb]);
    assert_eq!(s.handle_bytes(&OK_V4), Ok(Progress::Done { leftover: 0 }));
    assert_eq!(s.phase(), Phase::Done);
    assert_eq!(s.bound_addr(), Some("10.0.0.1:8080".parse().unwrap()));
    assert_eq!(
        s.handle_transport_closed(),
        None,
        "after Done EOF is the next layer's"
    );
}

#[test]
fn username_password_on_the_wire_rfc1929() {
    let mut s = Socks5::new(v4(), Some(("alice", "s3cret"))).unwrap();
    assert_eq!(
        send(&mut s),
        [5, 1, 2],
        "only the configured method is offered"
    );
    s.handle_bytes(&[5, 2]).unwrap();
    assert_eq!(send(&mut s), b"\x01\x05alice\x06s3cret");
    assert_eq!(s.phase(), Phase::Auth);
    s.handle_bytes(&[1, 0]).unwrap();
    assert_eq!(send(&mut s), [5, 1, 0, 1, 127, 0, 0, 11, 0x01, 0xbb]);
    assert_eq!(s.handle_bytes(&OK_V4), Ok(Progress::Done { leftover: 0 }));
}

#[test]
fn ipv6_target_and_ipv6_bound_address() {
    let target: SocketAddr = "[2001:db8::7]:443".parse().unwrap();
    let mut s = Socks5::new(target, None).unwrap();
    send(&mut s);
    s.handle_bytes(&[5, 0]).unwrap();
    let mut want = vec![5, 1, 0, 4];
    want.extend_from_slice(
        &"2001:db8::7"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    want.extend_from_slice(&[0x01, 0xbb]);
    assert_eq!(send(&mut s), want);
    let mut reply = vec![5, 0, 0, 4];
    reply.extend_from_slice(&[0; 15]);
    reply.extend_from_slice(&[1, 0, 80]);
    assert_eq!(s.handle_bytes(&reply), Ok(Progress::Done { leftover: 0 }));
    assert_eq!(s.bound_addr(), Some("[::1]:80".parse().unwrap()));
}

#[test]
fn a_domain_bound_address_is_accepted_without_an_ip() {
    let mut s = Socks5::new(v4(), None).unwrap();
    send(&mut s);
    s.handle_bytes(&[5, 0]).unwrap();
    let mut reply = vec![5, 0, 0, 3, 9];
    reply.extend_from_slice(b"proxy.lan");
    reply.extend_from_slice(&[0, 80]);
    assert_eq!(s.handle_bytes(&reply), Ok(Progress::Done { leftover: 0 }));
    assert_eq!(s.bound_addr(), None);
}

#[test]
fn replies_split_at_every_byte_and_joined_with_the_next_layers_bytes() {
    let mut all = vec![5, 2, 1, 0];
    all.extend_from_slice(&OK_V4);
    all.extend_from_slice(b"\x16\x03\x01 tls bytes");
    for split in 0..all.len() {
        let mut s = Socks5::new(v4(), Some(("u", "p"))).unwrap();
        let mut next_layer = Vec::new();
        for piece in [&all[..split], &all[split..]] {
            send(&mut s);
            if let Progress::Done { leftover } = s.handle_bytes(piece).unwrap() {
                next_layer.extend_from_slice(&piece[piece.len() - leftover..]);
            }
        }
        assert_eq!(next_layer, b"\x16\x03\x01 tls bytes", "split {split}");
        // One byte at a time.
        let mut s = Socks5::new(v4(), Some(("u", "p"))).unwrap();
        let mut progress = Progress::NeedMore;
        for b in &all[..all.len() - b"\x16\x03\x01 tls bytes".len()] {
            send(&mut s);
            progress = s.handle_bytes(std::slice::from_ref(b)).unwrap();
        }
        assert_eq!(progress, Progress::Done { leftover: 0 });
    }
}

#[test]
fn reply_codes_are_named_as_rfc1928_names_them() {
    let table = [
        (1, ReplyCode::GeneralFailure, "general SOCKS server failure"),
        (
            2,
            ReplyCode::NotAllowedByRuleset,
            "connection not allowed by ruleset",
        ),
        (3, ReplyCode::NetworkUnreachable, "network unreachable"),
        (4, ReplyCode::HostUnreachable, "host unreachable"),
        (5, ReplyCode::ConnectionRefused, "connection refused"),
        (6, ReplyCode::TtlExpired, "TTL expired"),
        (7, ReplyCode::CommandNotSupported, "command not supported"),
        (
            8,
            ReplyCode::AddressTypeNotSupported,
            "address type not supported",
        ),
        (9, ReplyCode::Unassigned(9), "unassigned reply code"),
    ];
    for (byte, code, name) in table {
        let mut s = Socks5::new(v4(), None).unwrap();
        send(&mut s);
        s.handle_bytes(&[5, 0]).unwrap();
        send(&mut s);
        // Only VER and REP: a failing proxy may close without the address.
        let e = s.handle_bytes(&[5, byte]).unwrap_err();
        assert_eq!(e, Socks5Error::ConnectFailed(code));
        assert_eq!(code.byte(), byte);
        let text = e.to_string();
        assert!(
            text.contains(name) && text.contains(&format!("{byte:#04x}")),
            "{text}"
        );
        assert_eq!(s.handle_bytes(&OK_V4), Err(e), "errors are final");
    }
}

#[test]
fn method_selection_failures() {
    let mut s = Socks5::new(v4(), None).unwrap();
    send(&mut s);
    let e = s.handle_bytes(&[5, 0xff]).unwrap_err();
    assert_eq!(
        e,
        Socks5Error::MethodRefused {
            offered: Method::NoAuth
        }
    );
    assert!(e.to_string().contains("refused"), "{e}");

    let mut s = Socks5::new(v4(), None).unwrap();
    send(&mut s);
    assert_eq!(
        s.handle_bytes(&[5, 2]),
        Err(Socks5Error::UnofferedMethod {
            offered: Method::NoAuth,
            chosen: 2
        }),
        "a proxy demanding a password we do not have"
    );

    let mut s = Socks5::new(v4(), Some(("u", "p"))).unwrap();
    send(&mut s);
    assert_eq!(
        s.handle_bytes(&[5, 0]),
        Err(Socks5Error::UnofferedMethod {
            offered: Method::UsernamePassword,
            chosen: 0
        }),
        "a proxy that does not check the configured credentials"
    );
}

#[test]
fn wrong_credentials_are_auth_failed() {
    let mut s = Socks5::new(v4(), Some(("u", "wrong"))).unwrap();
    send(&mut s);
    s.handle_bytes(&[5, 2]).unwrap();
    send(&mut s);
    let e = s.handle_bytes(&[1, 1]).unwrap_err();
    assert_eq!(e, Socks5Error::AuthFailed { status: 1 });
    assert!(
        e.to_string().contains("rejected the username/password"),
        "{e}"
    );
}

#[test]
fn malformed_replies_name_the_field() {
    let cases: [(&[u8], Phase, &str, u8); 5] = [
        (&[4, 0], Phase::Greeting, "version is not 5", 4),
        (&[5, 0, 6, 0], Phase::Connect, "version is not 5", 6),
        (
            &[5, 0, 5, 0, 1, 1, 0, 0, 0, 0, 0, 0],
            Phase::Connect,
            "reserved byte is not 0",
            1,
        ),
        (
            &[5, 0, 5, 0, 0, 9, 0],
            Phase::Connect,
            "unknown address type",
            9,
        ),
        (&[5, 2, 0, 0], Phase::Auth, "auth version is not 1", 0),
    ];
    for (bytes, phase, what, byte) in cases {
        let auth = (phase == Phase::Auth).then_some(("u", "p"));
        let mut s = Socks5::new(v4(), auth).unwrap();
        send(&mut s);
        let e = s.handle_bytes(bytes).unwrap_err();
        assert_eq!(e, Socks5Error::Malformed { phase, what, byte }, "{bytes:?}");
        assert!(e.to_string().contains(what));
    }
}

#[test]
fn proxy_closing_mid_handshake_names_the_phase() {
    let mut s = Socks5::new(v4(), None).unwrap();
    send(&mut s);
    let e = s.handle_transport_closed().unwrap();
    assert_eq!(
        e,
        Socks5Error::ProxyClosed {
            phase: Phase::Greeting
        }
    );
    assert!(e.to_string().contains("method selection"), "{e}");

    let mut s = Socks5::new(v4(), Some(("u", "p"))).unwrap();
    send(&mut s);
    s.handle_bytes(&[5, 2]).unwrap();
    assert_eq!(
        s.handle_transport_closed(),
        Some(Socks5Error::ProxyClosed { phase: Phase::Auth })
    );

    let mut s = Socks5::new(v4(), None).unwrap();
    send(&mut s);
    s.handle_bytes(&[5, 0, 5, 0, 0, 1, 127]).unwrap();
    let e = s.handle_transport_closed().unwrap();
    assert_eq!(
        e,
        Socks5Error::ProxyClosed {
            phase: Phase::Connect
        }
    );
    assert!(e.to_string().contains("CONNECT reply"), "{e}");
}

#[test]
fn credentials_must_be_1_to_255_bytes() {
    let long = "x".repeat(256);
    assert_eq!(
        Socks5::new(v4(), Some(("", "p"))).unwrap_err(),
        Socks5Error::CredentialLength {
            field: "username",
            len: 0
        }
    );
    assert_eq!(
        Socks5::new(v4(), Some(("u", &long))).unwrap_err(),
        Socks5Error::CredentialLength {
            field: "password",
            len: 256
        }
    );
    let max = "y".repeat(255);
    let mut s = Socks5::new(v4(), Some((&max, &max))).unwrap();
    send(&mut s);
    s.handle_bytes(&[5, 2]).unwrap();
    assert_eq!(send(&mut s).len(), 3 + 255 + 255);
}

#[test]
fn a_partly_sent_request_stays_put_until_reported() {
    let mut s = Socks5::new(v4(), Some(("u", "p"))).unwrap();
    s.advance_transmit(1);
    assert_eq!(s.poll_transmit(), [1, 2]);
    // The proxy's answer may be handled before the last send's completion is reported.
    s.handle_bytes(&[5, 2]).unwrap();
    assert_eq!(s.poll_transmit(), [1, 2, 1, 1, b'u', 1, b'p']);
    s.advance_transmit(2);
    assert_eq!(s.poll_transmit(), [1, 1, b'u', 1, b'p']);
}

#[test]
fn the_handshake_allocates_nothing() {
    let before = counting_alloc::allocations();
    let mut s = Socks5::new(v4(), Some(("user", "pass"))).unwrap();
    for reply in [&[5u8, 2][..], &[1, 0], &OK_V4] {
        let n = s.poll_transmit().len();
        s.advance_transmit(n);
        s.handle_bytes(reply).unwrap();
    }
    assert_eq!(s.phase(), Phase::Done);
    let _ = Socks5::new(v4(), None)
        .unwrap()
        .handle_bytes(&[5, 9])
        .unwrap_err();
    assert_eq!(counting_alloc::allocations(), before);
}
