//! The tip accounts answered to `getTipAccounts`: Jito's published list until an engine
//! answers a GetTipAccounts call, then the engines' latest answer.
//!
//! An answer is `GetTipAccountsResponse { repeated string accounts = 1 }`. It is decoded by
//! [`decode_accounts`], a pure function over the message bytes that follows the protobuf wire
//! rules a real engine may use (multi-byte varints, fields this schema does not know yet), and
//! is kept only if every account is a public key, so a garbled answer never reaches a bot.

use prost::Message;

use crate::clock::{Instant, Ticks};
use crate::grpc::protowire::{Fields, Value};
use crate::proto::searcher::GetTipAccountsResponse;
use crate::wire::{self, Encoding, PACKET_DATA_SIZE};

/// How often the tip accounts are asked of an engine (they change rarely).
pub const TIP_REFRESH_MS: u64 = 300_000;
/// After a failed or impossible refresh, try again this soon.
pub const TIP_RETRY_MS: u64 = 5_000;

/// Accounts kept from an answer. Jito has 8; an answer with more than this is not truncated
/// (a bot would tip only some of the accounts) but refused, and the previous list stays.
pub const TIP_ACCOUNTS_MAX: usize = 16;
/// The longest base58 text of a 32-byte key; anything longer is not a key.
pub const KEY_BASE58_LEN_MAX: usize = 44;
/// The JSON array of [`TIP_ACCOUNTS_MAX`] accounts: each quoted and comma-separated, inside
/// brackets.
pub const TIP_JSON_BYTES: usize = TIP_ACCOUNTS_MAX * (KEY_BASE58_LEN_MAX + 3) + 2;

/// A public key's length in bytes.
const KEY_BYTES: usize = 32;
/// `accounts` in `GetTipAccountsResponse`.
const ACCOUNTS_FIELD: u32 = 1;

/// The tip accounts as JSON, refreshed from the engines.
pub(super) struct TipCache {
    json: [u8; TIP_JSON_BYTES],
    len: usize,
    /// When the next GetTipAccounts call is due.
    pub(super) due: Instant,
    /// A GetTipAccounts call is on a pair.
    pub(super) in_flight: bool,
    /// The call on a pair has its answer (kept or refused).
    answered: bool,
    /// When the refresh now wanted first came due (a retry moves `due`, not this).
    pub(super) wanted_since: Instant,
}

impl TipCache {
    pub(super) fn new(now: Instant) -> TipCache {
        let mut c = TipCache {
            json: [0; TIP_JSON_BYTES],
            len: 0,
            due: now,
            in_flight: false,
            answered: false,
            wanted_since: now,
        };
        let d = crate::jito::TIP_ACCOUNTS_JSON;
        c.json[..d.len()].copy_from_slice(d);
        c.len = d.len();
        c
    }

    pub(super) fn json(&self) -> &[u8] {
        &self.json[..self.len]
    }

    pub(super) fn call_started(&mut self) {
        self.in_flight = true;
        self.answered = false;
    }

    /// The call ended: the next is due a refresh period on if the engine answered (kept or
    /// refused: asking again sooner would get the same answer), a retry's wait on if not.
    pub(super) fn call_ended(&mut self, now: Instant, refresh: Ticks, retry: Ticks) {
        self.in_flight = false;
        self.due = now.after(if self.answered { refresh } else { retry });
        if self.answered {
            self.wanted_since = self.due;
        }
    }

    /// The refresh has waited a whole `refresh` period past its due time (every region it
    /// could use was busy with bundles): it goes before them now.
    pub(super) fn starved(&self, now: Instant, refresh: Ticks) -> bool {
        !self.in_flight && now.0 >= self.due.0 && now.since(self.wanted_since).0 >= refresh.0
    }

    /// Keeps an engine's answer if [`decode_accounts`] accepts it (true); otherwise the
    /// previous list stays (false).
    pub(super) fn refresh(&mut self, msg: &[u8]) -> bool {
        self.answered = true;
        let mut out = [0u8; TIP_JSON_BYTES];
        let Some(len) = decode_accounts(msg, &mut out) else {
            return false;
        };
        self.json = out;
        self.len = len;
        true
    }
}

/// Decodes a `GetTipAccountsResponse` into `out` as a JSON array of its accounts, returning the
/// array's length, or `None` if the answer is not to be kept: malformed protobuf (what prost
/// would refuse), an account that is not the base58 text of a 32-byte key, no accounts, or
/// more than [`TIP_ACCOUNTS_MAX`].
///
/// Fields other than `accounts` are skipped by their wire type, as protobuf requires, so a
/// field an engine adds later does not cost the whole answer. `out` may be written either way.
pub fn decode_accounts(msg: &[u8], out: &mut [u8; TIP_JSON_BYTES]) -> Option<usize> {
    let mut count = 0;
    out[0] = b'[';
    let mut len = 1;
    for f in Fields::new(msg) {
        let (field, value) = f.ok()?;
        if field != ACCOUNTS_FIELD {
            continue;
        }
        // A string field sent with another wire type is malformed, not unknown.
        let Value::Len(acct) = value else {
            return None;
        };
        if count == TIP_ACCOUNTS_MAX || !is_key(acct) {
            return None;
        }
        if count > 0 {
            out[len] = b',';
            len += 1;
        }
        out[len] = b'"';
        out[len + 1..len + 1 + acct.len()].copy_from_slice(acct);
        out[len + 1 + acct.len()] = b'"';
        len += acct.len() + 2;
        count += 1;
    }
    if count == 0 {
        return None;
    }
    out[len] = b']';
    Some(len + 1)
}

/// The base58 text of a 32-byte key (which is 32 to 44 characters long).
fn is_key(text: &[u8]) -> bool {
    if text.len() > KEY_BASE58_LEN_MAX {
        return false;
    }
    let mut key = [0u8; PACKET_DATA_SIZE];
    matches!(
        wire::decode(Encoding::Base58, text, &mut key),
        Ok(KEY_BYTES)
    )
}

/// The `tip_accounts` fuzz target's body (also run as a seeded proptest in
/// `tests/relay/tips.rs`): whatever the bytes, [`decode_accounts`] must not panic and must
/// keep exactly the answers prost decodes into 1 to [`TIP_ACCOUNTS_MAX`] keys, rendered as
/// their JSON array; the cache must serve that array, or keep its list when the answer is
/// refused. Returns the array kept, for oracles outside the library (serde_json).
pub fn fuzz_answer(data: &[u8]) -> Option<Vec<u8>> {
    let mut out = [0u8; TIP_JSON_BYTES];
    let ours = decode_accounts(data, &mut out).map(|n| out[..n].to_vec());

    // The oracle: prost's decoding, then the key rule checked with the bs58 crate.
    let key = |a: &String| {
        bs58::decode(a)
            .into_vec()
            .is_ok_and(|k| k.len() == KEY_BYTES)
    };
    let theirs = GetTipAccountsResponse::decode(data)
        .ok()
        .map(|m| m.accounts)
        .filter(|a| (1..=TIP_ACCOUNTS_MAX).contains(&a.len()) && a.iter().all(key))
        .map(|a| {
            let quoted: Vec<String> = a.iter().map(|s| format!("\"{s}\"")).collect();
            format!("[{}]", quoted.join(",")).into_bytes()
        });
    assert_eq!(ours, theirs, "{data:?}");

    let mut cache = TipCache::new(Instant(0));
    let before = cache.json().to_vec();
    let kept = cache.refresh(data);
    assert_eq!(cache.json(), ours.as_deref().unwrap_or(&before));
    assert_eq!(kept, ours.is_some());
    ours
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::protowire::GROUP_DEPTH_MAX;

    /// Field 1 with a one-byte length, as engines send it today.
    fn answer(accounts: &[&str]) -> Vec<u8> {
        let mut m = Vec::new();
        for a in accounts {
            m.push(0x0a);
            m.push(a.len() as u8);
            m.extend_from_slice(a.as_bytes());
        }
        m
    }

    fn decoded(msg: &[u8]) -> Option<String> {
        let mut out = [0u8; TIP_JSON_BYTES];
        let n = decode_accounts(msg, &mut out)?;
        Some(String::from_utf8(out[..n].to_vec()).unwrap())
    }

    const A: &str = "96gYZGLnJYVFmbjzopPSU6QiEV5fGqZNyN9nmNhvrZU5";
    const B: &str = "HFqU5x63VTqvQss8hp11i4wVV8bD44PvwucfZ2bU7gRe";
    /// 32 zero bytes: the shortest key text.
    const ZERO_KEY: &str = "11111111111111111111111111111111";

    #[test]
    fn an_engines_tip_accounts_replace_the_builtin_list() {
        let mut c = TipCache::new(Instant(0));
        assert!(c.refresh(&answer(&[B, A])));
        assert_eq!(c.json(), format!("[\"{B}\",\"{A}\"]").as_bytes());
    }

    #[test]
    fn a_garbled_or_empty_answer_keeps_the_previous_list() {
        let mut c = TipCache::new(Instant(0));
        let before = c.json().to_vec();
        for bad in [
            answer(&[]),
            answer(&["not base58 0OIl but long enough to pass the length"]),
            answer(&["short"]),
            vec![0x12, 2, b'a', b'b'],
            vec![0x0a, 40, b'a'],
        ] {
            assert!(!c.refresh(&bad), "{bad:?}");
            assert_eq!(c.json(), &before[..], "{bad:?}");
        }
    }

    #[test]
    fn a_two_byte_length_is_read_whole() {
        // An unknown string of 200 bytes (length 0xc8 0x01) before the account.
        let mut m = vec![0x12, 0xc8, 0x01];
        m.extend([b'x'; 200]);
        m.extend(answer(&[A]));
        assert_eq!(decoded(&m), Some(format!("[\"{A}\"]")));
        // The account's own length in two bytes (overlong, still valid protobuf).
        let mut m = vec![0x0a, 0x80 | A.len() as u8, 0x00];
        m.extend(A.as_bytes());
        assert_eq!(decoded(&m), Some(format!("[\"{A}\"]")));
        // A length past the message's end.
        assert_eq!(decoded(&[0x12, 0xc8, 0x01, b'x']), None);
    }

    #[test]
    fn unknown_fields_of_every_wire_type_are_skipped() {
        let unknown: &[&[u8]] = &[
            &[0x10, 0xff, 0xff, 0x01],          // field 2, varint
            &[0x19, 1, 2, 3, 4, 5, 6, 7, 8],    // field 3, fixed64
            &[0x22, 3, 0x0a, 1, b'x'],          // field 4, bytes holding a field-1 look-alike
            &[0x2d, 1, 2, 3, 4],                // field 5, fixed32
            &[0x33, 0x0a, 1, b'x', 0x34],       // field 6, a group holding a field 1
            &[0xf8, 0xff, 0xff, 0xff, 0x0f, 7], // field 2^29 - 1, the largest
        ];
        for u in unknown {
            let mut m = u.to_vec();
            m.extend(answer(&[A]));
            m.extend_from_slice(u);
            m.extend(answer(&[B]));
            assert_eq!(decoded(&m), Some(format!("[\"{A}\",\"{B}\"]")), "{u:?}");
        }
    }

    #[test]
    fn a_malformed_field_refuses_the_answer() {
        let bad: &[&[u8]] = &[
            &[0x08, 1],                         // field 1 as a varint: a string field's wrong type
            &[0x02, 0],                         // field 0
            &[0x16, 0],                         // wire type 6
            &[0x34],                            // an end-group with no group open
            &[0x33, 0x3c],                      // a group closed by another field's end
            &[0x33],                            // a group never closed
            &[0x10, 0xff],                      // a varint cut short
            &[0x8a, 0x80, 0x80, 0x80, 0x10, 0], // field 1 in a key past 32 bits
            &[
                0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02,
            ], // past 64 bits
            &[0x19, 1, 2, 3],                   // a fixed64 cut short
        ];
        for b in bad {
            let mut m = answer(&[A]);
            m.extend_from_slice(b);
            assert_eq!(decoded(&m), None, "{b:?}");
        }
    }

    #[test]
    fn the_accounts_field_sent_as_a_group_refuses_the_answer_as_prost_does() {
        let mut m = answer(&[A]);
        m.extend([0x0b, 0x10, 1, 0x0c]); // field 1 as a group holding a varint
        assert_eq!(fuzz_answer(&m), None);
    }

    #[test]
    fn groups_nested_deeper_than_prost_allows_are_refused() {
        let nested = |depth: usize| {
            let mut m = answer(&[A]);
            m.extend(std::iter::repeat_n(0x13, depth)); // field 2, start group
            m.extend([0x18, 1]); // field 3, varint, innermost
            m.extend(std::iter::repeat_n(0x14, depth));
            m
        };
        assert!(fuzz_answer(&nested(GROUP_DEPTH_MAX - 1)).is_some());
        assert_eq!(fuzz_answer(&nested(GROUP_DEPTH_MAX)), None);
    }

    #[test]
    fn an_account_that_is_not_a_32_byte_key_refuses_the_answer() {
        assert!(decoded(&answer(&[ZERO_KEY])).is_some());
        // 45 characters: over the longest key text.
        let long = format!("{A}1");
        // 44 characters of base58, but a number past 2^256.
        let big = "z".repeat(KEY_BASE58_LEN_MAX);
        // 31 zero bytes, and 33.
        let short = &ZERO_KEY[1..];
        let zeros33 = format!("{ZERO_KEY}1");
        for bad in [&long[..], &big, short, &zeros33, "", "0OIl"] {
            assert_eq!(decoded(&answer(&[A, bad])), None, "{bad}");
        }
    }

    #[test]
    fn more_accounts_than_kept_refuse_the_answer() {
        let full = answer(&[A; TIP_ACCOUNTS_MAX]);
        let json = decoded(&full).unwrap();
        assert_eq!(json.matches(A).count(), TIP_ACCOUNTS_MAX);
        let over = answer(&[A; TIP_ACCOUNTS_MAX + 1]);
        assert_eq!(decoded(&over), None);
    }

    #[test]
    fn the_fuzz_body_accepts_real_answers() {
        assert!(fuzz_answer(&answer(&[A, B])).is_some());
        assert!(fuzz_answer(&[0x0a]).is_none());
    }
}
