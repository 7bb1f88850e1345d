//! Differential: a GetTipAccounts answer is kept exactly when prost decodes it into valid keys
//! (the body asserts that); a kept array must also read back with serde_json as those keys.
#![no_main]

use bundle_relay::relay::tips;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(json) = tips::fuzz_answer(data) {
        let accounts: Vec<String> = serde_json::from_slice(&json).expect("a JSON array of strings");
        for a in &accounts {
            assert_eq!(bs58::decode(a).into_vec().map(|k| k.len()), Ok(32), "{a}");
        }
    }
});
