//! The request decision table: what each body is answered with.

use bundle_relay::jito::code;
use bundle_relay::jsonrpc::{
    Call, DEPTH_MAX, ERROR_CAUSE_LEN_MAX, ErrorKind, Expected, ID_LEN_MAX, Method,
    QUOTED_CHARS_MAX, Request, RpcError, parse_request,
};
use bundle_relay::wire::{
    BASE58_LEN_MAX, BASE64_LEN_MAX, DecodeError, Encoding, Field, TxError, WireError,
};

fn ok(body: &str) -> Request<'_> {
    match parse_request(body.as_bytes()) {
        Ok(r) => r,
        Err(e) => panic!("{body:?} was refused: {} {e}", e.code),
    }
}

fn err(body: &str) -> RpcError<'_> {
    match parse_request(body.as_bytes()) {
        Ok(r) => panic!("{body:?} was accepted: {r:?}"),
        Err(e) => e,
    }
}

/// Asserts the code and the exact message.
fn refused(body: &str, code: i32, message: &str) {
    let e = err(body);
    assert_eq!(
        (e.code, e.to_string().as_str()),
        (code, message),
        "body {body:?}"
    );
}

fn send_bundle(params: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":1,"method":"sendBundle","params":{params}}}"#)
}

fn tx(len: usize) -> String {
    "A".repeat(len)
}

fn transactions(call: &Call<'_>) -> (Vec<Vec<u8>>, Encoding) {
    match call {
        Call::SendBundle {
            transactions,
            encoding,
            ..
        } => (
            transactions.iter().map(|t| t.raw().to_vec()).collect(),
            *encoding,
        ),
        other => panic!("not sendBundle: {other:?}"),
    }
}

// ---- sendBundle ----

#[test]
fn send_bundle_without_options_defaults_to_base58() {
    let body = send_bundle(r#"[["AbC","dEf"]]"#);
    let r = ok(&body);
    assert_eq!(r.method(), Method::SendBundle);
    assert_eq!(
        transactions(&r.call),
        (vec![b"AbC".to_vec(), b"dEf".to_vec()], Encoding::Base58)
    );
}

#[test]
fn send_bundle_with_base64_option_is_base64() {
    let body = send_bundle(r#"[["AbC"],{"encoding":"base64"}]"#);
    assert_eq!(transactions(&ok(&body).call).1, Encoding::Base64);
}

#[test]
fn send_bundle_with_base58_option_is_base58() {
    let body = send_bundle(r#"[["AbC"],{"encoding":"base58"}]"#);
    assert_eq!(transactions(&ok(&body).call).1, Encoding::Base58);
}

#[test]
fn send_bundle_with_null_options_defaults_to_base58() {
    let body = send_bundle(r#"[["AbC"],null]"#);
    assert_eq!(transactions(&ok(&body).call).1, Encoding::Base58);
}

#[test]
fn send_bundle_ignores_unknown_option_keys() {
    let body = send_bundle(
        r#"[["AbC"],{"skipPreflight":true,"encoding":"base64","x":{"deep":[1,{"y":null}]}}]"#,
    );
    assert_eq!(transactions(&ok(&body).call).1, Encoding::Base64);
}

#[test]
fn unknown_encoding_is_invalid_params_naming_it() {
    refused(
        &send_bundle(r#"[["AbC"],{"encoding":"base65"}]"#),
        code::INVALID_PARAMS,
        r#"unsupported encoding "base65": use base58 or base64"#,
    );
    // Encodings Solana knows for other calls are still not transaction encodings here.
    refused(
        &send_bundle(r#"[["AbC"],{"encoding":"json"}]"#),
        code::INVALID_PARAMS,
        r#"unsupported encoding "json": use base58 or base64"#,
    );
}

#[test]
fn unknown_encoding_with_quotes_and_controls_is_quoted_safely() {
    refused(
        &send_bundle(r#"[["AbC"],{"encoding":"a\"b\u0001"}]"#),
        code::INVALID_PARAMS,
        r#"unsupported encoding "a\"b\u0001": use base58 or base64"#,
    );
}

#[test]
fn encoding_that_is_not_a_string_is_invalid_params() {
    refused(
        &send_bundle(r#"[["AbC"],{"encoding":64}]"#),
        code::INVALID_PARAMS,
        r#""encoding" must be a string, not a number"#,
    );
}

#[test]
fn options_that_are_not_an_object_are_invalid_params_naming_the_index() {
    refused(
        &send_bundle(r#"[["AbC"],"base64"]"#),
        code::INVALID_PARAMS,
        "params[1] must be an options object, not a string",
    );
}

#[test]
fn five_transactions_are_accepted_in_order() {
    let body = send_bundle(r#"[["a","b","c","d","e"],{"encoding":"base64"}]"#);
    let (txs, _) = transactions(&ok(&body).call);
    assert_eq!(txs, [b"a", b"b", b"c", b"d", b"e"].map(|t| t.to_vec()));
}

#[test]
fn six_transactions_are_invalid_params_naming_the_count() {
    refused(
        &send_bundle(r#"[["a","b","c","d","e","f"]]"#),
        code::INVALID_PARAMS,
        "expected 1 to 5 transactions, got 6",
    );
    refused(
        &send_bundle(r#"[["a","b","c","d","e","f",7]]"#),
        code::INVALID_PARAMS,
        "expected 1 to 5 transactions, got 7",
    );
}

#[test]
fn zero_transactions_are_invalid_params_naming_the_count() {
    refused(
        &send_bundle("[[]]"),
        code::INVALID_PARAMS,
        "expected 1 to 5 transactions, got 0",
    );
}

#[test]
fn non_string_transaction_is_invalid_params_naming_its_index() {
    refused(
        &send_bundle(r#"[["a","b","c",{"tx":1}]]"#),
        code::INVALID_PARAMS,
        "transaction 3 is not a string",
    );
    refused(
        &send_bundle(r#"[[null]]"#),
        code::INVALID_PARAMS,
        "transaction 0 is not a string",
    );
}

#[test]
fn transaction_list_that_is_not_an_array_is_invalid_params() {
    refused(
        &send_bundle(r#"["AbC"]"#),
        code::INVALID_PARAMS,
        "params[0] must be an array of transactions, not a string",
    );
}

#[test]
fn overlong_base64_transaction_is_invalid_params_naming_index_and_length() {
    let params = format!(r#"[["a","b","{}"],{{"encoding":"base64"}}]"#, tx(1700));
    refused(
        &send_bundle(&params),
        code::INVALID_PARAMS,
        "transaction 2 is 1700 characters; base64 allows at most 1644",
    );
}

#[test]
fn transactions_at_their_encoding_cap_are_accepted_and_one_more_is_not() {
    for (encoding, cap) in [("base64", BASE64_LEN_MAX), ("base58", BASE58_LEN_MAX)] {
        let at = format!(r#"[["{}"],{{"encoding":"{encoding}"}}]"#, tx(cap));
        ok(&send_bundle(&at));
        let over = format!(r#"[["{}"],{{"encoding":"{encoding}"}}]"#, tx(cap + 1));
        refused(
            &send_bundle(&over),
            code::INVALID_PARAMS,
            &format!(
                "transaction 0 is {} characters; {encoding} allows at most {cap}",
                cap + 1
            ),
        );
    }
}

#[test]
fn escaped_slash_in_base64_is_unescaped() {
    let body = send_bundle(r#"[["ab\/cd+ef\/=="],{"encoding":"base64"}]"#);
    let r = ok(&body);
    let Call::SendBundle { transactions, .. } = r.call else {
        panic!("not sendBundle")
    };
    let t = transactions.as_slice()[0];
    assert!(t.has_escapes());
    assert_eq!(t.raw(), br"ab\/cd+ef\/==");
    let mut buf = [0u8; BASE64_LEN_MAX];
    assert_eq!(t.unescape_into(&mut buf).unwrap(), b"ab/cd+ef/==");
    assert_eq!(t.unescaped_len(), 11);
}

#[test]
fn unescaped_transaction_uses_the_raw_fast_path() {
    let body = send_bundle(r#"[["ab/cd"]]"#);
    let r = ok(&body);
    let Call::SendBundle { transactions, .. } = r.call else {
        panic!("not sendBundle")
    };
    let t = transactions.as_slice()[0];
    assert!(!t.has_escapes());
    assert_eq!(t.as_str(), Some("ab/cd"));
}

#[test]
fn escaped_transaction_length_is_counted_after_unescaping() {
    // 1644 characters, 200 of them written as "\/": 1844 raw bytes, still within base64's cap.
    let s = format!("{}{}", "\\/".repeat(200), tx(BASE64_LEN_MAX - 200));
    let body = send_bundle(&format!(r#"[["{s}"],{{"encoding":"base64"}}]"#));
    ok(&body);
    let s = format!("{}{}", "\\/".repeat(200), tx(BASE64_LEN_MAX - 199));
    refused(
        &send_bundle(&format!(r#"[["{s}"],{{"encoding":"base64"}}]"#)),
        code::INVALID_PARAMS,
        "transaction 0 is 1645 characters; base64 allows at most 1644",
    );
}

#[test]
fn unescape_into_a_short_buffer_reports_the_length_needed() {
    let body = send_bundle(r#"[["ab\/cd"]]"#);
    let r = ok(&body);
    let Call::SendBundle { transactions, .. } = r.call else {
        panic!("not sendBundle")
    };
    let mut small = [0u8; 4];
    assert_eq!(
        transactions.as_slice()[0]
            .unescape_into(&mut small)
            .unwrap_err()
            .needed,
        5
    );
}

/// Cut to a buffer, a string keeps its whole characters: each buffer size gives the longest
/// prefix of the unescaped text that fits and ends on a character, and says it was cut.
#[test]
fn unescape_prefix_into_keeps_the_whole_characters_that_fit() {
    let body = send_bundle(r#"[["aé\u00e9\/x"]]"#);
    let r = ok(&body);
    let Call::SendBundle { transactions, .. } = r.call else {
        panic!("not sendBundle")
    };
    let whole = "aéé/x";
    for room in 0..=whole.len() + 1 {
        let mut out = vec![0u8; room];
        let (got, cut) = transactions.as_slice()[0].unescape_prefix_into(&mut out);
        let got = std::str::from_utf8(got).expect("whole characters");
        let want = (0..=room.min(whole.len()))
            .rev()
            .find(|&n| whole.is_char_boundary(n))
            .map(|n| &whole[..n])
            .unwrap();
        assert_eq!((got, cut), (want, room < whole.len()), "room {room}");
    }
}

#[test]
fn send_bundle_with_three_params_is_invalid_params() {
    refused(
        &send_bundle(r#"[["a"],{},{}]"#),
        code::INVALID_PARAMS,
        "sendBundle expects [[transaction, ...], options] (1 to 2 params), got 3",
    );
}

#[test]
fn send_bundle_without_params_is_invalid_params() {
    refused(
        r#"{"jsonrpc":"2.0","id":1,"method":"sendBundle"}"#,
        code::INVALID_PARAMS,
        "sendBundle expects [[transaction, ...], options] (1 to 2 params), got 0",
    );
    refused(
        &send_bundle("[]"),
        code::INVALID_PARAMS,
        "sendBundle expects [[transaction, ...], options] (1 to 2 params), got 0",
    );
}

#[test]
fn params_that_are_not_an_array_are_invalid_params() {
    refused(
        &send_bundle(r#"{"transactions":["a"]}"#),
        code::INVALID_PARAMS,
        "sendBundle params must be an array, not an object",
    );
}

// ---- sendTransaction ----

#[test]
fn send_transaction_takes_one_string_and_ignores_other_solana_options() {
    let r = ok(
        r#"{"jsonrpc":"2.0","id":"t","method":"sendTransaction","params":["AbC",{"encoding":"base64","skipPreflight":true,"maxRetries":0}]}"#,
    );
    match r.call {
        Call::SendTransaction {
            transaction,
            encoding,
            encoding_given,
        } => {
            assert_eq!(transaction.raw(), b"AbC");
            assert_eq!(encoding, Encoding::Base64);
            assert!(encoding_given);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn send_transaction_without_options_defaults_to_base58() {
    let r = ok(r#"{"jsonrpc":"2.0","id":1,"method":"sendTransaction","params":["AbC"]}"#);
    assert!(matches!(
        r.call,
        Call::SendTransaction {
            encoding: Encoding::Base58,
            encoding_given: false,
            ..
        }
    ));
}

#[test]
fn send_transaction_with_a_non_string_is_invalid_params() {
    refused(
        r#"{"jsonrpc":"2.0","id":1,"method":"sendTransaction","params":[["AbC"]]}"#,
        code::INVALID_PARAMS,
        "transaction 0 is not a string",
    );
}

#[test]
fn send_transaction_overlong_is_invalid_params() {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"sendTransaction","params":["{}"]}}"#,
        tx(BASE58_LEN_MAX + 5)
    );
    refused(
        &body,
        code::INVALID_PARAMS,
        "transaction 0 is 1688 characters; base58 allows at most 1683",
    );
}

// ---- getTipAccounts, getBundleStatuses, getInflightBundleStatuses ----

#[test]
fn get_tip_accounts_with_empty_absent_or_null_params_is_accepted() {
    for body in [
        r#"{"jsonrpc":"2.0","id":1,"method":"getTipAccounts","params":[]}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"getTipAccounts"}"#,
        // Jito's own Python SDK (jito_py_rpc) sends its absent params as `[None]`.
        r#"{"jsonrpc":"2.0","id":1,"method":"getTipAccounts","params":[null]}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"getTipAccounts","params":[ null , null ]}"#,
        // Jito's own Go SDK (jito-go-rpc) sends its absent params as `null`.
        r#"{"jsonrpc":"2.0","id":1,"method":"getTipAccounts","params":null}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"getTipAccounts","params": null }"#,
    ] {
        assert_eq!(ok(body).call, Call::GetTipAccounts);
    }
}

/// `"params":null` is params left out, as JSON-RPC 2.0 allows: a method that needs some says
/// how many it expects, not that null is not an array.
#[test]
fn null_params_are_absent_params() {
    refused(
        r#"{"jsonrpc":"2.0","id":1,"method":"sendBundle","params":null}"#,
        code::INVALID_PARAMS,
        "sendBundle expects [[transaction, ...], options] (1 to 2 params), got 0",
    );
}

#[test]
fn get_tip_accounts_with_params_is_invalid_params() {
    refused(
        r#"{"jsonrpc":"2.0","id":1,"method":"getTipAccounts","params":[1]}"#,
        code::INVALID_PARAMS,
        "getTipAccounts expects [], got 1 params",
    );
}

#[test]
fn bundle_status_methods_take_one_to_five_ids() {
    let sent: Vec<String> = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|c| c.repeat(64))
        .collect();
    for method in ["getBundleStatuses", "getInflightBundleStatuses"] {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":[["{}"]]}}"#,
            sent.join("\",\"")
        );
        let r = ok(&body);
        let ids = match r.call {
            Call::GetBundleStatuses { bundle_ids } => {
                assert_eq!(method, "getBundleStatuses");
                bundle_ids
            }
            Call::GetInflightBundleStatuses { bundle_ids } => {
                assert_eq!(method, "getInflightBundleStatuses");
                bundle_ids
            }
            other => panic!("{other:?}"),
        };
        let raw: Vec<&[u8]> = ids.iter().map(|s| s.raw()).collect();
        let want: Vec<&[u8]> = sent.iter().map(|s| s.as_bytes()).collect();
        assert_eq!(raw, want);
    }
}

#[test]
fn inflight_statuses_refuse_an_id_that_is_not_64_hex_characters_naming_it() {
    refused(
        r#"{"jsonrpc":"2.0","id":1,"method":"getInflightBundleStatuses","params":[["xyz"]]}"#,
        code::INVALID_PARAMS,
        "bundle id 0 is \"xyz\": a bundle id is the 64 hex characters sendBundle answered",
    );
}

#[test]
fn bundle_delivery_takes_one_bundle_id() {
    let id = "0f".repeat(32);
    let body =
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"getBundleDelivery","params":["{id}"]}}"#);
    match ok(&body).call {
        Call::GetBundleDelivery { bundle_id } => assert_eq!(bundle_id.raw(), id.as_bytes()),
        other => panic!("{other:?}"),
    }
    refused(
        r#"{"jsonrpc":"2.0","id":1,"method":"getBundleDelivery","params":[]}"#,
        code::INVALID_PARAMS,
        "getBundleDelivery expects [bundle id], got 0 params",
    );
}

#[test]
fn bundle_status_methods_refuse_six_ids_naming_the_count() {
    refused(
        r#"{"jsonrpc":"2.0","id":1,"method":"getBundleStatuses","params":[["a","b","c","d","e","f"]]}"#,
        code::INVALID_PARAMS,
        "expected 1 to 5 bundle ids, got 6",
    );
}

#[test]
fn bundle_status_methods_refuse_non_string_ids_naming_the_index() {
    refused(
        r#"{"jsonrpc":"2.0","id":1,"method":"getInflightBundleStatuses","params":[["a",2]]}"#,
        code::INVALID_PARAMS,
        "bundle id 1 is not a string",
    );
    refused(
        r#"{"jsonrpc":"2.0","id":1,"method":"getBundleStatuses","params":["a"]}"#,
        code::INVALID_PARAMS,
        "params[0] must be an array of bundle ids, not a string",
    );
    refused(
        r#"{"jsonrpc":"2.0","id":1,"method":"getBundleStatuses","params":[["a"],["b"]]}"#,
        code::INVALID_PARAMS,
        "getBundleStatuses expects [[bundle id, ...]], got 2 params",
    );
}

// ---- id ----

#[test]
fn id_number_string_and_null_are_echoed_byte_for_byte() {
    for id in [
        "1",
        "-0",
        "1.5e+3",
        "18446744073709551616123",
        r#""abc""#,
        r#""a\u0041\/""#,
        r#""""#,
        "null",
    ] {
        let body =
            format!(r#"{{"id":{id},"jsonrpc":"2.0","method":"getTipAccounts","params":[]}}"#);
        assert_eq!(ok(&body).id.raw(), id.as_bytes(), "id {id}");
    }
}

#[test]
fn absent_id_is_answered_as_null() {
    let r = ok(r#"{"jsonrpc":"2.0","method":"getTipAccounts"}"#);
    assert_eq!(r.id.raw(), b"null");
}

#[test]
fn object_array_and_bool_ids_are_invalid_request() {
    for (id, found) in [
        ("{}", "an object"),
        ("[1]", "an array"),
        ("true", "a boolean"),
    ] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"getTipAccounts"}}"#);
        let e = err(&body);
        assert_eq!(e.code, code::INVALID_REQUEST);
        assert_eq!(
            e.to_string(),
            format!("\"id\" must be a number, string or null, not {found}")
        );
        assert_eq!(e.id.raw(), b"null");
    }
}

#[test]
fn overlong_id_is_invalid_request() {
    let id = format!("\"{}\"", "x".repeat(ID_LEN_MAX - 1));
    let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"getTipAccounts"}}"#);
    refused(
        &body,
        code::INVALID_REQUEST,
        &format!(
            "\"id\" is {} bytes of JSON; at most 128 allowed",
            ID_LEN_MAX + 1
        ),
    );
    let id = format!("\"{}\"", "x".repeat(ID_LEN_MAX - 2));
    ok(&format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"getTipAccounts"}}"#
    ));
}

#[test]
fn errors_after_a_valid_id_carry_that_id() {
    let e = err(r#"{"jsonrpc":"2.0","id":"abc","method":"nope"}"#);
    assert_eq!(e.id.raw(), br#""abc""#);
    let e = err(r#"{"id":7,"jsonrpc":"2.0","method":"sendBundle","params":[[]]}"#);
    assert_eq!(e.id.raw(), b"7");
    // An id given twice is ambiguous: answered with null.
    let e = err(r#"{"id":7,"jsonrpc":"2.0","id":8,"method":"getTipAccounts"}"#);
    assert_eq!(e.id.raw(), b"null");
}

// ---- request envelope ----

#[test]
fn batch_request_is_refused_with_invalid_request() {
    let e = err(r#"[{"jsonrpc":"2.0","id":1,"method":"getTipAccounts"}]"#);
    assert_eq!(e.code, code::INVALID_REQUEST);
    assert_eq!(e.kind, ErrorKind::Batch);
    assert_eq!(
        e.to_string(),
        "batch requests are not supported: send one JSON-RPC request per HTTP request"
    );
    assert_eq!(err(" [] ").kind, ErrorKind::Batch);
}

#[test]
fn invalid_json_inside_a_batch_is_a_parse_error() {
    assert_eq!(err(r#"[{"jsonrpc":"2.0",}]"#).code, code::PARSE_ERROR);
}

#[test]
fn non_object_request_is_invalid_request() {
    refused(
        r#""sendBundle""#,
        code::INVALID_REQUEST,
        "request must be a JSON object, not a string",
    );
    refused(
        "42",
        code::INVALID_REQUEST,
        "request must be a JSON object, not a number",
    );
    refused(
        "null",
        code::INVALID_REQUEST,
        "request must be a JSON object, not null",
    );
}

#[test]
fn duplicate_top_level_key_is_invalid_request_naming_it() {
    refused(
        r#"{"jsonrpc":"2.0","id":1,"method":"getTipAccounts","method":"sendBundle"}"#,
        code::INVALID_REQUEST,
        r#"duplicate member "method" in request"#,
    );
    // The same name written with an escape is the same key.
    refused(
        r#"{"jsonrpc":"2.0","id":1,"method":"getTipAccounts","p":1,"\u0070":2}"#,
        code::INVALID_REQUEST,
        r#"duplicate member "p" in request"#,
    );
}

#[test]
fn missing_jsonrpc_is_invalid_request() {
    refused(
        r#"{"id":1,"method":"getTipAccounts"}"#,
        code::INVALID_REQUEST,
        r#"missing member "jsonrpc""#,
    );
}

#[test]
fn jsonrpc_other_than_the_string_2_0_is_invalid_request() {
    for v in [r#""1.0""#, "2.0", "null", r#""2.00""#] {
        let body = format!(r#"{{"jsonrpc":{v},"id":1,"method":"getTipAccounts"}}"#);
        refused(&body, code::INVALID_REQUEST, r#""jsonrpc" must be "2.0""#);
    }
}

#[test]
fn missing_method_is_invalid_request() {
    refused(
        r#"{"jsonrpc":"2.0","id":1}"#,
        code::INVALID_REQUEST,
        r#"missing member "method""#,
    );
    refused("{}", code::INVALID_REQUEST, r#"missing member "jsonrpc""#);
}

#[test]
fn method_that_is_not_a_string_is_invalid_request() {
    refused(
        r#"{"jsonrpc":"2.0","id":1,"method":["sendBundle"]}"#,
        code::INVALID_REQUEST,
        r#""method" must be a string, not an array"#,
    );
}

#[test]
fn unknown_method_is_method_not_found_naming_it() {
    refused(
        r#"{"jsonrpc":"2.0","id":1,"method":"getBalance","params":[]}"#,
        code::METHOD_NOT_FOUND,
        r#"method not found: "getBalance""#,
    );
    // Quotes, backslashes and control characters come back escaped, never raw.
    refused(
        r#"{"jsonrpc":"2.0","id":1,"method":"a\"b\\c\n\u0000"}"#,
        code::METHOD_NOT_FOUND,
        r#"method not found: "a\"b\\c\n\u0000""#,
    );
}

#[test]
fn long_unknown_method_name_is_cut_when_quoted() {
    let name = "m".repeat(1000);
    let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{name}"}}"#);
    refused(
        &body,
        code::METHOD_NOT_FOUND,
        &format!("method not found: \"{}\"…", "m".repeat(QUOTED_CHARS_MAX)),
    );
}

#[test]
fn method_names_are_case_sensitive() {
    assert_eq!(
        err(r#"{"jsonrpc":"2.0","id":1,"method":"sendbundle"}"#).code,
        code::METHOD_NOT_FOUND
    );
}

#[test]
fn escaped_member_names_and_method_names_are_understood() {
    let r = ok(
        r#"{"\u006asonrpc":"2\u002e0","\u0069d":5,"me\u0074hod":"send\u0042undle","params":[["a"]]}"#,
    );
    assert_eq!(r.method(), Method::SendBundle);
    assert_eq!(r.id.raw(), b"5");
}

#[test]
fn unknown_top_level_members_are_ignored() {
    ok(r#"{"jsonrpc":"2.0","id":1,"method":"getTipAccounts","extra":{"a":[1,2,{"b":null}]}}"#);
}

#[test]
fn whitespace_everywhere_is_accepted() {
    let r = ok(
        " \t\r\n{ \"jsonrpc\" : \"2.0\" , \"id\" : 1 ,\n \"method\" : \"sendBundle\" , \"params\" : [ [ \"a\" , \"b\" ] , { \"encoding\" : \"base64\" } ] } \n",
    );
    assert_eq!(
        transactions(&r.call),
        (vec![b"a".to_vec(), b"b".to_vec()], Encoding::Base64)
    );
}

// ---- invalid JSON ----

#[test]
fn invalid_json_is_a_parse_error_with_offset_and_expectation() {
    let table: &[(&str, usize, Expected)] = &[
        ("", 0, Expected::Value),
        ("   ", 3, Expected::Value),
        ("{", 1, Expected::Key),
        (r#"{"a" 1}"#, 5, Expected::Colon),
        (r#"{"a":1 "b":2}"#, 7, Expected::CommaOrObjectEnd),
        (r#"{"a":[1 2]}"#, 8, Expected::CommaOrArrayEnd),
        (r#"{"a":[1,]}"#, 8, Expected::Value),
        (r#"{"a":1,}"#, 7, Expected::Key),
        (r#"{"a":01}"#, 6, Expected::CommaOrObjectEnd),
        (r#"{"a":1.}"#, 7, Expected::Digit),
        (r#"{"a":-}"#, 6, Expected::Digit),
        (r#"{"a":1e}"#, 7, Expected::Digit),
        (r#"{"a":tru}"#, 8, Expected::Literal("true")),
        (r#"{"a":nul"#, 8, Expected::Literal("null")),
        (r#"{"a":"\x"}"#, 7, Expected::Escape),
        (r#"{"a":"\u12G4"}"#, 10, Expected::HexDigit),
        (r#"{"a":"abc"#, 9, Expected::StringEnd),
        ("{\"a\":\"a\tb\"}", 7, Expected::EscapedControl),
        (r#"{"a":1} x"#, 8, Expected::End),
        (r#"{"a":1}{}"#, 7, Expected::End),
        (r#"{'a':1}"#, 1, Expected::Key),
        (r#"{"a":+1}"#, 5, Expected::Value),
        (r#"{"a":NaN}"#, 5, Expected::Value),
    ];
    for &(body, offset, expected) in table {
        let e = err(body);
        assert_eq!(e.code, code::PARSE_ERROR, "{body:?}");
        assert_eq!(e.kind, ErrorKind::Parse { offset, expected }, "{body:?}");
        assert_eq!(e.id.raw(), b"null");
    }
    refused(
        r#"{"a":1 "b":2}"#,
        code::PARSE_ERROR,
        "parse error at byte 7: expected ',' or '}'",
    );
}

#[test]
fn parse_error_beats_invalid_request_earlier_in_the_document() {
    let e = err(r#"{"jsonrpc":"1.0","id":{},"method":"x","method":"y", oops}"#);
    assert_eq!(e.code, code::PARSE_ERROR);
}

#[test]
fn invalid_utf8_in_a_string_is_a_parse_error_at_its_offset() {
    for bad in [
        &b"\xff"[..],
        b"\xc0\xaf",
        b"\xe0\x80\xaf",
        b"\xed\xa0\x80",
        b"\xf4\x90\x80\x80",
        b"\xe2\x82",
    ] {
        let mut body = br#"{"a":"xy"#.to_vec();
        body.extend_from_slice(bad);
        body.extend_from_slice(br#""}"#);
        let e = parse_request(&body).unwrap_err();
        assert_eq!(
            e.kind,
            ErrorKind::Parse {
                offset: 8,
                expected: Expected::Utf8
            },
            "{bad:x?}"
        );
    }
    ok("{\"jsonrpc\":\"2.0\",\"method\":\"getTipAccounts\",\"é€😀\":\"ü\"}");
}

#[test]
fn lone_surrogate_escapes_are_a_parse_error_and_pairs_are_accepted() {
    for s in [r"\ud800", r"\udc00", r"\ud800\u0041", r"\ud800x"] {
        let body = format!(r#"{{"a":"{s}"}}"#);
        assert_eq!(
            err(&body).kind,
            ErrorKind::Parse {
                offset: 6,
                expected: Expected::SurrogatePair
            },
            "{s}"
        );
    }
    ok(r#"{"jsonrpc":"2.0","method":"getTipAccounts","x":"\ud83d\ude00"}"#);
}

#[test]
fn nesting_up_to_max_depth_is_accepted_and_deeper_is_a_parse_error() {
    let nest = |levels: usize| {
        format!(
            r#"{{"jsonrpc":"2.0","method":"getTipAccounts","x":{}{}}}"#,
            "[".repeat(levels),
            "]".repeat(levels)
        )
    };
    // The request object is one level.
    ok(&nest(DEPTH_MAX - 1));
    let body = nest(DEPTH_MAX);
    let e = err(&body);
    assert_eq!(
        e.kind,
        ErrorKind::Parse {
            offset: body.find('[').unwrap() + DEPTH_MAX - 1,
            expected: Expected::ShallowerNesting
        }
    );
    // Far deeper input neither recurses nor overflows the stack.
    let deep = "[".repeat(1_000_000);
    assert_eq!(err(&deep).code, code::PARSE_ERROR);
}

// ---- errors from other layers ----

#[test]
fn invalid_transaction_renders_index_and_cause_as_invalid_params() {
    let e = RpcError::invalid_transaction(2, &"signature count 3 exceeds the 2 required signers");
    assert_eq!(e.code, code::INVALID_PARAMS);
    assert_eq!(
        e.to_string(),
        "transaction 2: signature count 3 exceeds the 2 required signers"
    );
}

/// Every reason the wire layer gives, each number at its widest: a transaction's counts and
/// offsets come from compact-u16s and bytes of a 1,232-byte packet, so 65,535 bounds them.
fn widest_wire_errors() -> Vec<WireError> {
    const W: usize = u16::MAX as usize;
    let fields = [
        Field::SignatureCount,
        Field::Signatures,
        Field::MessageHeader,
        Field::AccountKeyCount,
        Field::AccountKeys,
        Field::RecentBlockhash,
        Field::InstructionCount,
        Field::ProgramIdIndex { instruction: W },
        Field::AccountIndexCount { instruction: W },
        Field::AccountIndexes { instruction: W },
        Field::DataLength { instruction: W },
        Field::Data { instruction: W },
        Field::LookupCount,
        Field::LookupTableKey { lookup: W },
        Field::WritableIndexCount { lookup: W },
        Field::WritableIndexes { lookup: W },
        Field::ReadonlyIndexCount { lookup: W },
        Field::ReadonlyIndexes { lookup: W },
    ];
    let mut all = Vec::new();
    for field in fields {
        all.push(TxError::Truncated { field, offset: W });
        all.push(TxError::NonCanonicalLength { field, offset: W });
        all.push(TxError::LengthTooLong { field, offset: W });
        all.push(TxError::LengthOverflow { field, offset: W });
    }
    all.extend([
        TxError::TooLong { len: W },
        TxError::UnsupportedVersion { version: 127 },
        TxError::UnsupportedVersion { version: 255 },
        TxError::TrailingBytes { count: W },
        TxError::HeaderExceedsAccounts {
            required_signatures: 255,
            readonly_unsigned: 255,
            static_accounts: W,
        },
        TxError::NoWritableFeePayer {
            required_signatures: 255,
            readonly_signed: 255,
        },
        TxError::EmptyLookup { lookup: W },
        TxError::TooManyAccounts {
            static_accounts: W,
            lookup_accounts: 2 * W,
        },
        TxError::ProgramIdOutOfRange {
            instruction: W,
            index: 255,
            static_accounts: W,
        },
        TxError::ProgramIdIsFeePayer { instruction: W },
        TxError::AccountIndexOutOfRange {
            instruction: W,
            index: 255,
            accounts: W,
        },
        TxError::SignatureCountMismatch {
            signatures: W,
            required: 255,
        },
    ]);
    let mut decode = Vec::new();
    for encoding in [Encoding::Base58, Encoding::Base64] {
        decode.extend([
            DecodeError::TooLong {
                encoding,
                len: W,
                max: W,
            },
            DecodeError::InvalidCharacter {
                encoding,
                byte: b'!',
                position: W,
            },
            DecodeError::InvalidCharacter {
                encoding,
                byte: 0x1f,
                position: W,
            },
        ]);
    }
    decode.extend([
        DecodeError::Base64LengthNotQuad { len: W },
        DecodeError::Base64TrailingBits { position: W },
        DecodeError::DecodedTooLong { len: W, max: W },
    ]);
    let all = all.into_iter().map(WireError::Tx);
    all.chain(decode.into_iter().map(WireError::Decode))
        .collect()
}

#[test]
fn every_reason_a_transaction_is_refused_is_answered_whole_at_its_widest() {
    for cause in widest_wire_errors() {
        let e = RpcError::invalid_transaction(4, &cause);
        assert_eq!(
            e.to_string(),
            format!("transaction 4: {cause}"),
            "{cause:?}"
        );
    }
}

#[test]
fn long_invalid_transaction_cause_is_cut_at_a_character_boundary() {
    // Two-byte characters across an odd boundary: the cut must not split one.
    let cause = format!("x{}", "é".repeat(ERROR_CAUSE_LEN_MAX));
    let e = RpcError::invalid_transaction(0, &cause);
    let ErrorKind::InvalidTransaction { cause: kept, .. } = e.kind else {
        panic!("{e:?}")
    };
    assert!(kept.is_truncated());
    assert_eq!(kept.as_str(), &cause[..ERROR_CAUSE_LEN_MAX - 1]);
    assert_eq!(e.to_string(), format!("transaction 0: {}…", kept.as_str()));
}

#[test]
fn rate_limited_uses_jitos_code_and_retry_after_wording() {
    let e = RpcError::rate_limited(1606);
    assert_eq!(e.code, code::RATE_LIMITED);
    assert_eq!(e.code, -32097);
    assert!(e.to_string().ends_with("Retry after 1606ms"), "{e}");
}

#[test]
fn internal_error_is_32603_with_its_message() {
    let e = RpcError::internal("arena exhausted");
    assert_eq!(
        (e.code, e.to_string().as_str()),
        (code::INTERNAL, "arena exhausted")
    );
    assert_eq!(code::INTERNAL, -32603);
}

#[test]
fn standard_codes_have_their_json_rpc_values() {
    assert_eq!(
        [
            code::PARSE_ERROR,
            code::INVALID_REQUEST,
            code::METHOD_NOT_FOUND,
            code::INVALID_PARAMS
        ],
        [-32700, -32600, -32601, -32602]
    );
}
