//! Bundles no engine could ever take, refused at intake with -32602 naming what is wrong,
//! before a slot or a pair is spent on them. A transaction twice in one bundle is one: the
//! validator refuses a bundle that repeats a transaction, so it could never land.

use crate::dispatcher_support::one_region;
use crate::intake_support::{bundle, send_bundle_body};

use bundle_relay::relay::intake::Verdict;

#[test]
fn a_bundle_that_repeats_a_transaction_is_refused_naming_both_places() {
    let (mut t, _, now) = one_region(1_000, 2_000);
    let (txs, _, _) = bundle(7, 3);
    for (list, repeat, first) in [
        (vec![txs[0].clone(), txs[0].clone()], 1, 0),
        (vec![txs[0].clone(), txs[1].clone(), txs[0].clone()], 2, 0),
        (vec![txs[0].clone(), txs[1].clone(), txs[1].clone()], 2, 1),
    ] {
        let v = t.post(&send_bundle_body(&list, 1), now);
        assert_eq!(v, Verdict::Invalid, "{}", t.response());
        let answer = t.response();
        assert!(answer.contains("\"code\":-32602"), "{answer}");
        let said = format!(
            "transaction {repeat}: repeats transaction {first} (same signature): a bundle's \
             transactions must differ"
        );
        assert!(answer.contains(&said), "{answer}");
    }
    let s = t.totals();
    assert_eq!((s.admitted, s.in_flight), (0, 0), "{s:?}");
    // The same transactions once each are a bundle.
    assert_eq!(t.post(&send_bundle_body(&txs, 2), now), Verdict::Admitted);
    assert!(t.d.check_accounting());
}
