//! The stream table: a fixed number of slots, each one request and its response, and each
//! slot's state as RFC 9113 section 5.1 names it.
//!
//! A client with push disabled meets only part of the RFC's diagram: no reserved states (a
//! PUSH_PROMISE is a connection error), and no half-closed (remote), because a response that
//! ends (END_STREAM received) settles the call: the stream closes at once and whatever of the
//! request body was still queued behind flow control is never sent.
//!
//! ```text
//!                +--------+
//!                |  idle  |  a free slot; ids are never reused
//!                +--------+
//!                    |
//!                    | send H (start_request)
//!                    v
//!                +--------+    send ES (the request's last byte     +-------------+
//!                |  open  |    queued: `request_end` is known)      | half-closed |
//!                |        |---------------------------------------->|   (local)   |
//!                +--------+                                         +-------------+
//!                    |                                                     |
//!                    |  recv ES, recv R, send R (a stream error or our     |
//!                    |  deadline), GOAWAY below its id, connection lost    |
//!                    v                                                     v
//!                +------------------------------------------------------------+
//!                |                          closed                            |
//!                |     its StreamEnd and response kept until release          |
//!                +------------------------------------------------------------+
//!                    |
//!                    | release
//!                    v
//!                  idle
//! ```
//!
//! Both open states also track the peer's half (`Remote`): before its response HEADERS, or
//! after them (a further header block is the trailers and must carry END_STREAM).
//!
//! This file holds a slot's storage and its state; it is NOT where frames are read or written:
//! [`super::conn`] drives every transition.

use super::config::{Config, RESPONSE_BODY_BYTES_USUAL};
use super::error::StreamEnd;
use super::hpack::HeaderList;
use super::storage::{self, Buffer};

/// Stream ids are 31 bits; client ids are odd.
pub const STREAM_ID_MAX: u32 = (1 << 31) - 1;

/// A client stream id (odd, increasing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u32);

/// A header field to send.
#[derive(Clone, Copy, Debug)]
pub struct Field<'a> {
    pub name: &'a [u8],
    pub value: &'a [u8],
    /// Sent never-indexed (RFC 7541 section 6.2.3), e.g. authorization.
    pub sensitive: bool,
}

/// A request's header fields gathered in place, at most `N` (no allocation).
pub struct Fields<'a, const N: usize> {
    fields: [Field<'a>; N],
    len: usize,
}

impl<'a, const N: usize> Fields<'a, N> {
    pub fn new() -> Self {
        Fields {
            fields: [Field {
                name: b"",
                value: b"",
                sensitive: false,
            }; N],
            len: 0,
        }
    }

    /// Adds a field; more than `N` is a programmer's error.
    pub fn push(&mut self, name: &'a [u8], value: &'a [u8], sensitive: bool) {
        self.fields[self.len] = Field {
            name,
            value,
            sensitive,
        };
        self.len += 1;
    }

    pub fn as_slice(&self) -> &[Field<'a>] {
        &self.fields[..self.len]
    }
}

impl<const N: usize> Default for Fields<'_, N> {
    fn default() -> Self {
        Self::new()
    }
}

/// A finished stream's response, borrowed from its slot.
pub struct Response<'a> {
    pub end: StreamEnd,
    pub request_sent: bool,
    /// See [`super::conn::Connection::request_end`].
    pub request_end: Option<u64>,
    pub headers: &'a HeaderList,
    pub trailers: &'a HeaderList,
    pub body: &'a [u8],
}

/// The peer's half of an open stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Remote {
    /// No response HEADERS yet (1xx heads are skipped).
    AwaitingHeaders,
    /// The response head arrived: DATA may follow, and a further header block is the trailers.
    Streaming,
}

/// A slot's state (RFC 9113 section 5.1; the diagram is in the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    /// No stream in this slot.
    Idle,
    /// HEADERS sent; the request body is still going out.
    Open { remote: Remote },
    /// Our END_STREAM is queued, just before offset `request_end` of the transmit stream.
    HalfClosedLocal { remote: Remote, request_end: u64 },
    /// Ended; its response waits for [`super::conn::Connection::release`]. `request_end` is
    /// `Some` when it ended after our END_STREAM was queued.
    Closed {
        end: StreamEnd,
        request_end: Option<u64>,
    },
}

/// One slot: its state, flow control and buffers.
pub(super) struct Stream {
    /// Meaningful only while the state is not `Idle`.
    pub(super) id: u32,
    pub(super) state: State,
    pub(super) send_window: i64,
    pub(super) recv_window: i64,
    pub(super) recv_unacked: u32,
    pub(super) body_out: Buffer,
    pub(super) body_out_len: usize,
    pub(super) body_out_sent: usize,
    pub(super) body_in: Buffer,
    pub(super) body_in_len: usize,
    pub(super) headers: HeaderList,
    pub(super) trailers: HeaderList,
    pub(super) deadline_ns: Option<u64>,
    /// When the request must be queued whole by (its END_STREAM), else the stream is given up
    /// unsent ([`super::Connection::send_by`]).
    pub(super) send_by_ns: Option<u64>,
}

impl Stream {
    /// A slot; `before_response_body` runs between the carving of its request body and its
    /// response body (see [`Streams::new`]).
    fn new(cfg: &Config, before_response_body: Option<impl FnOnce()>) -> Stream {
        // Written only when a request body cannot go out at once (a window or the transmit
        // buffer too small): left untouched, it costs no memory until then.
        let body_out = storage::zeroed(cfg.request_body_bytes_max);
        if let Some(f) = before_response_body {
            f();
        }
        let body_in = storage::touched(cfg.response_body_bytes_max, RESPONSE_BODY_BYTES_USUAL);
        Stream {
            id: 0,
            state: State::Idle,
            send_window: 0,
            recv_window: 0,
            recv_unacked: 0,
            body_out,
            body_out_len: 0,
            body_out_sent: 0,
            body_in,
            body_in_len: 0,
            headers: HeaderList::new(cfg.header_list_bytes_max, cfg.header_fields_max()),
            trailers: HeaderList::new(cfg.header_list_bytes_max, cfg.header_fields_max()),
            deadline_ns: None,
            send_by_ns: None,
        }
    }

    /// Bytes [`Stream::new`] allocates for `cfg`, the slot itself included.
    fn allocation_bytes(cfg: &Config) -> usize {
        std::mem::size_of::<Stream>()
            + cfg.request_body_bytes_max
            + cfg.response_body_bytes_max
            + 2 * HeaderList::allocation_bytes(cfg.header_list_bytes_max, cfg.header_fields_max())
    }

    /// Our request has not ended yet (its END_STREAM not sent): open.
    pub(super) fn request_open(&self) -> bool {
        matches!(self.state, State::Open { .. })
    }

    /// Started and not yet ended: open or half-closed (local).
    pub(super) fn is_active(&self) -> bool {
        matches!(
            self.state,
            State::Open { .. } | State::HalfClosedLocal { .. }
        )
    }

    /// Whether our END_STREAM is queued: the peer may have the whole request.
    pub(super) fn request_sent(&self) -> bool {
        self.request_end().is_some()
    }

    /// The transmit stream's offset just past the request's last byte, once it is queued.
    pub(super) fn request_end(&self) -> Option<u64> {
        match self.state {
            State::HalfClosedLocal { request_end, .. } => Some(request_end),
            State::Closed { request_end, .. } => request_end,
            State::Idle | State::Open { .. } => None,
        }
    }

    /// Whether the response head has arrived (so a further header block is the trailers).
    pub(super) fn response_started(&self) -> bool {
        matches!(
            self.state,
            State::Open {
                remote: Remote::Streaming
            } | State::HalfClosedLocal {
                remote: Remote::Streaming,
                ..
            }
        )
    }

    /// Idle to open: a new stream `id` whose body of `body_len` bytes is in `body_out` (the
    /// caller marks what it already sent straight from the transmit buffer).
    pub(super) fn open(
        &mut self,
        id: u32,
        send_window: u32,
        recv_window: u32,
        body_len: usize,
        deadline_ns: Option<u64>,
    ) {
        debug_assert_eq!(self.state, State::Idle);
        self.id = id;
        self.state = State::Open {
            remote: Remote::AwaitingHeaders,
        };
        self.send_window = send_window as i64;
        self.recv_window = recv_window as i64;
        self.recv_unacked = 0;
        self.body_out_len = body_len;
        self.body_out_sent = 0;
        self.body_in_len = 0;
        self.headers.clear();
        self.trailers.clear();
        self.deadline_ns = deadline_ns;
        self.send_by_ns = None;
    }

    /// Open to half-closed (local): our END_STREAM is queued, ending at `request_end`.
    pub(super) fn close_local(&mut self, request_end: u64) {
        if let State::Open { remote } = self.state {
            self.state = State::HalfClosedLocal {
                remote,
                request_end,
            };
        }
    }

    /// The response head arrived.
    pub(super) fn start_response(&mut self) {
        match &mut self.state {
            State::Open { remote } | State::HalfClosedLocal { remote, .. } => {
                *remote = Remote::Streaming
            }
            State::Idle | State::Closed { .. } => {}
        }
    }

    /// Open or half-closed (local) to closed.
    pub(super) fn close(&mut self, end: StreamEnd) {
        debug_assert!(self.is_active());
        self.state = State::Closed {
            end,
            request_end: self.request_end(),
        };
    }

    /// The response of a closed stream.
    pub(super) fn response(&self) -> Option<Response<'_>> {
        let State::Closed { end, request_end } = self.state else {
            return None;
        };
        Some(Response {
            end,
            request_sent: request_end.is_some(),
            request_end,
            headers: &self.headers,
            trailers: &self.trailers,
            body: &self.body_in[..self.body_in_len],
        })
    }
}

/// Every slot of a connection, allocated once.
#[derive(Default)]
pub(super) struct Streams {
    slots: Box<[Stream]>,
}

impl Streams {
    /// Every slot, carved in order; `before_last_response_body` runs just before the last
    /// slot's response body is carved, so that what the connection carves there (the header
    /// block in) lies right before that body's usual first bytes.
    pub(super) fn new(cfg: &Config, before_last_response_body: impl FnOnce()) -> Streams {
        let mut hook = Some(before_last_response_body);
        let n = cfg.stream_slots;
        Streams {
            slots: (0..n)
                .map(|i| Stream::new(cfg, if i + 1 == n { hook.take() } else { None }))
                .collect(),
        }
    }

    /// Bytes [`Streams::new`] allocates for `cfg`.
    pub(super) fn allocation_bytes(cfg: &Config) -> usize {
        cfg.stream_slots * Stream::allocation_bytes(cfg)
    }

    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Every slot back to idle, its storage kept, as for a new connection.
    pub(super) fn clear(&mut self) {
        for s in self.slots.iter_mut() {
            s.id = 0;
            s.state = State::Idle;
            s.body_out_len = 0;
            s.body_out_sent = 0;
            s.body_in_len = 0;
            s.headers.clear();
            s.trailers.clear();
            s.deadline_ns = None;
        }
    }

    /// The slot of stream `id`, active or closed; `None` for 0 and for ids not in the table.
    pub(super) fn find(&self, id: u32) -> Option<usize> {
        if id == 0 {
            return None;
        }
        self.slots
            .iter()
            .position(|s| s.state != State::Idle && s.id == id)
    }

    /// The slot of stream `id` while it is active.
    pub(super) fn find_active(&self, id: u32) -> Option<usize> {
        self.find(id).filter(|&i| self.slots[i].is_active())
    }

    /// The first idle slot.
    pub(super) fn idle_slot(&self) -> Option<usize> {
        self.slots.iter().position(|s| s.state == State::Idle)
    }

    /// Streams started and not yet ended.
    pub(super) fn active_count(&self) -> usize {
        self.slots.iter().filter(|s| s.is_active()).count()
    }

    pub(super) fn iter(&self) -> std::slice::Iter<'_, Stream> {
        self.slots.iter()
    }

    pub(super) fn iter_mut(&mut self) -> std::slice::IterMut<'_, Stream> {
        self.slots.iter_mut()
    }
}

impl std::ops::Index<usize> for Streams {
    type Output = Stream;
    fn index(&self, i: usize) -> &Stream {
        &self.slots[i]
    }
}

impl std::ops::IndexMut<usize> for Streams {
    fn index_mut(&mut self, i: usize) -> &mut Stream {
        &mut self.slots[i]
    }
}
