//! The baseline's pure pieces: Retry-After parsing, JSON-RPC decoding, bundle ids and config.

use bundle_relay::jito::{GLOBAL_THROTTLE_MESSAGE, RETRY_AFTER_PREFIX, rate_limit_message};
use bundle_relay::wire::Encoding;
use bundle_relay_bench::baseline::config::{
    self, BaselineConfig, nofile_fits, parse_egress, parse_engine,
};
use bundle_relay_bench::baseline::parse_retry_after_ms;
use bundle_relay_bench::baseline::rpc::{self, bundle_id_of};

#[test]
fn retry_after_is_read_from_jitos_message_and_absent_otherwise() {
    let table: [(String, Option<u64>); 7] = [
        (rate_limit_message(1606), Some(1606)),
        (format!("{RETRY_AFTER_PREFIX}30000ms"), Some(30000)),
        (format!("{RETRY_AFTER_PREFIX}0ms"), Some(0)),
        (GLOBAL_THROTTLE_MESSAGE.into(), None),
        (format!("{RETRY_AFTER_PREFIX}ms"), None),
        (format!("{RETRY_AFTER_PREFIX}12s"), None),
        (String::new(), None),
    ];
    for (message, want) in table {
        assert_eq!(parse_retry_after_ms(&message), want, "{message:?}");
    }
}

#[test]
fn bundle_id_matches_jitos_known_answer() {
    let joined = "3bC2M9fiACSjkTXZDgeNAuQ4ScTsdKGwR42ytFdhUvikqTmBheUxfsR1fDVsM5ADCMMspuwGkdm1uKbU246x5aE3,\
                  8t9hKYEYNbLvNqiSzP96S13XF1C2f1ro271Kdf7bkZ6EpjPLuDff1ywRy4gfaGSTubsM2FeYGDoT64ZwPm1cQUt";
    assert_eq!(
        bundle_id_of(joined),
        "892b79ed49138bfb3aa5441f0df6e06ef34f9ee8f3976c15b323605bae0cf51d"
    );
}

#[test]
fn decode_tx_rejects_bad_input_naming_the_index() {
    let table: [(&str, Encoding, &str); 4] = [
        ("0OIl", Encoding::Base58, "transaction 3: invalid base58"),
        ("!!!!", Encoding::Base64, "transaction 3: invalid base64"),
        (
            "11",
            Encoding::Base58,
            "transaction 3: failed to deserialize",
        ),
        ("", Encoding::Base58, "transaction 3: failed to deserialize"),
    ];
    for (s, encoding, want) in table {
        let e = rpc::decode_tx(3, s, encoding).unwrap_err();
        assert_eq!(e.code, rpc::code::INVALID_PARAMS);
        assert!(e.message.starts_with(want), "{s:?}: {}", e.message);
    }
    let long = "A".repeat(1645);
    let e = rpc::decode_tx(0, &long, Encoding::Base64).unwrap_err();
    assert!(
        e.message.contains("1645 chars, longest allowed is 1644"),
        "{}",
        e.message
    );
    // 1233 bytes of base64 fits the string cap but not the packet.
    use base64::Engine as _;
    let big = base64::engine::general_purpose::STANDARD.encode(vec![1u8; 1233]);
    let e = rpc::decode_tx(1, &big, Encoding::Base64).unwrap_err();
    assert!(
        e.message.contains("1233 bytes, longest allowed is 1232"),
        "{}",
        e.message
    );
}

#[test]
fn envelope_errors_use_the_standard_codes() {
    let table: [(&str, i32); 4] = [
        ("not json", rpc::code::PARSE_ERROR),
        (
            r#"{"jsonrpc":"1.0","id":1,"method":"sendBundle"}"#,
            rpc::code::INVALID_REQUEST,
        ),
        (r#"{"jsonrpc":"2.0","id":1}"#, rpc::code::INVALID_REQUEST),
        (r#"[1,2]"#, rpc::code::PARSE_ERROR),
    ];
    for (body, code) in table {
        let Err((_, e)) = rpc::parse_request(body.as_bytes()) else {
            panic!("{body} parsed")
        };
        assert_eq!(e.code, code, "{body}");
    }
    let r = rpc::parse_request(br#"{"jsonrpc":"2.0","id":{"a":[1]},"method":"x"}"#)
        .ok()
        .unwrap();
    assert_eq!(r.id, r#"{"a":[1]}"#, "the id is echoed as sent");
}

#[test]
fn egress_lists_expand_cidr_ranges_and_reject_mistakes() {
    assert_eq!(parse_egress("127.1.0.0/26").unwrap().len(), 64);
    let v = parse_egress("127.1.0.5/30, 10.0.0.9").unwrap();
    let shown: Vec<String> = v.iter().map(|a| a.to_string()).collect();
    assert_eq!(
        shown,
        [
            "127.1.0.4",
            "127.1.0.5",
            "127.1.0.6",
            "127.1.0.7",
            "10.0.0.9"
        ]
    );
    assert_eq!(parse_egress("::1/127").unwrap().len(), 2);
    for (bad, want) in [
        ("127.1.0.0/33", "longer than 32 bits"),
        ("127.1.0.0/8", "more than 65536"),
        ("127.1.0.300", "not an IP address"),
        ("127.1.0.1,127.1.0.1", "listed twice"),
        ("", "no addresses"),
        ("127.1.0.0/x", "bad prefix length"),
    ] {
        let e = parse_egress(bad).unwrap_err().to_string();
        assert!(e.contains(want), "{bad:?}: {e}");
    }
}

#[test]
fn engines_parse_as_name_equals_address() {
    let (name, addr) = parse_engine("ny=127.0.0.15:10000").unwrap();
    assert_eq!(
        (name.as_str(), addr.to_string().as_str()),
        ("ny", "127.0.0.15:10000")
    );
    assert!(parse_engine("ny").is_err());
    assert!(parse_engine("=1.2.3.4:5").is_err());
    assert!(parse_engine("ny=localhost").is_err());
}

#[test]
fn defaults_are_the_mainnet_regions_on_the_synthetic_engines_addresses() {
    let cfg = BaselineConfig::default();
    let names: Vec<&str> = cfg.regions.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, config::MAINNET_REGIONS);
    assert_eq!(cfg.regions[0].1.to_string(), "127.0.0.11:10000");
    assert_eq!(cfg.regions[7].1.to_string(), "127.0.0.18:10000");
    assert_eq!(cfg.egress.len(), 64);
    assert_eq!(cfg.rotating_addr.to_string(), "127.0.0.1:8080");
    assert_eq!(cfg.pinned_addr(0).to_string(), "127.0.0.1:8081");
    assert_eq!(cfg.pinned_addr(7).to_string(), "127.0.0.1:8088");
    assert!(cfg.validate().is_ok());
}

#[test]
fn the_open_file_check_counts_pairs_intake_and_slack() {
    let mut cfg = BaselineConfig::default();
    // 64 x 8 pairs + 1024 intake + 64 spare = 1600.
    assert_eq!(cfg.fds_needed(), 1600);
    assert!(nofile_fits(&cfg, 1600, 1600).is_ok());
    let e = nofile_fits(&cfg, 1599, 20_000).unwrap_err().to_string();
    assert!(
        e.contains("needs 1600 open files") && e.contains("RLIMIT_NOFILE is 1599"),
        "{e}"
    );
    cfg.egress = parse_egress("127.2.0.0/20").unwrap();
    let e = nofile_fits(&cfg, 20_000, 20_000).unwrap_err().to_string();
    assert!(
        e.contains("32768 upstream connections = 4096 egress addresses x 8 regions"),
        "{e}"
    );
}

#[test]
fn config_validation_names_the_problem() {
    let mut cfg = BaselineConfig::default();
    cfg.regions.push(cfg.regions[0].clone());
    assert!(
        cfg.validate()
            .unwrap_err()
            .to_string()
            .contains("amsterdam is configured twice")
    );
    let cfg = BaselineConfig {
        interval_ms: 0,
        ..BaselineConfig::default()
    };
    assert!(
        cfg.validate()
            .unwrap_err()
            .to_string()
            .contains("interval_ms")
    );
    let cfg = BaselineConfig {
        max_in_flight: 0,
        ..BaselineConfig::default()
    };
    assert!(
        cfg.validate()
            .unwrap_err()
            .to_string()
            .contains("max_in_flight")
    );
}
