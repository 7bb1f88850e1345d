//! One bundle's record as plain data, and its fixed encoding into [`WORDS`] 64-bit words (what
//! the ring stores, so another thread can copy it under a sequence lock without tearing).

use std::net::{IpAddr, Ipv6Addr};

use crate::clock::Instant;

/// Attempts a record keeps, oldest first: the first three and the latest, except that a send
/// still running, or one an engine accepted or may have processed (lost), keeps its place; a
/// send past the fourth takes the place of the latest kept one that is none of those (the
/// later ones move down a place). A bundle is sent once unless an engine refused the pair (a
/// cooldown) or the call unprocessed, or fanned out (one running per region, at most
/// [`crate::config::FAN_OUT_MAX`], no more than this); more than four is rare, and
/// [`Record::attempts`] still counts them all.
pub const ATTEMPTS_KEPT: usize = 4;
/// Bits of a tenant slot's epoch a record keeps: a record is the asking tenant's only if its
/// slot and epoch are the slot's now, so a slot would have to go to 16 million tenants in
/// turn while a record stayed in the ring for an old one to pass as a new one's.
pub const TENANT_EPOCH_BITS: u32 = 24;
const TENANT_EPOCH_MASK: u32 = (1 << TENANT_EPOCH_BITS) - 1;
const SERIAL_MASK: u64 = (1 << 40) - 1;
/// Bytes of the last engine answer kept (its uuid, or its error text, cut at a character).
pub const TEXT_BYTES: usize = 88;
/// Words one record takes in the ring, its sequence word included (the budget counts them).
pub const WORDS: usize = 36;
/// Words of a record's payload (all but the sequence word).
pub(super) const PAYLOAD: usize = WORDS - 1;

const HEAD: usize = 8;
/// An attempt's words: its send time (from the admission) with its port, region and verdict;
/// its answer time (from the send) with the engine's wait, gRPC code and address family; its
/// address.
const ATTEMPT_WORDS: usize = 4;
/// Bits of an attempt's two time offsets, in clock ticks. A send comes within the bundle's
/// max age of its admission (a minute at most, 2^40 ticks is minutes at any TSC rate); an
/// answer within its call's deadline. An offset past its width is kept at the widest.
const SENT_BITS: u32 = 40;
const ANSWERED_BITS: u32 = 39;
/// The answer offset that means "not answered".
const UNANSWERED: u64 = (1 << ANSWERED_BITS) - 1;
const _: () = assert!(crate::limiter::REGIONS_MAX <= 16 && Verdict::ALL.len() <= 8);
const _: () = assert!(HEAD + ATTEMPTS_KEPT * ATTEMPT_WORDS + TEXT_BYTES / 8 == PAYLOAD);
const _: () = assert!(TEXT_BYTES % 8 == 0 && TEXT_BYTES < 256);

/// What one send of the bundle came to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Verdict {
    /// Sent, not answered yet.
    #[default]
    Sending,
    /// The engine took it (gRPC OK); the record's text is its uuid.
    Accepted,
    /// RESOURCE_EXHAUSTED: the pair cools down for the engine's wait; the bundle went on.
    RateLimited,
    /// Not processed (UNAVAILABLE, REFUSED_STREAM, lost before it was sent whole): sent again.
    Unprocessed,
    /// Refused for good (the record's text says why).
    Rejected,
    /// Lost after it was sent whole: it may have been processed, so it was not sent again.
    Lost,
    /// The engine refused the source address (PERMISSION_DENIED, UNAUTHENTICATED): the bundle
    /// went to another pair.
    SourceDenied,
    /// RESOURCE_EXHAUSTED for everyone ("globally rate limited"): the whole region backed off
    /// for `retry_after_ms`, the address kept its place.
    RegionThrottled,
}

impl Verdict {
    const ALL: [Verdict; 8] = [
        Verdict::Sending,
        Verdict::Accepted,
        Verdict::RateLimited,
        Verdict::Unprocessed,
        Verdict::Rejected,
        Verdict::Lost,
        Verdict::SourceDenied,
        Verdict::RegionThrottled,
    ];

    /// As `getBundleDelivery` names it.
    pub const fn name(self) -> &'static str {
        match self {
            Verdict::Sending => "sending",
            Verdict::Accepted => "accepted",
            Verdict::RateLimited => "rate_limited",
            Verdict::Unprocessed => "unprocessed",
            Verdict::Rejected => "rejected",
            Verdict::Lost => "lost",
            Verdict::SourceDenied => "source_denied",
            Verdict::RegionThrottled => "region_throttled",
        }
    }

    fn code(self) -> u64 {
        Verdict::ALL.iter().position(|v| *v == self).unwrap_or(0) as u64
    }

    fn of(code: u64) -> Verdict {
        Verdict::ALL.get(code as usize).copied().unwrap_or_default()
    }
}

/// Where the bundle stands: still the relay's, or how it ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum End {
    /// Waiting for a pair, or its send unanswered.
    #[default]
    Open,
    /// An engine took it.
    Delivered,
    /// Refused for good by an engine, or refused unprocessed too often.
    Rejected,
    /// Older than its max age before an engine took it.
    Expired,
    /// Lost after it was sent whole, or still held at shutdown.
    Failed,
    /// Handed to another thread (this one had no source left for it): its record goes on
    /// there.
    Moved,
}

impl End {
    const ALL: [End; 6] = [
        End::Open,
        End::Delivered,
        End::Rejected,
        End::Expired,
        End::Failed,
        End::Moved,
    ];

    /// As `getBundleDelivery` names it.
    pub const fn name(self) -> &'static str {
        match self {
            End::Open => "in_flight",
            End::Delivered => "delivered",
            End::Rejected => "rejected",
            End::Expired => "expired",
            End::Failed => "failed",
            End::Moved => "moved",
        }
    }

    fn code(self) -> u64 {
        End::ALL.iter().position(|v| *v == self).unwrap_or(0) as u64
    }

    fn of(code: u64) -> End {
        End::ALL.get(code as usize).copied().unwrap_or_default()
    }
}

/// The address a send left from: a local address, or a SOCKS5 proxy's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Egress {
    Local(IpAddr),
    Socks5(std::net::SocketAddr),
}

impl Default for Egress {
    fn default() -> Self {
        Egress::Local(IpAddr::V6(Ipv6Addr::UNSPECIFIED))
    }
}

impl std::fmt::Display for Egress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Egress::Local(ip) => write!(f, "{ip}"),
            Egress::Socks5(proxy) => write!(f, "socks5://{proxy}"),
        }
    }
}

/// One send of the bundle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Attempt {
    pub region: u8,
    pub egress: Egress,
    /// When its request was handed to the connection.
    pub sent: Instant,
    /// When its answer (or the loss) was known; `None` while it runs.
    pub answered: Option<Instant>,
    pub verdict: Verdict,
    /// The gRPC status code the engine answered, when it answered one.
    pub grpc_code: Option<u8>,
    /// The engine's wait, for [`Verdict::RateLimited`].
    pub retry_after_ms: u32,
}

/// A short text kept inline: the engine's uuid or error message.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Text {
    bytes: [u8; TEXT_BYTES],
    len: u8,
}

impl Default for Text {
    fn default() -> Self {
        Text {
            bytes: [0; TEXT_BYTES],
            len: 0,
        }
    }
}

impl Text {
    /// `s` cut to [`TEXT_BYTES`] at a character boundary (invalid UTF-8 becomes its valid
    /// prefix).
    pub fn new(s: &[u8]) -> Text {
        let valid = match std::str::from_utf8(s) {
            Ok(v) => v,
            Err(e) => std::str::from_utf8(&s[..e.valid_up_to()]).unwrap_or(""),
        };
        let mut end = valid.len().min(TEXT_BYTES);
        while !valid.is_char_boundary(end) {
            end -= 1;
        }
        let mut t = Text::default();
        t.bytes[..end].copy_from_slice(&valid.as_bytes()[..end]);
        t.len = end as u8;
        t
    }

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or("")
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl std::fmt::Debug for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

/// What the relay knows of one bundle it admitted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// Jito's bundle id (SHA-256).
    pub id: [u8; 32],
    /// Its place in the thread's sequence of records.
    pub serial: u64,
    pub admitted: Instant,
    /// When it ended (`End::Open`: not yet).
    pub ended: Instant,
    pub end: End,
    /// The tenant's slot (0: the default tenant).
    pub tenant: u16,
    /// Which of the slot's tenants (its low [`TENANT_EPOCH_BITS`] bits): a slot reused for
    /// another tenant starts a new epoch, so the records of the one before are not its.
    pub tenant_epoch: u32,
    pub tx_count: u8,
    /// For [`End::Moved`]: the thread it went to.
    pub moved_to: u8,
    /// Every send so far (the kept ones are in `kept`).
    pub attempts: u16,
    /// The first `ATTEMPTS_KEPT - 1` sends, then the latest.
    pub kept: [Attempt; ATTEMPTS_KEPT],
    /// The engine's last answer: its uuid, or its error text.
    pub text: Text,
}

impl Record {
    /// The kept sends, oldest first.
    pub fn kept(&self) -> &[Attempt] {
        &self.kept[..usize::from(self.attempts).min(ATTEMPTS_KEPT)]
    }

    /// A new send, kept as [`ATTEMPTS_KEPT`] says.
    pub fn push_attempt(&mut self, a: Attempt) {
        let n = usize::from(self.attempts);
        if n < ATTEMPTS_KEPT {
            self.kept[n] = a;
        } else {
            let v = give_way(|k| self.kept[k].verdict);
            self.kept.copy_within(v + 1.., v);
            self.kept[ATTEMPTS_KEPT - 1] = a;
        }
        self.attempts = self.attempts.saturating_add(1);
    }

    /// The send to `region` still running, the latest kept (a fanned-out bundle runs one per
    /// region at once).
    pub fn running_in(&mut self, region: u8) -> Option<&mut Attempt> {
        let n = usize::from(self.attempts).min(ATTEMPTS_KEPT);
        self.kept[..n]
            .iter_mut()
            .rev()
            .find(|a| a.verdict == Verdict::Sending && a.region == region)
    }

    /// The send still running, if any.
    pub fn running(&mut self) -> Option<&mut Attempt> {
        let n = usize::from(self.attempts).min(ATTEMPTS_KEPT);
        self.kept[..n]
            .last_mut()
            .filter(|a| a.verdict == Verdict::Sending)
    }

    pub(super) fn encode(&self, w: &mut [u64; PAYLOAD]) {
        for (word, bytes) in w.iter_mut().zip(self.id.chunks_exact(8)) {
            *word = u64::from_le_bytes(bytes.try_into().expect("8 bytes"));
        }
        // A serial takes 40 bits (the index holds no more); the tenant's epoch the rest.
        w[4] = self.serial & SERIAL_MASK | u64::from(self.tenant_epoch & TENANT_EPOCH_MASK) << 40;
        w[5] = self.admitted.0;
        w[6] = self.ended.0;
        w[7] = self.end.code()
            | u64::from(self.tenant) << 8
            | u64::from(self.tx_count) << 24
            | u64::from(self.moved_to) << 32
            | u64::from(self.attempts) << 40
            | u64::from(self.text.len) << 56;
        for (k, a) in self.kept.iter().enumerate() {
            let at = HEAD + k * ATTEMPT_WORDS;
            w[at..at + ATTEMPT_WORDS].copy_from_slice(&encode_attempt(a, self.admitted));
        }
        encode_text(&self.text, w);
    }

    pub(super) fn decode(w: &[u64; PAYLOAD]) -> Record {
        let mut r = Record::default();
        for (bytes, word) in r.id.chunks_exact_mut(8).zip(w) {
            bytes.copy_from_slice(&word.to_le_bytes());
        }
        r.serial = w[4] & SERIAL_MASK;
        r.tenant_epoch = (w[4] >> 40) as u32 & TENANT_EPOCH_MASK;
        r.admitted = Instant(w[5]);
        r.ended = Instant(w[6]);
        r.end = End::of(w[7] & 0xff);
        r.tenant = (w[7] >> 8) as u16;
        r.tx_count = (w[7] >> 24) as u8;
        r.moved_to = (w[7] >> 32) as u8;
        r.attempts = (w[7] >> 40) as u16;
        r.text.len = ((w[7] >> 56) as u8).min(TEXT_BYTES as u8);
        for (k, a) in r.kept.iter_mut().enumerate() {
            let at = HEAD + k * ATTEMPT_WORDS;
            *a = decode_attempt(&w[at..at + ATTEMPT_WORDS], r.admitted);
        }
        let text_at = HEAD + ATTEMPTS_KEPT * ATTEMPT_WORDS;
        for i in 0..TEXT_BYTES / 8 {
            r.text.bytes[i * 8..i * 8 + 8].copy_from_slice(&w[text_at + i].to_le_bytes());
        }
        r
    }
}

/// Attempt `a`'s words, its times as offsets from the record's admission.
fn encode_attempt(a: &Attempt, admitted: Instant) -> [u64; ATTEMPT_WORDS] {
    let (ip, port, socks) = match a.egress {
        Egress::Local(ip) => (ip, 0u16, 0u64),
        Egress::Socks5(p) => (p.ip(), p.port(), 1),
    };
    let v6 = match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    };
    let bits = u128::from(v6);
    let sent = a
        .sent
        .0
        .saturating_sub(admitted.0)
        .min((1 << SENT_BITS) - 1);
    let answered = a.answered.map_or(UNANSWERED, |t| {
        t.0.saturating_sub(admitted.0.saturating_add(sent))
            .min(UNANSWERED - 1)
    });
    [
        sent | u64::from(port) << 40
            | u64::from(a.region & 0xf) << 56
            | a.verdict.code() << 60
            | socks << 63,
        answered
            | u64::from(encode_wait(a.retry_after_ms)) << 39
            | a.grpc_code.map_or(0xff, u64::from) << 55
            | u64::from(matches!(ip, IpAddr::V4(_))) << 63,
        (bits >> 64) as u64,
        bits as u64,
    ]
}

/// The attempt in `w` (its [`ATTEMPT_WORDS`] words) of a record admitted at `admitted`.
fn decode_attempt(w: &[u64], admitted: Instant) -> Attempt {
    let (s, t) = (w[0], w[1]);
    let bits = u128::from(w[2]) << 64 | u128::from(w[3]);
    let v6 = Ipv6Addr::from(bits);
    let ip = match (t >> 63 == 1, v6.to_ipv4_mapped()) {
        (true, Some(v4)) => IpAddr::V4(v4),
        _ => IpAddr::V6(v6),
    };
    let sent = Instant(admitted.0.wrapping_add(s & ((1 << SENT_BITS) - 1)));
    let answered = t & UNANSWERED;
    Attempt {
        region: (s >> 56 & 0xf) as u8,
        egress: if s >> 63 == 1 {
            Egress::Socks5(std::net::SocketAddr::new(ip, (s >> 40) as u16))
        } else {
            Egress::Local(ip)
        },
        sent,
        answered: (answered != UNANSWERED).then_some(Instant(sent.0.wrapping_add(answered))),
        verdict: Verdict::of(s >> 60 & 0x7),
        grpc_code: match (t >> 55) as u8 {
            0xff => None,
            c => Some(c),
        },
        retry_after_ms: decode_wait((t >> 39 & 0xffff) as u16),
    }
}

/// Which of a full record's kept sends (`verdict` of each) gives way to a new one: the latest
/// that is finished and neither accepted nor lost; the latest if every one is (fan-out keeps
/// at most [`ATTEMPTS_KEPT`] running, so a new send means one of them finished).
fn give_way(verdict: impl Fn(usize) -> Verdict) -> usize {
    (0..ATTEMPTS_KEPT)
        .rev()
        .find(|&k| {
            !matches!(
                verdict(k),
                Verdict::Sending | Verdict::Accepted | Verdict::Lost
            )
        })
        .unwrap_or(ATTEMPTS_KEPT - 1)
}

/// Past this an engine's wait is kept in steps of [`WAIT_STEP_MS`].
const WAIT_EXACT_MAX_MS: u32 = 0x7fff;
/// The step of a longer wait: 0x7fff of them is over a day (what the limiter honours).
const WAIT_STEP_MS: u32 = 4_000;

/// An engine's wait in 16 bits: exact to [`WAIT_EXACT_MAX_MS`], then the top bit and whole
/// steps, rounded up (never shorter than the engine said).
fn encode_wait(ms: u32) -> u16 {
    if ms <= WAIT_EXACT_MAX_MS {
        return ms as u16;
    }
    0x8000 | ms.div_ceil(WAIT_STEP_MS).min(0x7fff) as u16
}

fn decode_wait(w: u16) -> u32 {
    if w & 0x8000 == 0 {
        u32::from(w)
    } else {
        u32::from(w & 0x7fff) * WAIT_STEP_MS
    }
}

/// The text's bytes into their words and its length into the head word.
fn encode_text(text: &Text, w: &mut [u64; PAYLOAD]) {
    let text_at = HEAD + ATTEMPTS_KEPT * ATTEMPT_WORDS;
    for (i, chunk) in text.bytes.chunks_exact(8).enumerate() {
        w[text_at + i] = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
    }
    w[7] = w[7] & !(0xff << 56) | u64::from(text.len) << 56;
}

/// An encoded record changed field by field, as the owning thread's updates change it (a send
/// added or answered, the end, the engine's text): each touches its own words, and the rest
/// of the record is neither decoded nor encoded again. Every change has the same effect as
/// the one of the same name on a decoded [`Record`] (a property test holds them together).
pub struct Patch<'a> {
    pub(super) w: &'a mut [u64; PAYLOAD],
}

impl Patch<'_> {
    fn admitted(&self) -> Instant {
        Instant(self.w[5])
    }

    fn attempts(&self) -> u16 {
        (self.w[7] >> 40) as u16
    }

    /// [`Record::end`] and [`Record::ended`].
    pub fn set_end(&mut self, end: End, at: Instant) {
        self.w[6] = at.0;
        self.w[7] = self.w[7] & !0xff | end.code();
    }

    /// [`Record::moved_to`].
    pub fn set_moved_to(&mut self, thread: u8) {
        self.w[7] = self.w[7] & !(0xff << 32) | u64::from(thread) << 32;
    }

    /// [`Record::text`].
    pub fn set_text(&mut self, text: &Text) {
        encode_text(text, self.w);
    }

    /// [`Record::push_attempt`].
    pub fn push_attempt(&mut self, a: &Attempt) {
        let attempts = self.attempts();
        let n = usize::from(attempts);
        let at = if n < ATTEMPTS_KEPT {
            HEAD + n * ATTEMPT_WORDS
        } else {
            let v = give_way(|k| Verdict::of(self.w[HEAD + k * ATTEMPT_WORDS] >> 60 & 0x7));
            let from = HEAD + (v + 1) * ATTEMPT_WORDS;
            self.w.copy_within(
                from..HEAD + ATTEMPTS_KEPT * ATTEMPT_WORDS,
                from - ATTEMPT_WORDS,
            );
            HEAD + (ATTEMPTS_KEPT - 1) * ATTEMPT_WORDS
        };
        let words = encode_attempt(a, self.admitted());
        self.w[at..at + ATTEMPT_WORDS].copy_from_slice(&words);
        let attempts = attempts.saturating_add(1);
        self.w[7] = self.w[7] & !(0xffff << 40) | u64::from(attempts) << 40;
    }

    /// [`Record::running_in`]: `f` changes the send to `region` still running, the latest
    /// kept, if there is one.
    pub fn running_in(&mut self, region: u8, f: impl FnOnce(&mut Attempt)) {
        let n = usize::from(self.attempts()).min(ATTEMPTS_KEPT);
        let sending = Verdict::Sending.code();
        let Some(k) = (0..n).rev().find(|&k| {
            let s = self.w[HEAD + k * ATTEMPT_WORDS];
            s >> 60 & 0x7 == sending && (s >> 56 & 0xf) as u8 == region & 0xf
        }) else {
            return;
        };
        let at = HEAD + k * ATTEMPT_WORDS;
        let admitted = self.admitted();
        let mut a = decode_attempt(&self.w[at..at + ATTEMPT_WORDS], admitted);
        f(&mut a);
        self.w[at..at + ATTEMPT_WORDS].copy_from_slice(&encode_attempt(&a, admitted));
    }
}
