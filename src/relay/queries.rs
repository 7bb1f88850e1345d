//! Bots' bundle-status queries waiting on an engine: one thread's fixed table of them, each from
//! the bot's request (its intake connection, JSON-RPC id, tenant and bundle ids) to the engine's
//! answer or the reason there is none. Sans-IO and clock-free.
//!
//! Landing (`Landed`, `getBundleStatuses`) is known only to Jito, so those queries go to an
//! engine's JSON-RPC on a pair like any other call: the per-address rule holds for them too.
//! Bundles come first: a query takes a pair only after every bundle that could be sent was, and
//! gives up after [`QUERY_PAIR_WAIT_MS`] without one; an engine's Retry-After cools the pair
//! it answered on and the query tries another. The table is sized at startup
//! ([`QUERIES_MAX`] per thread, each with room for the engine's answer): a full table answers
//! at once without the engine, it never queues without bound.

use std::collections::VecDeque;

use crate::clock::Instant;
use crate::jsonrpc::{ID_LEN_MAX, STATUS_IDS_MAX};

/// Queries one thread holds at once.
pub const QUERIES_MAX: usize = 64;
/// Bytes of an engine's answer a query keeps: five `getBundleStatuses` entries of five
/// transactions each need about 3.5 KB.
pub const QUERY_ANSWER_BYTES: usize = 6 * 1024;
/// How long a query waits for a free pair before it is answered without the engine.
pub const QUERY_PAIR_WAIT_MS: u64 = 250;

/// The intake connection a query answers (its generation tells a reused slot apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnRef {
    pub index: u32,
    pub generation: u32,
}

impl ConnRef {
    /// No intake connection: a caller that handles requests without sockets (tests,
    /// benchmarks); an answer owed to it is dropped.
    pub const DETACHED: ConnRef = ConnRef {
        index: u32::MAX,
        generation: u32::MAX,
    };
}

/// Which call the bot made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ask {
    /// `getBundleStatuses`: the engine's answer, passed on.
    Statuses,
    /// `getInflightBundleStatuses`: the relay's record, with the engine's word on landing.
    Inflight,
}

impl Ask {
    pub fn method(self) -> &'static str {
        match self {
            Ask::Statuses => "getBundleStatuses",
            Ask::Inflight => "getInflightBundleStatuses",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Free,
    /// Waiting for a pair (until `deadline`).
    Waiting,
    /// Its call runs.
    Running,
    /// Answered, or given up: for the reactor to write the bot's answer.
    Done,
}

/// Why a query has no engine answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unanswered {
    /// No pair of the region was free within [`QUERY_PAIR_WAIT_MS`] (or none is up), or the
    /// engine's rate limit cooled every pair tried until then.
    NoPair,
    /// The engine's answer was lost or was no JSON-RPC (a front end's page), the engine refused
    /// the relay's address (401, 403), or the call never left whole, until the wait ran out.
    /// Any other JSON-RPC error is the engine's answer, kept.
    Failed,
    /// The engine's answer was larger than [`QUERY_ANSWER_BYTES`].
    TooLarge,
    /// The relay is stopping.
    Stopping,
}

impl Unanswered {
    pub fn why(self) -> &'static str {
        match self {
            Unanswered::NoPair => "no pair to the engine was free in time",
            Unanswered::Failed => {
                "the engine's answer was lost, was not JSON-RPC, or refused the relay's address"
            }
            Unanswered::TooLarge => "the engine's answer was larger than the relay keeps",
            Unanswered::Stopping => "the relay is stopping",
        }
    }
}

/// One query (see the module docs).
pub struct Query {
    state: State,
    pub conn: ConnRef,
    pub ask: Ask,
    pub tenant: u16,
    id: [u8; ID_LEN_MAX],
    id_len: u8,
    ids: [[u8; 32]; STATUS_IDS_MAX],
    ids_len: u8,
    /// Which of `ids` (bit per position) go to the engine.
    pub forwarded: u8,
    /// The region to ask (`None`: any).
    pub region: Option<u8>,
    /// Until when it may wait for a pair.
    pub deadline: Instant,
    answer: Box<[u8]>,
    answer_len: usize,
    /// `None` once the engine answered.
    unanswered: Option<Unanswered>,
}

impl Query {
    /// The bot's JSON-RPC id, as its raw JSON text.
    pub fn id(&self) -> &[u8] {
        &self.id[..usize::from(self.id_len)]
    }

    /// The bundle ids the bot asked, in its order (zeros for what was no bundle id).
    pub fn ids(&self) -> &[[u8; 32]] {
        &self.ids[..usize::from(self.ids_len)]
    }

    /// Whether the bot's `i`-th id goes to the engine.
    pub fn is_forwarded(&self, i: usize) -> bool {
        self.forwarded & (1 << i) != 0
    }

    /// The ids that go to the engine, in order, into `out`; how many.
    pub fn forwarded_ids(&self, out: &mut [[u8; 32]; STATUS_IDS_MAX]) -> usize {
        let mut n = 0;
        for (i, id) in self.ids().iter().enumerate() {
            if self.is_forwarded(i) {
                out[n] = *id;
                n += 1;
            }
        }
        n
    }

    /// The engine's whole answer (a JSON-RPC response body), or why there is none.
    pub fn answer(&self) -> Result<&[u8], Unanswered> {
        match self.unanswered {
            None => Ok(&self.answer[..self.answer_len]),
            Some(u) => Err(u),
        }
    }
}

/// What a bot asked, to open a query.
pub struct Asked<'a> {
    pub conn: ConnRef,
    pub ask: Ask,
    pub tenant: u16,
    pub id: &'a [u8],
    pub ids: &'a [[u8; 32]],
    /// Which of `ids` go to the engine (see [`Query::forwarded`]).
    pub forwarded: u8,
    pub region: Option<u8>,
}

/// The table is full, or the request's id is longer than an entry keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Full;

/// See the module docs.
pub struct Queries {
    entries: Box<[Query]>,
    free: Vec<u16>,
    /// Oldest first.
    waiting: VecDeque<u16>,
    done: VecDeque<u16>,
}

impl Queries {
    /// [`QUERIES_MAX`] entries, allocated now.
    pub fn new() -> Queries {
        Queries {
            entries: (0..QUERIES_MAX)
                .map(|_| Query {
                    state: State::Free,
                    conn: ConnRef {
                        index: 0,
                        generation: 0,
                    },
                    ask: Ask::Inflight,
                    tenant: 0,
                    id: [0; ID_LEN_MAX],
                    id_len: 0,
                    ids: [[0; 32]; STATUS_IDS_MAX],
                    ids_len: 0,
                    forwarded: 0,
                    region: None,
                    deadline: Instant(0),
                    answer: vec![0u8; QUERY_ANSWER_BYTES].into_boxed_slice(),
                    answer_len: 0,
                    unanswered: None,
                })
                .collect(),
            free: (0..QUERIES_MAX as u16).rev().collect(),
            waiting: VecDeque::with_capacity(QUERIES_MAX),
            done: VecDeque::with_capacity(QUERIES_MAX),
        }
    }

    /// Bytes the table holds (the budget counts it).
    pub const fn allocation_bytes() -> usize {
        QUERIES_MAX
            * (std::mem::size_of::<Query>() + QUERY_ANSWER_BYTES + 2 * std::mem::size_of::<u16>())
            + QUERIES_MAX * std::mem::size_of::<u16>()
    }

    /// A new query, waiting for a pair until `deadline`.
    pub fn open(&mut self, a: &Asked<'_>, deadline: Instant) -> Result<u16, Full> {
        if a.id.len() > ID_LEN_MAX || a.ids.len() > STATUS_IDS_MAX {
            return Err(Full);
        }
        let q = self.free.pop().ok_or(Full)?;
        let e = &mut self.entries[usize::from(q)];
        e.state = State::Waiting;
        e.conn = a.conn;
        e.ask = a.ask;
        e.tenant = a.tenant;
        e.id[..a.id.len()].copy_from_slice(a.id);
        e.id_len = a.id.len() as u8;
        e.ids[..a.ids.len()].copy_from_slice(a.ids);
        e.ids_len = a.ids.len() as u8;
        e.forwarded = a.forwarded;
        e.region = a.region;
        e.deadline = deadline;
        e.answer_len = 0;
        e.unanswered = None;
        self.waiting.push_back(q);
        Ok(q)
    }

    pub fn get(&self, q: u16) -> &Query {
        &self.entries[usize::from(q)]
    }

    /// The oldest query waiting for a pair, taken off the waiting list (give it back with
    /// [`Queries::wait_again`] when no pair was free).
    pub fn next_waiting(&mut self) -> Option<u16> {
        self.waiting.pop_front()
    }

    /// Queries waiting for a pair.
    pub fn waiting_len(&self) -> usize {
        self.waiting.len()
    }

    /// `q` (from [`Queries::next_waiting`]) found no pair this time: back at the head.
    pub fn wait_again(&mut self, q: u16) {
        self.waiting.push_front(q);
    }

    /// `q`'s call started.
    pub fn started(&mut self, q: u16) {
        self.entries[usize::from(q)].state = State::Running;
    }

    /// The engine answered `q` with `body`, kept for the bot's answer.
    pub fn answered(&mut self, q: u16, body: &[u8]) {
        let e = &mut self.entries[usize::from(q)];
        if body.len() > e.answer.len() {
            self.give_up(q, Unanswered::TooLarge);
            return;
        }
        e.answer[..body.len()].copy_from_slice(body);
        e.answer_len = body.len();
        e.unanswered = None;
        e.state = State::Done;
        self.done.push_back(q);
    }

    /// `q`'s call ended without an answer it can use but may be sent again (the pair was
    /// cooled, the call never left whole): it waits again, until its deadline.
    pub fn retry(&mut self, q: u16, now: Instant) {
        let e = &mut self.entries[usize::from(q)];
        if now.0 > e.deadline.0 {
            self.give_up(q, Unanswered::NoPair);
            return;
        }
        e.state = State::Waiting;
        self.waiting.push_front(q);
    }

    /// `q` ends without the engine's answer; false when it had ended already.
    pub fn give_up(&mut self, q: u16, why: Unanswered) -> bool {
        let e = &mut self.entries[usize::from(q)];
        if e.state == State::Done || e.state == State::Free {
            return false;
        }
        e.unanswered = Some(why);
        e.state = State::Done;
        self.done.push_back(q);
        true
    }

    /// A query whose bot can be answered now.
    pub fn poll_done(&mut self) -> Option<u16> {
        self.done.pop_front()
    }

    /// `q` was answered (or its bot had gone): its entry is free again.
    pub fn free(&mut self, q: u16) {
        let e = &mut self.entries[usize::from(q)];
        debug_assert_eq!(e.state, State::Done);
        e.state = State::Free;
        self.free.push(q);
    }

    /// Every query still waiting for a pair ends now, without the engine (stopping); returns
    /// how many did.
    pub fn give_up_waiting(&mut self, why: Unanswered) -> u64 {
        let mut ended = 0;
        while let Some(q) = self.waiting.pop_front() {
            ended += u64::from(self.give_up(q, why));
        }
        ended
    }
}

impl Default for Queries {
    fn default() -> Self {
        Queries::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(ids: &[[u8; 32]]) -> Asked<'_> {
        Asked {
            conn: ConnRef {
                index: 3,
                generation: 9,
            },
            ask: Ask::Statuses,
            tenant: 0,
            id: b"42",
            ids,
            forwarded: (1u8 << ids.len()) - 1,
            region: Some(1),
        }
    }

    #[test]
    fn a_query_goes_from_waiting_to_answered_and_keeps_the_bots_id_and_ids() {
        let mut t = Queries::new();
        let q = t.open(&asked(&[[1; 32], [2; 32]]), Instant(100)).unwrap();
        assert_eq!(t.next_waiting(), Some(q));
        t.started(q);
        t.answered(q, br#"{"result":{}}"#);
        assert_eq!(t.poll_done(), Some(q));
        let e = t.get(q);
        assert_eq!((e.id(), e.ids().len()), (&b"42"[..], 2));
        assert_eq!(e.answer(), Ok(&br#"{"result":{}}"#[..]));
        t.free(q);
        assert_eq!(t.free.len(), QUERIES_MAX);
    }

    #[test]
    fn a_cooled_query_waits_again_until_its_deadline_then_has_no_pair() {
        let mut t = Queries::new();
        let q = t.open(&asked(&[[1; 32]]), Instant(100)).unwrap();
        t.next_waiting();
        t.started(q);
        t.retry(q, Instant(50));
        assert_eq!(t.next_waiting(), Some(q), "back to waiting");
        t.started(q);
        t.retry(q, Instant(101));
        assert_eq!(t.poll_done(), Some(q));
        assert_eq!(t.get(q).answer(), Err(Unanswered::NoPair));
    }

    #[test]
    fn a_full_table_and_an_answer_too_large_say_so() {
        let mut t = Queries::new();
        for _ in 0..QUERIES_MAX {
            t.open(&asked(&[[1; 32]]), Instant(1)).unwrap();
        }
        assert_eq!(t.open(&asked(&[[1; 32]]), Instant(1)), Err(Full));
        let q = t.next_waiting().unwrap();
        t.answered(q, &vec![b' '; QUERY_ANSWER_BYTES + 1]);
        assert_eq!(t.poll_done(), Some(q));
        assert_eq!(t.get(q).answer(), Err(Unanswered::TooLarge));
    }
}
