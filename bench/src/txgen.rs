//! Pre-generated, really signed Jito bundles for the load generator.
//!
//! Each bundle is 1 to 5 Solana transactions written by hand in the wire format (bincode of
//! `VersionedTransaction`): compact-u16 signature count, ed25519 signatures, then a legacy or v0
//! message. Every transaction is a system-program transfer from its signer; the last one of each
//! bundle also tips one of Jito's eight tip accounts, and some carry compute-budget instructions.
//! Every `recent_blockhash` is the bench [`Tag`] of its bundle, so the synthetic engine can join a
//! delivery with its send time.
//!
//! A bundle is kept as the complete HTTP/1.1 `sendBundle` request (so the load generator's hot
//! path only copies bytes), its expected bundle id and, on request, the raw transactions.
//! Everything about bundle `seq` is a pure function of `(seed, run_id, seq)`: generation is
//! reproducible and splits across threads freely.
//!
//! Measured cost: an ed25519 signature per transaction, and base58 encoding, which is
//! quadratic in the transaction length and costs about twice as much as everything else
//! together. [`generate`] spreads the work over every core and reports its rate in
//! [`GenStats`]: on the 2-core host under a load average of 12, 3,400 bundles/s for base64 and
//! 1,100 bundles/s for the default half-base58 mix (release build).

use std::fmt;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use base64::Engine as _;
use bundle_relay::wire::{BUNDLE_TXS_MAX, Encoding, PACKET_DATA_SIZE};
use ed25519_dalek::{Signer as _, SigningKey};
use sha2::{Digest, Sha256};

use crate::tag::Tag;

pub use bundle_relay::jito::{TIP_ACCOUNTS, TIP_LAMPORTS_MIN};

/// `ComputeBudget111111111111111111111111111111`.
pub const COMPUTE_BUDGET_PROGRAM: &str = "ComputeBudget111111111111111111111111111111";
/// The system program's id is 32 zero bytes (`11111111111111111111111111111111`).
pub const SYSTEM_PROGRAM: [u8; 32] = [0; 32];
/// Distinct fee payers to sign with: enough that bundles do not all come from one account.
pub const SIGNERS_DEFAULT: usize = 64;
/// The first byte of a v0 message (high bit set, version 0).
const V0_PREFIX: u8 = 0x80;

/// What to generate.
#[derive(Clone, Debug)]
pub struct TxGenConfig {
    pub seed: u64,
    /// Written into every tag; see [`Tag::run_id`].
    pub run_id: u32,
    /// `(transactions per bundle, weight)`, e.g. `[(1, 20), (3, 60), (5, 20)]`.
    pub txs_mix: Vec<(u8, u32)>,
    /// `(encoding, weight)` of the transaction strings. Base58 bundles omit the options object
    /// half of the time, so the default encoding is exercised too.
    pub encoding_mix: Vec<(Encoding, u32)>,
    /// Share of transactions with a v0 message, 0 to 100.
    pub v0_percent: u8,
    /// Share of transactions with compute-budget instructions (unit limit and price), 0 to 100.
    pub compute_budget_percent: u8,
    /// Number of signing keypairs derived from the seed.
    pub signers: usize,
    /// The `Host` header of every request.
    pub host: String,
    /// An `x-jito-auth` header on every request: the tenant's key.
    pub auth: Option<String>,
    /// Keep each bundle's raw transaction bytes (tests that check byte-identical delivery).
    pub keep_raw_txs: bool,
}

impl Default for TxGenConfig {
    fn default() -> Self {
        TxGenConfig {
            seed: 1,
            run_id: 1,
            txs_mix: vec![(1, 20), (3, 60), (5, 20)],
            encoding_mix: vec![(Encoding::Base64, 50), (Encoding::Base58, 50)],
            v0_percent: 50,
            compute_budget_percent: 50,
            signers: SIGNERS_DEFAULT,
            host: "127.0.0.1".to_string(),
            auth: None,
            keep_raw_txs: false,
        }
    }
}

/// A bad generator setting, naming what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MixError(pub String);

impl fmt::Display for MixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for MixError {}

/// Parses `--txs-mix`: comma-separated `count:weight` items, count 1 to 5.
pub fn parse_txs_mix(s: &str) -> Result<Vec<(u8, u32)>, MixError> {
    let mix = parse_mix(s, |k| match k.parse::<u8>() {
        Ok(n) if (1..=BUNDLE_TXS_MAX as u8).contains(&n) => Some(n),
        _ => None,
    })?;
    Ok(mix)
}

/// Parses `--encoding-mix`: comma-separated `base64:weight` / `base58:weight` items.
pub fn parse_encoding_mix(s: &str) -> Result<Vec<(Encoding, u32)>, MixError> {
    parse_mix(s, |k| match k {
        "base64" => Some(Encoding::Base64),
        "base58" => Some(Encoding::Base58),
        _ => None,
    })
}

fn parse_mix<K>(s: &str, key: impl Fn(&str) -> Option<K>) -> Result<Vec<(K, u32)>, MixError> {
    let mut out = Vec::new();
    for (i, item) in s.split(',').enumerate() {
        let (k, w) = item
            .split_once(':')
            .ok_or_else(|| MixError(format!("mix item {i} ({item:?}) is not key:weight")))?;
        let k = key(k.trim())
            .ok_or_else(|| MixError(format!("mix item {i} ({item:?}) has an unknown key")))?;
        let w: u32 = w
            .trim()
            .parse()
            .map_err(|_| MixError(format!("mix item {i} ({item:?}) has a bad weight")))?;
        out.push((k, w));
    }
    if out.iter().all(|(_, w)| *w == 0) {
        return Err(MixError(format!("mix {s:?} has no positive weight")));
    }
    Ok(out)
}

/// One pre-rendered bundle.
#[derive(Clone, Debug)]
pub struct GeneratedBundle {
    pub seq: u64,
    /// The whole HTTP/1.1 request, head and body.
    pub request: Box<[u8]>,
    /// Jito's bundle id: lowercase hex SHA-256 of the first signatures in base58 joined by `,`.
    pub bundle_id: [u8; 64],
    pub encoding: Encoding,
    pub tx_count: u8,
    /// Raw wire bytes of each transaction; empty unless `keep_raw_txs`.
    pub txs: Vec<Box<[u8]>>,
}

impl GeneratedBundle {
    pub fn bundle_id_str(&self) -> &str {
        std::str::from_utf8(&self.bundle_id).expect("hex is ASCII")
    }
}

/// How fast generation went.
#[derive(Clone, Copy, Debug)]
pub struct GenStats {
    pub bundles: u64,
    pub transactions: u64,
    pub elapsed: Duration,
    pub threads: usize,
}

impl GenStats {
    pub fn bundles_per_s(&self) -> f64 {
        self.bundles as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Jito's bundle id for these first signatures.
pub fn bundle_id_hex(first_signatures: &[[u8; 64]]) -> [u8; 64] {
    let mut h = Sha256::new();
    let mut s = String::with_capacity(90);
    for (i, sig) in first_signatures.iter().enumerate() {
        if i > 0 {
            h.update(b",");
        }
        s.clear();
        bs58::encode(sig).onto(&mut s).expect("String grows");
        h.update(s.as_bytes());
    }
    hex64(&h.finalize().into())
}

/// Lowercase hex of a 32-byte digest.
pub fn hex64(d: &[u8; 32]) -> [u8; 64] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 64];
    for (i, b) in d.iter().enumerate() {
        out[2 * i] = HEX[(b >> 4) as usize];
        out[2 * i + 1] = HEX[(b & 15) as usize];
    }
    out
}

/// SplitMix64: a tiny, seedable generator; good enough to pick mixes and amounts.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<K: Copy>(&mut self, mix: &[(K, u32)]) -> K {
        let total: u64 = mix.iter().map(|(_, w)| *w as u64).sum();
        let mut r = self.below(total);
        for (k, w) in mix {
            if r < *w as u64 {
                return *k;
            }
            r -= *w as u64;
        }
        unreachable!("r < total")
    }
    fn bytes32(&mut self) -> [u8; 32] {
        let mut b = [0u8; 32];
        for c in b.chunks_mut(8) {
            c.copy_from_slice(&self.next().to_le_bytes());
        }
        b
    }
}

/// Generator state shared by all threads: keys and decoded account ids.
pub struct TxGen {
    cfg: TxGenConfig,
    signers: Vec<SigningKey>,
    tips: [[u8; 32]; 8],
    compute_budget: [u8; 32],
}

fn decode_pubkey(s: &str) -> [u8; 32] {
    let v = bs58::decode(s).into_vec().expect("constant is base58");
    v.try_into().expect("constant is 32 bytes")
}

fn push_compact_u16(buf: &mut Vec<u8>, mut v: u16) {
    loop {
        let mut b = (v & 0x7f) as u8;
        v >>= 7;
        if v != 0 {
            b |= 0x80;
        }
        buf.push(b);
        if v == 0 {
            return;
        }
    }
}

impl TxGen {
    pub fn new(cfg: TxGenConfig) -> Result<TxGen, MixError> {
        if cfg.txs_mix.is_empty() || cfg.txs_mix.iter().all(|(_, w)| *w == 0) {
            return Err(MixError("txs mix has no positive weight".into()));
        }
        if let Some((i, (n, _))) = cfg
            .txs_mix
            .iter()
            .enumerate()
            .find(|(_, (n, _))| *n == 0 || *n as usize > BUNDLE_TXS_MAX)
        {
            return Err(MixError(format!(
                "txs mix item {i} asks for {n} transactions; a bundle holds 1 to {BUNDLE_TXS_MAX}"
            )));
        }
        if cfg.encoding_mix.is_empty() || cfg.encoding_mix.iter().all(|(_, w)| *w == 0) {
            return Err(MixError("encoding mix has no positive weight".into()));
        }
        if cfg.v0_percent > 100 || cfg.compute_budget_percent > 100 {
            return Err(MixError("percentages must be 0 to 100".into()));
        }
        if cfg.signers == 0 {
            return Err(MixError("need at least one signer".into()));
        }
        let signers = (0..cfg.signers as u64)
            .map(|i| {
                let mut h = Sha256::new();
                h.update(b"bundle-relay-bench signer");
                h.update(cfg.seed.to_le_bytes());
                h.update(i.to_le_bytes());
                SigningKey::from_bytes(&h.finalize().into())
            })
            .collect();
        Ok(TxGen {
            signers,
            tips: TIP_ACCOUNTS.map(decode_pubkey),
            compute_budget: decode_pubkey(COMPUTE_BUDGET_PROGRAM),
            cfg,
        })
    }

    pub fn config(&self) -> &TxGenConfig {
        &self.cfg
    }

    /// Writes one signed transfer transaction into `out` (cleared first).
    fn transaction(&self, out: &mut Vec<u8>, rng: &mut SplitMix, tag: Tag, tip: bool) {
        let signer = &self.signers[rng.below(self.signers.len() as u64) as usize];
        let v0 = rng.below(100) < self.cfg.v0_percent as u64;
        let cb = rng.below(100) < self.cfg.compute_budget_percent as u64;
        let to = rng.bytes32();
        let lamports = 1 + rng.below(1_000_000);
        let tip_account = self.tips[rng.below(8) as usize];
        let tip_lamports = TIP_LAMPORTS_MIN + rng.below(100_000);

        out.clear();
        out.push(1); // compact-u16 signature count
        out.extend_from_slice(&[0u8; 64]);
        let msg_start = out.len();
        if v0 {
            out.push(V0_PREFIX);
        }
        // Header: one signer (the payer); read-only unsigned accounts are the programs, last.
        out.extend_from_slice(&[1, 0, 1 + cb as u8]);
        let mut keys: [&[u8; 32]; 5] = [&SYSTEM_PROGRAM; 5];
        let mut n = 0;
        let payer = signer.verifying_key().to_bytes();
        for k in [Some(&payer), Some(&to), tip.then_some(&tip_account)]
            .into_iter()
            .flatten()
            .chain(std::iter::once(&SYSTEM_PROGRAM))
            .chain(cb.then_some(&self.compute_budget))
        {
            keys[n] = k;
            n += 1;
        }
        push_compact_u16(out, n as u16);
        for k in &keys[..n] {
            out.extend_from_slice(*k);
        }
        out.extend_from_slice(&tag.to_blockhash());
        let system_ix = 2 + tip as u8;
        let cb_ix = system_ix + 1;
        push_compact_u16(out, 1 + tip as u16 + 2 * cb as u16);
        if cb {
            // SetComputeUnitLimit (2, u32) then SetComputeUnitPrice (3, u64 micro-lamports).
            let limit = 1_000 + rng.below(200_000) as u32;
            out.extend_from_slice(&[cb_ix, 0, 5, 2]);
            out.extend_from_slice(&limit.to_le_bytes());
            let price = rng.below(1_000_000);
            out.extend_from_slice(&[cb_ix, 0, 9, 3]);
            out.extend_from_slice(&price.to_le_bytes());
        }
        // System transfer: instruction 2 (u32 LE), lamports u64 LE; accounts [from, to].
        out.extend_from_slice(&[system_ix, 2, 0, 1, 12, 2, 0, 0, 0]);
        out.extend_from_slice(&lamports.to_le_bytes());
        if tip {
            out.extend_from_slice(&[system_ix, 2, 0, 2, 12, 2, 0, 0, 0]);
            out.extend_from_slice(&tip_lamports.to_le_bytes());
        }
        if v0 {
            push_compact_u16(out, 0); // no address-table lookups
        }
        let sig = signer.sign(&out[msg_start..]).to_bytes();
        out[1..65].copy_from_slice(&sig);
        debug_assert!(out.len() <= PACKET_DATA_SIZE);
    }

    /// Renders bundle `seq`; a pure function of `(seed, run_id, seq)`.
    pub fn bundle(&self, seq: u64) -> GeneratedBundle {
        let mut rng = SplitMix(self.cfg.seed ^ ((self.cfg.run_id as u64) << 32));
        rng.0 ^= seq.wrapping_mul(0xD6E8_FEB8_6659_FD93);
        rng.next();
        let n = rng.pick(&self.cfg.txs_mix) as usize;
        let encoding = rng.pick(&self.cfg.encoding_mix);
        let omit_options = encoding == Encoding::Base58 && rng.below(2) == 0;

        let mut body = String::with_capacity(n * 400 + 128);
        write!(
            body,
            r#"{{"jsonrpc":"2.0","id":{seq},"method":"sendBundle","params":[["#
        )
        .expect("String grows");
        let mut sigs = [[0u8; 64]; BUNDLE_TXS_MAX];
        let mut txs = Vec::new();
        let mut tx = Vec::with_capacity(PACKET_DATA_SIZE);
        for (i, sig) in sigs.iter_mut().enumerate().take(n) {
            let tag = Tag {
                run_id: self.cfg.run_id,
                seq,
                tx_index: i as u8,
            };
            self.transaction(&mut tx, &mut rng, tag, i + 1 == n);
            sig.copy_from_slice(&tx[1..65]);
            if i > 0 {
                body.push(',');
            }
            body.push('"');
            match encoding {
                Encoding::Base64 => {
                    base64::engine::general_purpose::STANDARD.encode_string(&tx, &mut body)
                }
                Encoding::Base58 => {
                    bs58::encode(&tx).onto(&mut body).expect("String grows");
                }
            }
            body.push('"');
            if self.cfg.keep_raw_txs {
                txs.push(tx.clone().into_boxed_slice());
            }
        }
        body.push(']');
        if !omit_options {
            write!(body, r#",{{"encoding":"{}"}}"#, encoding.name()).expect("String grows");
        }
        body.push_str("]}");
        let mut request = Vec::with_capacity(body.len() + 128);
        write!(
            ByteWriter(&mut request),
            "POST /api/v1/bundles HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n",
            self.cfg.host,
        )
        .expect("Vec grows");
        if let Some(key) = &self.cfg.auth {
            write!(ByteWriter(&mut request), "x-jito-auth: {key}\r\n").expect("Vec grows");
        }
        write!(
            ByteWriter(&mut request),
            "Content-Length: {}\r\n\r\n",
            body.len()
        )
        .expect("Vec grows");
        request.extend_from_slice(body.as_bytes());
        GeneratedBundle {
            seq,
            request: request.into_boxed_slice(),
            bundle_id: bundle_id_hex(&sigs[..n]),
            encoding,
            tx_count: n as u8,
            txs,
        }
    }
}

struct ByteWriter<'a>(&'a mut Vec<u8>);

impl fmt::Write for ByteWriter<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// Generates bundles `first_seq .. first_seq + count` on every core.
pub fn generate(
    cfg: TxGenConfig,
    first_seq: u64,
    count: u64,
) -> Result<(Vec<GeneratedBundle>, GenStats), MixError> {
    let txgen = TxGen::new(cfg)?;
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(count.max(1) as usize);
    let start = Instant::now();
    let chunk = count.div_ceil(threads as u64);
    let parts: Vec<Vec<GeneratedBundle>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads as u64)
            .map(|t| {
                let txgen = &txgen;
                s.spawn(move || {
                    let lo = first_seq + (t * chunk).min(count);
                    let hi = first_seq + ((t + 1) * chunk).min(count);
                    (lo..hi).map(|seq| txgen.bundle(seq)).collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("generator thread panicked"))
            .collect()
    });
    let mut bundles = Vec::with_capacity(count as usize);
    for p in parts {
        bundles.extend(p);
    }
    let transactions = bundles.iter().map(|b| b.tx_count as u64).sum();
    let stats = GenStats {
        bundles: count,
        transactions,
        elapsed: start.elapsed(),
        threads,
    };
    Ok((bundles, stats))
}
