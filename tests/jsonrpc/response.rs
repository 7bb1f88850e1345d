//! Responses: what the writers produce reads back through serde_json with every field intact.

use bundle_relay::jito::code;
use bundle_relay::jsonrpc::{
    ERROR_CAUSE_LEN_MAX, ERROR_RESPONSE_LEN_MAX, ID_LEN_MAX, Id, Overflow, RpcError, Writer,
    parse_request, write_error, write_result_raw, write_result_str,
};
use serde_json::{Value, json};

const BUNDLE_ID: &str = "892b79ed49138bfb3aa5441f0df6e06ef34f9ee8f3976c15b323605bae0cf51d";

/// The id of a parsed getTipAccounts request carrying `id` (raw JSON text).
fn id_of(body: &str) -> Id<'_> {
    parse_request(body.as_bytes()).unwrap().id
}

fn body_with_id(id: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"getTipAccounts"}}"#)
}

fn error_response(id: Id<'_>, err: &RpcError<'_>) -> (Vec<u8>, Value) {
    let mut buf = [0u8; ERROR_RESPONSE_LEN_MAX];
    let out = write_error(&mut buf, id, err).unwrap().to_vec();
    let v: Value = serde_json::from_slice(&out)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out)));
    (out, v)
}

#[test]
fn string_result_round_trips_with_every_field() {
    for id in ["1", r#""req-7""#, "null", "-3.5e2", r#""\u00e9\n""#] {
        let body = body_with_id(id);
        let mut buf = [0u8; 256];
        let out = write_result_str(&mut buf, id_of(&body), BUNDLE_ID).unwrap();
        let v: Value = serde_json::from_slice(out).unwrap();
        let id_value: Value = serde_json::from_str(id).unwrap();
        assert_eq!(
            v,
            json!({"jsonrpc": "2.0", "result": BUNDLE_ID, "id": id_value})
        );
        // The id is the request's bytes, not a re-serialisation of its value.
        let text = std::str::from_utf8(out).unwrap();
        assert!(text.ends_with(&format!(",\"id\":{id}}}")), "{text}");
    }
}

#[test]
fn result_field_order_follows_solana() {
    let body = body_with_id("1");
    let mut buf = [0u8; 256];
    let out = write_result_str(&mut buf, id_of(&body), "abc").unwrap();
    assert_eq!(out, br#"{"jsonrpc":"2.0","result":"abc","id":1}"#);
}

#[test]
fn string_result_is_escaped() {
    let mut buf = [0u8; 256];
    let out = write_result_str(&mut buf, Id::NULL, "a\"b\\c\u{1}é").unwrap();
    let v: Value = serde_json::from_slice(out).unwrap();
    assert_eq!(v["result"], "a\"b\\c\u{1}é");
}

proptest::proptest! {
    /// Escapes land anywhere in or across the 16-byte blocks the writer skips plain runs by.
    #[test]
    fn any_string_result_reads_back_as_written(
        s in "([a-zA-Z0-9]{0,40}[\"\\\\\u{0}-\u{1f}é€😀]?){0,6}"
    ) {
        let mut buf = [0u8; 4096];
        let out = write_result_str(&mut buf, Id::NULL, &s).unwrap();
        let v: Value = serde_json::from_slice(out).unwrap();
        proptest::prop_assert_eq!(v["result"].as_str(), Some(s.as_str()));
    }
}

#[test]
fn raw_result_round_trips_tip_accounts() {
    let accounts = bundle_relay::jito::TIP_ACCOUNTS;
    let array = serde_json::to_vec(&accounts).unwrap();
    let body = body_with_id("42");
    let mut buf = [0u8; 1024];
    let out = write_result_raw(&mut buf, id_of(&body), &array).unwrap();
    let v: Value = serde_json::from_slice(out).unwrap();
    assert_eq!(v, json!({"jsonrpc": "2.0", "result": accounts, "id": 42}));
    assert!(out.starts_with(br#"{"jsonrpc":"2.0","result":["#));
}

#[test]
fn every_parse_failure_round_trips_as_an_error_object() {
    let bodies = [
        "",
        "{",
        r#"[{"jsonrpc":"2.0"}]"#,
        r#""x""#,
        r#"{"jsonrpc":"2.0","id":1,"method":"getTipAccounts","method":"x"}"#,
        r#"{"id":1,"method":"getTipAccounts"}"#,
        r#"{"jsonrpc":"1.0","id":"a","method":"getTipAccounts"}"#,
        r#"{"jsonrpc":"2.0","id":{},"method":"getTipAccounts"}"#,
        r#"{"jsonrpc":"2.0","id":"q","method":"a\"b\u0007"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"sendBundle","params":[["a"],{"encoding":"hex"}]}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"sendBundle","params":[[1]]}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"getBundleStatuses","params":[[]]}"#,
    ];
    for body in bodies {
        let err = parse_request(body.as_bytes()).unwrap_err();
        let (_, v) = error_response(err.id, &err);
        let expected_id: Value = serde_json::from_slice(err.id.raw()).unwrap();
        assert_eq!(
            v,
            json!({
                "jsonrpc": "2.0",
                "error": {"code": err.code, "message": err.to_string()},
                "id": expected_id,
            }),
            "body {body:?}"
        );
    }
}

#[test]
fn error_field_order_follows_solana() {
    let body = body_with_id("9");
    let err = RpcError::internal("boom");
    let (out, _) = error_response(id_of(&body), &err);
    assert_eq!(
        out,
        br#"{"jsonrpc":"2.0","error":{"code":-32603,"message":"boom"},"id":9}"#
    );
}

#[test]
fn error_messages_escape_quotes_backslashes_and_controls_and_pass_utf8_through() {
    let cause = "bad \"sig\" \\ tab\there\u{1f} nul\u{0} — ü😀";
    let err = RpcError::invalid_transaction(1, &cause);
    let (out, v) = error_response(Id::NULL, &err);
    assert_eq!(v["error"]["message"], format!("transaction 1: {cause}"));
    assert_eq!(v["error"]["code"], code::INVALID_PARAMS);
    let text = std::str::from_utf8(&out).unwrap();
    assert!(
        text.contains(r#"bad \"sig\" \\ tab\there\u001f nul\u0000 — ü😀"#),
        "{text}"
    );
}

#[test]
fn overflow_is_reported_not_truncated() {
    let mut small = [0u8; 20];
    assert_eq!(
        write_result_str(&mut small, Id::NULL, BUNDLE_ID),
        Err(Overflow)
    );
    let mut w = Writer::new(&mut small);
    w.bytes(b"0123456789");
    w.escaped("\u{1}\u{1}");
    assert!(w.is_overflowed());
    assert_eq!(w.finish(), Err(Overflow));
    // Exactly full is not an overflow.
    let mut exact = [0u8; 4];
    let mut w = Writer::new(&mut exact);
    w.escaped("\n\t");
    assert_eq!(w.finish().unwrap(), br"\n\t");
}

#[test]
fn worst_case_error_responses_fit_error_response_len_max() {
    let id = format!("\"{}\"", "\\u0001".repeat((ID_LEN_MAX - 2) / 6));
    let id_body = body_with_id(&id);
    let id = id_of(&id_body);
    assert!(id.raw().len() <= ID_LEN_MAX);

    let cause = "\u{1}".repeat(ERROR_CAUSE_LEN_MAX * 2);
    let err = RpcError::invalid_transaction(usize::MAX, &cause);
    let mut buf = [0u8; ERROR_RESPONSE_LEN_MAX];
    write_error(&mut buf, id, &err).expect("longest cause fits");

    let name = "\\u0001".repeat(1000);
    for body in [
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{name}"}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"x","{name}":1,"{name}":2}}"#),
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"sendBundle","params":[["a"],{{"encoding":"{name}"}}]}}"#
        ),
    ] {
        let err = parse_request(body.as_bytes()).unwrap_err();
        write_error(&mut buf, id, &err).expect("longest quoted name fits");
    }
}

// ---- an engine's answer to a forwarded sendTransaction ----

mod engine_reply {
    use bundle_relay::jsonrpc::fuzz_reply;
    use proptest::prelude::*;
    use proptest::test_runner::RngSeed;

    #[test]
    fn jitos_answers_read_as_serde_json_reads_them() {
        for body in [
            r#"{"jsonrpc":"2.0","result":"5VERv8NMvzbJMEkV8xnrLkEaWRtSz9CosKDYjCJjBRn","id":1}"#,
            r#"{"jsonrpc":"2.0","error":{"code":-32097,"message":"Network congested. Endpoint is globally rate limited."},"id":null}"#,
            r#"{"error":{"code":9223372036854775807,"message":"a \"quoted\" \u00e9"},"result":1}"#,
            r#"{"error":{"code":-0,"message":7}}"#,
            r#"{"result":"a","result":"b"}"#,
            r#"{"result":1e999}"#,
        ] {
            fuzz_reply(body.as_bytes());
        }
    }

    fn config() -> ProptestConfig {
        ProptestConfig {
            cases: 1024,
            rng_seed: RngSeed::Fixed(2026),
            ..ProptestConfig::default()
        }
    }

    /// JSON-RPC-like documents built from the members an engine sends, and a few it does not.
    fn reply() -> impl Strategy<Value = String> {
        let value = prop_oneof![
            Just("null".to_string()),
            any::<i64>().prop_map(|v| v.to_string()),
            any::<f64>().prop_map(|v| format!("{v:?}").replace("inf", "1e999")),
            ".{0,12}".prop_map(|s| serde_json::to_string(&s).unwrap()),
            Just("[1,{\"a\":2}]".to_string()),
        ];
        let member = prop_oneof![
            value.clone().prop_map(|v| format!("\"result\":{v}")),
            (value.clone(), value.clone())
                .prop_map(|(c, m)| format!("\"error\":{{\"code\":{c},\"message\":{m}}}")),
            value.prop_map(|v| format!("\"id\":{v}")),
        ];
        proptest::collection::vec(member, 0..4).prop_map(|m| format!("{{{}}}", m.join(",")))
    }

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn built_replies_read_as_serde_json_reads_them(body in reply()) {
            fuzz_reply(body.as_bytes());
        }

        #[test]
        fn any_bytes_read_as_serde_json_reads_them(data in proptest::collection::vec(any::<u8>(), 0..48)) {
            fuzz_reply(&data);
        }
    }
}

/// An engine's answer to a forwarded bundle-status query read as serde_json reads it.
mod status_reply {
    use bundle_relay::jsonrpc::fuzz_status_reply;
    use proptest::prelude::*;
    use proptest::test_runner::RngSeed;

    #[test]
    fn jitos_status_answers_read_as_serde_json_reads_them() {
        for body in [
            r#"{"jsonrpc":"2.0","result":{"context":{"slot":280999028},"value":[{"bundle_id":"b1","status":"Landed","landed_slot":280999025},{"bundle_id":"b2","status":"Invalid","landed_slot":null}]},"id":1}"#,
            r#"{"jsonrpc":"2.0","result":{"context":{"slot":7},"value":[null,{"bundle_id":"x","transactions":["s"],"slot":5,"confirmation_status":"finalized","err":{"Ok":null}}]},"id":1}"#,
            r#"{"jsonrpc":"2.0","error":{"code":-32097,"message":"Rate limit exceeded. Limit: 1 per second for txn requests. Back-off triggered: Retry after 1606ms"},"id":1}"#,
            r#"{"result":{"context":{"slot":1},"context":7,"value":[{"status":"Landed","status":1,"landed_slot":-1}]}}"#,
            r#"{"result":{"value":[1,"a",[{}]],"value":{}}}"#,
            r#"{"result":{"context":{"slot":18446744073709551616}}}"#,
        ] {
            fuzz_status_reply(body.as_bytes());
        }
    }

    /// Status answers built from the members an engine sends, duplicated and mistyped too.
    fn reply() -> impl Strategy<Value = String> {
        let scalar = prop_oneof![
            Just("null".to_string()),
            any::<i64>().prop_map(|v| v.to_string()),
            any::<u64>().prop_map(|v| v.to_string()),
            Just("1.5".to_string()),
            "[a-zA-Z]{0,8}".prop_map(|s| serde_json::to_string(&s).unwrap()),
        ];
        let entry_member = prop_oneof![
            scalar.clone().prop_map(|v| format!("\"bundle_id\":{v}")),
            prop_oneof![Just("\"Landed\"".to_string()), scalar.clone()]
                .prop_map(|v| format!("\"status\":{v}")),
            scalar.clone().prop_map(|v| format!("\"landed_slot\":{v}")),
        ];
        let entry = prop_oneof![
            scalar.clone(),
            proptest::collection::vec(entry_member, 0..4)
                .prop_map(|m| format!("{{{}}}", m.join(","))),
        ];
        let result_member = prop_oneof![
            scalar
                .clone()
                .prop_map(|v| format!("\"context\":{{\"slot\":{v}}}")),
            scalar.clone().prop_map(|v| format!("\"context\":{v}")),
            proptest::collection::vec(entry, 0..4)
                .prop_map(|e| format!("\"value\":[{}]", e.join(","))),
        ];
        let member = prop_oneof![
            proptest::collection::vec(result_member, 0..4)
                .prop_map(|m| format!("\"result\":{{{}}}", m.join(","))),
            scalar.clone().prop_map(|v| format!("\"result\":{v}")),
            (scalar.clone(), scalar.clone())
                .prop_map(|(c, m)| format!("\"error\":{{\"code\":{c},\"message\":{m}}}")),
            scalar.prop_map(|v| format!("\"id\":{v}")),
        ];
        proptest::collection::vec(member, 0..4).prop_map(|m| format!("{{{}}}", m.join(",")))
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 1024,
            rng_seed: RngSeed::Fixed(2026),
            ..ProptestConfig::default()
        })]

        #[test]
        fn built_status_answers_read_as_serde_json_reads_them(body in reply()) {
            fuzz_status_reply(body.as_bytes());
        }

        #[test]
        fn any_bytes_read_as_a_status_answer_as_serde_json_reads_them(data in proptest::collection::vec(any::<u8>(), 0..48)) {
            fuzz_status_reply(&data);
        }
    }
}
