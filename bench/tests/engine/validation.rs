//! Every packet is checked with the Solana crates; Jito's bundle id; duplicates; the recorder;
//! the other searcher methods.

use crate::support;

use bundle_relay::proto::bundle::Bundle;
use bundle_relay::proto::packet::{Meta, Packet};
use bundle_relay::proto::searcher::{
    GetRegionsRequest, GetTipAccountsRequest, NextScheduledLeaderRequest, SendBundleRequest,
};
use bundle_relay_bench::engine::{EngineConfig, TIP_ACCOUNTS, testkit, validate};
use support::engine::*;
use tonic::Code;

fn cfg() -> EngineConfig {
    EngineConfig {
        record: true,
        ..EngineConfig::for_tests(&["ny", "tokyo"])
    }
}

fn packets(txs: Vec<Vec<u8>>) -> SendBundleRequest {
    testkit::send_bundle_request(&txs)
}

#[tokio::test]
async fn bad_packet_is_invalid_argument_and_counted() {
    let h = start(cfg()).await;
    let ny = addr_of(&h, "ny");
    let good = || bundle_txs(1, 1).remove(0);
    let mut trailing = good();
    trailing.push(0);
    let mut unsanitary = good();
    unsanitary[65] = 2; // header claims 2 signers: more than the one signature present
    let mut wrong_meta = packets(vec![good()]);
    wrong_meta.bundle.as_mut().unwrap().packets[0]
        .meta
        .as_mut()
        .unwrap()
        .size = 7;
    let six = packets((0..6).map(|i| bundle_txs(i, 1).remove(0)).collect());
    let oversized = packets(vec![vec![0u8; 1233]]);
    let empty = SendBundleRequest {
        bundle: Some(Bundle::default()),
    };
    let no_meta = SendBundleRequest {
        bundle: Some(Bundle {
            header: None,
            packets: vec![Packet {
                data: good(),
                meta: None,
            }],
        }),
    };
    // Decision table: bundle → message naming the fault, counter it lands in.
    let table: Vec<(&str, SendBundleRequest, &str, &str)> = vec![
        (
            "garbage 2nd packet",
            packets(vec![good(), vec![1, 2, 3]]),
            "packet 1: not a transaction",
            "decode",
        ),
        (
            "trailing byte",
            packets(vec![trailing]),
            "packet 0: not a transaction",
            "decode",
        ),
        (
            "fails sanitize",
            packets(vec![good(), unsanitary]),
            "packet 1: transaction fails sanitize",
            "sanitize",
        ),
        (
            "meta.size wrong",
            wrong_meta,
            "packet 0: meta.size 7 differs from data length 250",
            "meta_size",
        ),
        (
            "meta missing",
            no_meta,
            "packet 0: meta.size 0 differs",
            "meta_size",
        ),
        (
            "six packets",
            six,
            "bundle has 6 packets, at most 5",
            "too_many_packets",
        ),
        (
            "over 1232 bytes",
            oversized,
            "packet 0: 1233 bytes, more than PACKET_DATA_SIZE 1232",
            "packet_too_large",
        ),
        ("no packets", empty, "bundle has no packets", "no_packets"),
        (
            "no bundle",
            SendBundleRequest { bundle: None },
            "SendBundleRequest has no bundle",
            "no_bundle",
        ),
    ];
    for (i, (name, req, want, _)) in table.iter().enumerate() {
        let mut c = client(ny, src(i as u8 + 1)).await;
        let e = c.send_bundle(req.clone()).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{name}");
        assert!(e.message().contains(want), "{name}: {:?}", e.message());
    }
    let s = h.stats();
    // One count per refused bundle under its reason, and nothing else refused.
    let mut expected = std::collections::BTreeMap::new();
    for (_, _, _, reason) in &table {
        *expected.entry(reason.to_string()).or_insert(0u64) += 1;
    }
    let counted: std::collections::BTreeMap<String, u64> = s
        .rejected
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(r, n)| (r.clone(), *n))
        .collect();
    assert_eq!(counted, expected, "refusals by reason");
    assert_eq!(s.decode_failures, 3);
    assert_eq!(s.accepted, 0);
    assert!(h.recorded().is_empty());
}

#[tokio::test]
async fn malformed_protobuf_and_framing_are_refused() {
    let h = start(cfg()).await;
    let (mut send, _c) = h2_connect(addr_of(&h, "ny"), src(1)).await;
    let r = h2_call(
        &mut send,
        "SendBundle",
        bytes::Bytes::from_static(&[0, 0, 0, 0, 2, 0xff, 0xff]),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 3);
    assert!(
        r.message.contains("not a SendBundleRequest"),
        "{}",
        r.message
    );
    let (mut send, _c) = h2_connect(addr_of(&h, "ny"), src(2)).await;
    let r = h2_call(
        &mut send,
        "SendBundle",
        bytes::Bytes::from_static(&[0, 0, 0, 0, 9, 1]),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 13);
    assert!(r.message.contains("prefix says 9 bytes"), "{}", r.message);
    let r = h2_call(&mut send, "Nope", bytes::Bytes::new())
        .await
        .unwrap();
    assert_eq!(
        (r.status, r.message.as_str()),
        (12, "unknown method /searcher.SearcherService/Nope")
    );
    let s = h.stats();
    assert_eq!(
        (
            s.rejected["protobuf"],
            s.rejected["grpc_framing"],
            s.unknown_method
        ),
        (1, 1, 1)
    );
}

#[tokio::test]
async fn bundle_id_matches_jitos_known_answer() {
    let h = start(cfg()).await;
    let sigs = [
        "3bC2M9fiACSjkTXZDgeNAuQ4ScTsdKGwR42ytFdhUvikqTmBheUxfsR1fDVsM5ADCMMspuwGkdm1uKbU246x5aE3",
        "8t9hKYEYNbLvNqiSzP96S13XF1C2f1ro271Kdf7bkZ6EpjPLuDff1ywRy4gfaGSTubsM2FeYGDoT64ZwPm1cQUt",
    ];
    let mut txs = bundle_txs(5, 2);
    for (tx, sig) in txs.iter_mut().zip(sigs) {
        tx[1..65].copy_from_slice(&bs58::decode(sig).into_vec().unwrap());
    }
    let mut c = client(addr_of(&h, "ny"), src(1)).await;
    let r = c.send_bundle(packets(txs)).await.unwrap().into_inner();
    assert_eq!(
        r.uuid,
        "892b79ed49138bfb3aa5441f0df6e06ef34f9ee8f3976c15b323605bae0cf51d"
    );
}

#[tokio::test]
async fn duplicate_bundle_is_counted() {
    let h = start(cfg()).await;
    let ny = addr_of(&h, "ny");
    let mut a = client(ny, src(1)).await;
    let mut b = client(ny, src(2)).await;
    let first = a.send_bundle(bundle(7)).await.unwrap().into_inner().uuid;
    let again = b.send_bundle(bundle(7)).await.unwrap().into_inner().uuid;
    assert_eq!(first, again);
    b.send_bundle(bundle(8)).await.unwrap_err(); // early: not a duplicate, not accepted
    let s = h.stats();
    assert_eq!((s.accepted, s.duplicates), (2, 1));
}

#[tokio::test]
async fn recorder_keeps_every_accepted_bundle_byte_identical_with_its_id() {
    let h = start(cfg()).await;
    let mut sent = Vec::new();
    for (n, region) in [(1u8, "ny"), (2, "tokyo"), (3, "ny")] {
        let txs = bundle_txs(n as u64, n);
        let mut c = client(addr_of(&h, region), src(n)).await;
        let uuid = c
            .send_bundle(packets(txs.clone()))
            .await
            .unwrap()
            .into_inner()
            .uuid;
        let sigs: Vec<[u8; 64]> = txs.iter().map(|t| t[1..65].try_into().unwrap()).collect();
        assert_eq!(uuid, validate::hex(&validate::bundle_id(&sigs)));
        sent.push((uuid, region, src(n), txs));
    }
    let rec = h.recorded();
    assert_eq!(rec.len(), sent.len());
    for (r, (uuid, region, source, txs)) in rec.iter().zip(&sent) {
        assert_eq!(
            (&r.id, r.region.as_str(), r.source),
            (uuid, *region, *source)
        );
        assert_eq!(&r.packets, txs);
    }
}

#[tokio::test]
async fn other_methods_answer_like_the_engine() {
    let h = start(cfg()).await;
    for (name, addr) in h.region_addrs() {
        let mut c = client(addr, src(1)).await;
        let r = c
            .get_regions(GetRegionsRequest {})
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.current_region, name);
        assert_eq!(r.available_regions, ["ny", "tokyo"]);
    }
    let mut c = client(addr_of(&h, "ny"), src(1)).await;
    let tips = c
        .get_tip_accounts(GetTipAccountsRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(tips.accounts, TIP_ACCOUNTS);
    let next = c
        .get_next_scheduled_leader(NextScheduledLeaderRequest {
            regions: vec!["tokyo".into()],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(next.next_leader_region, "tokyo");
    assert!(next.next_leader_slot > next.current_slot);
    assert!(!next.next_leader_identity.is_empty());
    assert_eq!(h.stats().send_bundle_calls, 0);
}

#[test]
fn hand_built_packets_carry_the_meta_jitos_clients_send() {
    let req = packets(vec![vec![1, 2, 3]]);
    let p = &req.bundle.unwrap().packets[0];
    assert_eq!(
        p.meta,
        Some(Meta {
            size: 3,
            ..Meta::default()
        })
    );
}
