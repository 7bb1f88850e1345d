//! The client connection's state machine: preface and SETTINGS, frames in and out, flow
//! control at both levels, keepalive, GOAWAY draining, header blocks with CONTINUATION.
//!
//! Driving it (quinn-proto style): feed received bytes with [`Connection::handle_bytes`], the
//! clock with [`Connection::handle_timeout`] at [`Connection::poll_timeout`], a dead socket with
//! [`Connection::handle_transport_closed`]; send what [`Connection::poll_transmit`] returns and
//! report it with [`Connection::advance_transmit`]; drain [`Connection::poll_event`]. All
//! buffers are sized in [`Connection::new`]; nothing allocates afterwards.
//!
//! A request's outcome is a [`StreamEnd`] that says whether the request may have been
//! processed, which is what decides whether it is safe to send again.
//!
//! This file is NOT where the limits ([`super::config`]), the error types ([`super::error`]) or
//! a stream's states and storage ([`super::stream`]) are defined; they are re-exported here so
//! `h2::conn::…` names the whole connection API.

use std::collections::VecDeque;

pub use super::config::{Config, KEEPALIVE_INTERVAL_MS_POLICY};
pub use super::error::{Blame, ConnError, StartError, StreamEnd};
pub use super::stream::{Field, Response, StreamId};

use super::config::{
    CONTROL_FRAMES_PER_SECOND_MAX, HEADER_BLOCK_FRAMES_MAX, REQUEST_HEADER_BLOCK_BYTES_MAX,
    REQUEST_HEADER_BLOCK_BYTES_USUAL,
};
use super::discard;
use super::frame::{self, Frame, FrameError, HEADER_LEN, Head, Reason, WINDOW_MAX};
use super::hpack::{self, Decoder, Encoder, HeaderList, HpackError};
use super::storage::{self, Buffer};
use super::stream::{STREAM_ID_MAX, State as StreamState, Streams};
use super::transmit::Transmit;

const NS_PER_MS: u64 = 1_000_000;
const NS_PER_S: u64 = 1_000_000_000;

/// A dynamic table size update to 0: pattern 001, size 0 in a 5-bit prefix.
const HPACK_TABLE_SIZE_UPDATE_TO_0: u8 = 0x20;

/// Something the owner must act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The stream ended; read it with [`Connection::response`], then [`Connection::release`].
    StreamEnded(StreamId),
    /// The peer is going away: no new requests; streams above `last_stream` ended NotProcessed.
    GoAway { last_stream: u32, reason: Reason },
    /// The connection is closed; send what remains in the transmit buffer, then drop it.
    Closed(ConnError),
    /// The peer acknowledged our PING ([`Connection::ping`]): it is alive.
    PingAcked,
    /// Our PING (keepalive or [`Connection::ping`]) went unanswered past its deadline,
    /// `after_ms` after it was sent (its own timeout, whatever the connection's is now). The
    /// connection stays open: its owner decides (a call still running has its own deadline,
    /// and closing now would lose it for certain).
    PingTimedOut { after_ms: u64 },
}

/// Our PING in flight: its payload, when it is overdue, and the timeout it was sent with.
#[derive(Clone, Copy, Debug)]
struct Ping {
    data: [u8; 8],
    deadline_ns: u64,
    timeout_ms: u64,
}

/// The connection's own state (its streams have theirs, [`super::stream`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    Open,
    /// GOAWAY received: existing streams finish, no new ones.
    Draining,
    Closed,
}

/// A connection's allocated storage, moved whole between [`Connection::new`] and
/// [`Connection::reset`].
struct Parts {
    tx: Buffer,
    rx: Buffer,
    streams: Streams,
    block: Buffer,
    decoder: Decoder,
    events: VecDeque<Event>,
}

/// A sans-IO HTTP/2 client connection.
pub struct Connection {
    cfg: Config,
    phase: Phase,
    tx: Transmit,
    rx: Buffer,
    rx_len: usize,
    peer_settings_seen: bool,
    settings_ack_deadline_ns: Option<u64>,
    peer_streams_max: u32,
    peer_initial_window: u32,
    peer_frame_size_max: u32,
    peer_header_list_max: u32,
    /// The peer set SETTINGS_HEADER_TABLE_SIZE: our next header block starts with a dynamic
    /// table size update (RFC 7541 section 4.2).
    table_size_update_due: bool,
    send_window: i64,
    recv_window: i64,
    recv_unacked: u32,
    streams: Streams,
    next_stream_id: u32,
    goaway_last: Option<u32>,
    goaway_reason: Reason,
    block: Buffer,
    block_len: usize,
    block_stream: u32,
    block_end_stream: bool,
    block_frames: u32,
    /// The slot of the stream started last, for [`Connection::send_by`] right after it.
    last_started: u32,
    block_deadline_ns: u64,
    decoder: Decoder,
    events: VecDeque<Event>,
    keepalive_interval_ns: Option<u64>,
    /// When the last frame arrived: keepalive PINGs go only to a silent peer.
    last_rx_ns: u64,
    ping_outstanding: Option<Ping>,
    ping_counter: u64,
    control_window_start_ns: u64,
    control_frames_in_window: u32,
    error: Option<ConnError>,
}

/// What a connection error for a header block that did not decode says.
fn hpack_error_text(e: HpackError) -> &'static str {
    match e {
        HpackError::ListTooLarge => "header list larger than our MAX_HEADER_LIST_SIZE",
        HpackError::Truncated => "HPACK: block ends inside a field",
        HpackError::IntegerOverflow => "HPACK: integer overflow",
        HpackError::InvalidIndex(_) => "HPACK: index out of the table",
        HpackError::SizeUpdateTooLarge(_) => "HPACK: table size update above our limit",
        HpackError::SizeUpdateNotAtStart => "HPACK: table size update after a field",
        HpackError::Huffman(_) => "HPACK: bad Huffman string",
    }
}

fn ms(v: u64) -> u64 {
    v.saturating_mul(NS_PER_MS)
}

impl Connection {
    /// Bytes [`Connection::new`] allocates for `cfg`: its buffers, stream table, HPACK tables
    /// and event queue (the budget counts one per upstream connection). Of these,
    /// [`Connection::buffer_bytes`] come from the thread's slab when it reserved one
    /// ([`crate::h2::storage::reserve`]).
    pub fn allocation_bytes(cfg: &Config) -> usize {
        std::mem::size_of::<Connection>()
            + cfg.transmit_bytes_max
            + HEADER_LEN
            + cfg.frame_size_max as usize
            + Streams::allocation_bytes(cfg)
            + cfg.header_block_bytes_max
            + Decoder::allocation_bytes(cfg.header_table_size as usize)
            + (cfg.stream_slots + 8) * std::mem::size_of::<Event>()
    }

    /// Bytes of the byte buffers (transmit, receive for a split frame, the header block in,
    /// each stream's bodies).
    pub fn buffer_bytes(cfg: &Config) -> usize {
        cfg.transmit_bytes_max
            + HEADER_LEN
            + cfg.frame_size_max as usize
            + cfg.header_block_bytes_max
            + cfg.stream_slots * (cfg.request_body_bytes_max + cfg.response_body_bytes_max)
    }

    /// What a thread reserves per connection it will make ([`crate::h2::storage::reserve`]):
    /// its buffers in whole pages, so that each connection's run of touched pages can start on
    /// a page ([`storage::align`]) and spans no more pages than it must.
    pub fn slab_bytes_per_connection(cfg: &Config) -> usize {
        Self::buffer_bytes(cfg).next_multiple_of(storage::PAGE_BYTES)
    }

    /// A connection whose preface and SETTINGS are already queued for sending.
    pub fn new(cfg: Config, now_ns: u64) -> Self {
        assert!(
            cfg.frame_size_max >= frame::FRAME_SIZE_MIN
                && cfg.frame_size_max <= frame::FRAME_SIZE_MAX
        );
        assert!(cfg.conn_window as i64 <= WINDOW_MAX && cfg.stream_window as i64 <= WINDOW_MAX);
        assert!(cfg.transmit_bytes_max >= frame::FRAME_SIZE_MIN as usize);
        // What the calls of a full stream table write to the transmit buffer: each one's
        // HEADERS and DATA frames, the header block as large as it usually is. The rest of it,
        // and the receive buffer (used only for a frame split across reads), stay untouched
        // until needed. Carved in this order so that what is touched (the header block in, the
        // last stream's response body as large as it usually is, the transmit buffer's head)
        // starts on a page, after the untouched receive buffer and request bodies; the rest of
        // that response body (room for a status query's answer) lies between it and the
        // transmit buffer, untouched until a large answer comes.
        let calls_bytes = cfg.stream_slots
            * (2 * HEADER_LEN + REQUEST_HEADER_BLOCK_BYTES_USUAL + cfg.request_body_bytes_max);
        let rx_bytes = HEADER_LEN + cfg.frame_size_max as usize;
        storage::align(
            rx_bytes
                + cfg.stream_slots * (cfg.request_body_bytes_max + cfg.response_body_bytes_max)
                - cfg.response_body_bytes_max,
        );
        let rx = storage::zeroed(rx_bytes);
        let mut block = None;
        let streams = Streams::new(&cfg, || {
            block = Some(storage::touched(cfg.header_block_bytes_max, usize::MAX));
        });
        let block =
            block.unwrap_or_else(|| storage::touched(cfg.header_block_bytes_max, usize::MAX));
        let parts = Parts {
            tx: storage::touched(cfg.transmit_bytes_max, calls_bytes),
            rx,
            streams,
            block,
            decoder: Decoder::new(cfg.header_table_size as usize),
            events: VecDeque::with_capacity(cfg.stream_slots + 8),
        };
        Self::assemble(cfg, now_ns, parts)
    }

    /// Makes this a new connection begun at `now_ns` (preface and SETTINGS queued again) in
    /// the storage of the old one: a pair that reconnects allocates nothing.
    pub fn reset(&mut self, now_ns: u64) {
        let mut parts = Parts {
            tx: self.tx.take_storage(),
            rx: std::mem::take(&mut self.rx),
            streams: std::mem::take(&mut self.streams),
            block: std::mem::take(&mut self.block),
            decoder: std::mem::replace(&mut self.decoder, Decoder::placeholder()),
            events: std::mem::take(&mut self.events),
        };
        parts.streams.clear();
        parts.decoder.reset();
        parts.events.clear();
        let cfg = self.cfg.clone();
        *self = Self::assemble(cfg, now_ns, parts);
    }

    fn assemble(cfg: Config, now_ns: u64, parts: Parts) -> Self {
        let Parts {
            tx,
            rx,
            streams,
            block,
            decoder,
            events,
        } = parts;
        let keepalive_interval_ns = cfg.keepalive_interval_ms.map(ms);
        let mut c = Connection {
            tx: Transmit::over(tx),
            rx,
            rx_len: 0,
            phase: Phase::Open,
            peer_settings_seen: false,
            settings_ack_deadline_ns: Some(now_ns + ms(cfg.settings_ack_timeout_ms)),
            peer_streams_max: u32::MAX,
            peer_initial_window: frame::WINDOW_DEFAULT,
            peer_frame_size_max: frame::FRAME_SIZE_MIN,
            peer_header_list_max: u32::MAX,
            table_size_update_due: false,
            send_window: frame::WINDOW_DEFAULT as i64,
            recv_window: frame::WINDOW_DEFAULT as i64,
            recv_unacked: 0,
            streams,
            next_stream_id: 1,
            last_started: 0,
            goaway_last: None,
            goaway_reason: Reason::NO_ERROR,
            block,
            block_len: 0,
            block_stream: 0,
            block_end_stream: false,
            block_frames: 0,
            block_deadline_ns: 0,
            decoder,
            events,
            keepalive_interval_ns,
            last_rx_ns: now_ns,
            ping_outstanding: None,
            ping_counter: 0,
            control_window_start_ns: now_ns,
            control_frames_in_window: 0,
            error: None,
            cfg,
        };
        let preface = c.tx.append(|b| {
            b.get_mut(..frame::PREFACE.len())?
                .copy_from_slice(frame::PREFACE);
            Some(frame::PREFACE.len())
        });
        assert!(preface, "tx holds the preface");
        let settings = [
            (frame::SETTINGS_HEADER_TABLE_SIZE, c.cfg.header_table_size),
            (frame::SETTINGS_ENABLE_PUSH, 0),
            (frame::SETTINGS_INITIAL_WINDOW_SIZE, c.cfg.stream_window),
            (frame::SETTINGS_MAX_FRAME_SIZE, c.cfg.frame_size_max),
            (
                frame::SETTINGS_MAX_HEADER_LIST_SIZE,
                c.cfg.header_list_bytes_max as u32,
            ),
        ];
        let written = c.tx.append(|b| frame::write_settings(b, &settings));
        assert!(written, "tx holds SETTINGS");
        if c.cfg.conn_window > frame::WINDOW_DEFAULT {
            let inc = c.cfg.conn_window - frame::WINDOW_DEFAULT;
            let written = c.tx.append(|b| frame::write_window_update(b, 0, inc));
            assert!(written, "tx holds WINDOW_UPDATE");
            c.recv_window += inc as i64;
        }
        c
    }

    // ---- outputs ----

    /// Bytes to send now (empty when there are none).
    pub fn poll_transmit(&self) -> &[u8] {
        self.tx.pending()
    }

    /// For a transport that sends asynchronously (io_uring): the bytes to send now, which stay
    /// where they are until [`Connection::advance_transmit`] reports the send. Until then the
    /// transmit buffer is only appended to, never compacted, so the kernel reads what we meant.
    pub fn pin_transmit(&mut self) -> &[u8] {
        self.tx.pin()
    }

    /// `n` bytes of [`Connection::poll_transmit`] were sent (this also ends a pin).
    pub fn advance_transmit(&mut self, n: usize) {
        self.tx.advance(n);
        // Room freed: request bodies held back by a full buffer may continue.
        if self.phase != Phase::Closed {
            self.flush_data();
        }
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Bytes of the transmit stream reported sent ([`Connection::advance_transmit`]) since
    /// the connection began: with [`Connection::request_end`], whether a request's last byte
    /// can have reached the peer.
    pub fn transmitted_total(&self) -> u64 {
        self.tx.sent_total()
    }

    /// The transmit stream's offset just past stream `id`'s last request byte, once its
    /// END_STREAM is queued. A gRPC unary call cannot have been processed before the peer had
    /// that byte: while [`Connection::transmitted_total`] is below it, the call is safe to
    /// send again.
    pub fn request_end(&self, id: StreamId) -> Option<u64> {
        self.streams[self.streams.find(id.0)?].request_end()
    }

    /// Sends a PING now (unless one is outstanding) that must be acknowledged within
    /// `timeout_ms`: [`Event::PingAcked`] when it is, [`Event::PingTimedOut`] when it is not.
    /// For an owner that doubts the peer is alive.
    pub fn ping(&mut self, now_ns: u64, timeout_ms: u64) {
        if self.phase == Phase::Closed || self.ping_outstanding.is_some() {
            return;
        }
        self.ping_counter += 1;
        let data = self.ping_counter.to_be_bytes();
        if self.write_control(|b| frame::write_ping(b, false, data)) {
            self.ping_outstanding = Some(Ping {
                data,
                deadline_ns: now_ns + ms(timeout_ms),
                timeout_ms,
            });
        }
    }

    /// Changes the keepalive interval and how long a keepalive PING has to be answered (see
    /// [`Config::keepalive_interval_ms`]); a PING already in flight keeps its deadline.
    pub fn set_keepalive(&mut self, interval_ms: Option<u64>, timeout_ms: u64) {
        self.keepalive_interval_ns = interval_ms.map(ms);
        self.cfg.keepalive_timeout_ms = timeout_ms;
    }

    /// When the last frame from the peer arrived.
    pub fn last_received_ns(&self) -> u64 {
        self.last_rx_ns
    }

    /// The earliest time [`Connection::handle_timeout`] must be called.
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.phase == Phase::Closed {
            return None;
        }
        let mut t = self.settings_ack_deadline_ns;
        let mut min = |v: u64| t = Some(t.map_or(v, |t| t.min(v)));
        if self.block_stream != 0 {
            min(self.block_deadline_ns);
        }
        match (self.ping_outstanding, self.keepalive_interval_ns) {
            (Some(p), _) => min(p.deadline_ns),
            (None, Some(interval)) => min(self.last_rx_ns + interval),
            (None, None) => {}
        }
        for s in self.streams.iter().filter(|s| s.is_active()) {
            if let Some(d) = s.deadline_ns {
                min(d);
            }
            if let Some(d) = s.send_by_ns.filter(|_| s.request_open()) {
                min(d);
            }
        }
        t
    }

    /// Whether the peer's SETTINGS have arrived, so its limits are known. Requests may start
    /// earlier, but then the peer may refuse streams beyond a limit we have not seen yet.
    pub fn is_ready(&self) -> bool {
        self.peer_settings_seen
    }

    pub fn is_closed(&self) -> bool {
        self.phase == Phase::Closed
    }

    pub fn error(&self) -> Option<ConnError> {
        self.error
    }

    /// Streams started and not yet ended.
    pub fn active_streams(&self) -> usize {
        self.streams.active_count()
    }

    /// Whether [`Connection::start_request`] can succeed now (ignoring buffer space).
    pub fn can_start(&self) -> bool {
        self.phase == Phase::Open
            && (self.active_streams() as u32) < self.peer_streams_max
            && self.streams.idle_slot().is_some()
            && self.next_stream_id <= STREAM_ID_MAX
    }

    /// The peer's current SETTINGS_MAX_CONCURRENT_STREAMS (u32::MAX until it sets one).
    pub fn peer_streams_max(&self) -> u32 {
        self.peer_streams_max
    }

    // ---- requests ----

    /// Starts a request: HEADERS are queued at once, the body (written by `body` into the
    /// stream's buffer, returning its length or `None` if it does not fit) follows as flow
    /// control allows. `deadline_ns` ends the stream with [`StreamEnd::TimedOut`].
    pub fn start_request(
        &mut self,
        now_ns: u64,
        fields: &[Field<'_>],
        deadline_ns: Option<u64>,
        body: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> Result<StreamId, StartError> {
        self.start_request_after(now_ns, &[], 0, fields, deadline_ns, body)
    }

    /// As [`Connection::start_request`], the header block starting with `head`: fields
    /// encoded once ([`hpack::Encoded`]), then `fields`.
    pub fn start_request_encoded(
        &mut self,
        now_ns: u64,
        head: &hpack::Encoded,
        fields: &[Field<'_>],
        deadline_ns: Option<u64>,
        body: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> Result<StreamId, StartError> {
        self.start_request_after(
            now_ns,
            head.bytes(),
            head.list_size(),
            fields,
            deadline_ns,
            body,
        )
    }

    /// Request `id` must be queued whole (its END_STREAM) by `by_ns`: if flow control still
    /// holds part of it then, the stream is reset (CANCEL) and ends [`StreamEnd::Withheld`],
    /// so what it carries never reaches the peer late (a bundle past its max age). Nothing for
    /// a request already queued whole.
    pub fn send_by(&mut self, id: StreamId, by_ns: u64) {
        if let Some(i) = self.unsent(id) {
            self.streams[i].send_by_ns = Some(by_ns);
        }
    }

    /// Whether part of request `id` is still held (its END_STREAM not queued): what
    /// [`Connection::send_by`] is for. One compare for the stream started last, when it went
    /// whole at once (the usual case).
    pub fn is_unsent(&self, id: StreamId) -> bool {
        self.unsent(id).is_some()
    }

    fn unsent(&self, id: StreamId) -> Option<usize> {
        let last = self.last_started as usize;
        let i = if self.streams[last].id == id.0 {
            last
        } else {
            self.streams.find_active(id.0)?
        };
        self.streams[i].request_open().then_some(i)
    }

    fn start_request_after(
        &mut self,
        now_ns: u64,
        head: &[u8],
        head_list_size: usize,
        fields: &[Field<'_>],
        deadline_ns: Option<u64>,
        body: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> Result<StreamId, StartError> {
        let _ = now_ns;
        if self.phase != Phase::Open {
            return Err(StartError::NotAccepting);
        }
        if self.next_stream_id > STREAM_ID_MAX {
            return Err(StartError::StreamIdsExhausted);
        }
        if self.active_streams() as u32 >= self.peer_streams_max {
            return Err(StartError::ConcurrencyLimit);
        }
        let slot = self
            .streams
            .idle_slot()
            .ok_or(StartError::ConcurrencyLimit)?;
        // The header block is encoded where its HEADERS frame goes, after room for the frame
        // head: no buffer of its own per connection. It is one frame, since it is never larger
        // than the smallest frame size a peer may allow.
        const _: () = assert!(REQUEST_HEADER_BLOCK_BYTES_MAX <= frame::FRAME_SIZE_MIN as usize);
        self.tx.compact();
        let room = self.tx.room();
        let block_room = room.saturating_sub(HEADER_LEN);
        // Either the block is too large or the transmit buffer is too full to tell.
        let no_room = if block_room >= REQUEST_HEADER_BLOCK_BYTES_MAX {
            StartError::HeadersTooLarge
        } else {
            StartError::TransmitFull
        };
        let spare = self.tx.spare();
        let block_out = spare
            .get_mut(HEADER_LEN..HEADER_LEN + block_room.min(REQUEST_HEADER_BLOCK_BYTES_MAX))
            .unwrap_or_default();
        // A dynamic table size update to 0, when one is due, opens the block.
        let update = usize::from(self.table_size_update_due);
        if update == 1 {
            *block_out.first_mut().ok_or(no_room)? = HPACK_TABLE_SIZE_UPDATE_TO_0;
        }
        let mut len = update + head.len();
        block_out
            .get_mut(update..len)
            .ok_or(no_room)?
            .copy_from_slice(head);
        let mut list_size = head_list_size;
        for f in fields {
            if Encoder::encode_field(f.name, f.value, f.sensitive, block_out, &mut len).is_none() {
                return Err(no_room);
            }
            list_size += f.name.len() + f.value.len() + hpack::ENTRY_OVERHEAD;
        }
        if list_size > self.peer_header_list_max as usize {
            return Err(StartError::HeadersTooLarge);
        }
        let id = self.next_stream_id;
        let headers_end = HEADER_LEN + len;
        if room < headers_end {
            return Err(StartError::TransmitFull);
        }
        // The body goes straight after the HEADERS frame, as one DATA frame, when whatever it
        // turns out to be fits both windows, the peer's frame size and the transmit buffer; it
        // is copied from the stream's body buffer (written only then) when it does not.
        let body_max = self.streams[slot].body_out.len();
        let direct = (self.peer_initial_window as i64).min(self.send_window) >= body_max as i64
            && self.peer_frame_size_max as usize >= body_max
            && room >= headers_end + HEADER_LEN + body_max;
        let body_len = if direct {
            let at = headers_end + HEADER_LEN;
            body(&mut self.tx.spare()[at..at + body_max])
        } else {
            body(&mut self.streams[slot].body_out)
        }
        .ok_or(StartError::BodyTooLarge)?;
        self.next_stream_id += 2;
        let flags = frame::FLAG_END_HEADERS
            | if body_len == 0 {
                frame::FLAG_END_STREAM
            } else {
                0
            };
        let spare = self.tx.spare();
        frame::Head {
            len: len as u32,
            kind: frame::HEADERS,
            flags,
            stream: id,
        }
        .write(spare);
        let mut written = headers_end;
        let mut body_sent = 0;
        if direct && body_len > 0 {
            frame::Head {
                len: body_len as u32,
                kind: frame::DATA,
                flags: frame::FLAG_END_STREAM,
                stream: id,
            }
            .write(&mut spare[headers_end..]);
            written += HEADER_LEN + body_len;
            body_sent = body_len;
        }
        self.tx.commit(written);
        if update == 1 {
            self.table_size_update_due = false;
        }
        let s = &mut self.streams[slot];
        s.open(
            id,
            self.peer_initial_window,
            self.cfg.stream_window,
            body_len,
            deadline_ns,
        );
        s.body_out_sent = body_sent;
        self.last_started = slot as u32;
        let s = &mut self.streams[slot];
        s.send_window -= body_sent as i64;
        self.send_window -= body_sent as i64;
        if body_sent == body_len {
            let end = self.tx.queued_end();
            self.streams[slot].close_local(end);
        }
        self.flush_data();
        Ok(StreamId(id))
    }

    /// The response of an ended stream; `None` while it runs or when unknown.
    pub fn response(&self, id: StreamId) -> Option<Response<'_>> {
        self.streams[self.streams.find(id.0)?].response()
    }

    /// Frees a stream's slot; a stream still running is cancelled (RST_STREAM CANCEL).
    pub fn release(&mut self, id: StreamId) {
        let Some(slot) = self.streams.find(id.0) else {
            return;
        };
        if self.streams[slot].is_active() && self.phase != Phase::Closed {
            self.write_rst(id.0, Reason::CANCEL);
        }
        self.streams[slot].state = StreamState::Idle;
        self.maybe_finish_drain();
    }

    /// Closes the connection with GOAWAY(NO_ERROR); running streams end ConnectionLost.
    pub fn close(&mut self) {
        if self.phase == Phase::Closed {
            return;
        }
        self.write_control(|b| frame::write_goaway(b, 0, Reason::NO_ERROR));
        self.close_with(ConnError::Local);
    }

    // ---- inputs ----

    /// The transport ended (EOF or error).
    pub fn handle_transport_closed(&mut self) {
        if self.phase != Phase::Closed {
            self.close_with(ConnError::TransportClosed);
        }
    }

    pub fn handle_timeout(&mut self, now_ns: u64) {
        if self.phase == Phase::Closed {
            return;
        }
        if self.settings_ack_deadline_ns.is_some_and(|d| now_ns >= d) {
            self.write_control(|b| frame::write_goaway(b, 0, Reason::SETTINGS_TIMEOUT));
            self.close_with(ConnError::Timeout {
                what: "SETTINGS not acknowledged",
            });
            return;
        }
        if self.block_stream != 0 && now_ns >= self.block_deadline_ns {
            self.conn_error(Reason::ENHANCE_YOUR_CALM, "header block left open too long");
            return;
        }
        match (self.ping_outstanding, self.keepalive_interval_ns) {
            (Some(p), _) if now_ns >= p.deadline_ns => {
                self.ping_outstanding = None;
                self.events.push_back(Event::PingTimedOut {
                    after_ms: p.timeout_ms,
                });
            }
            (None, Some(interval)) if now_ns >= self.last_rx_ns + interval => {
                self.ping(now_ns, self.cfg.keepalive_timeout_ms);
            }
            _ => {}
        }
        for i in 0..self.streams.len() {
            let s = &self.streams[i];
            if !s.is_active() {
                continue;
            }
            let end = if s.deadline_ns.is_some_and(|d| now_ns >= d) {
                StreamEnd::TimedOut {
                    request_sent: s.request_sent(),
                }
            } else if s.request_open() && s.send_by_ns.is_some_and(|d| now_ns >= d) {
                StreamEnd::Withheld
            } else {
                continue;
            };
            self.write_rst(s.id, Reason::CANCEL);
            self.end_stream(i, end);
        }
        self.maybe_finish_drain();
    }

    /// Feeds received bytes; frames are handled as they complete.
    pub fn handle_bytes(&mut self, now_ns: u64, mut input: &[u8]) {
        while !input.is_empty() && self.phase != Phase::Closed {
            if self.rx_len == 0 && input.len() >= HEADER_LEN {
                let head = Head::parse(input[..HEADER_LEN].try_into().expect("9 bytes"));
                if head.len > self.cfg.frame_size_max {
                    let first = input[..HEADER_LEN].try_into().expect("9 bytes");
                    return self.oversized(first);
                }
                let total = HEADER_LEN + head.len as usize;
                if input.len() >= total {
                    self.on_frame(now_ns, head, &input[HEADER_LEN..total]);
                    self.maybe_finish_drain();
                    input = &input[total..];
                    continue;
                }
            }
            // Partial frame: gather it in the receive buffer.
            let want = if self.rx_len < HEADER_LEN {
                HEADER_LEN - self.rx_len
            } else {
                let head = Head::parse(self.rx[..HEADER_LEN].try_into().expect("9 bytes"));
                HEADER_LEN + head.len as usize - self.rx_len
            };
            let n = want.min(input.len());
            self.rx[self.rx_len..self.rx_len + n].copy_from_slice(&input[..n]);
            self.rx_len += n;
            input = &input[n..];
            if self.rx_len < HEADER_LEN {
                continue;
            }
            let head = Head::parse(self.rx[..HEADER_LEN].try_into().expect("9 bytes"));
            if head.len > self.cfg.frame_size_max {
                let first = self.rx[..HEADER_LEN].try_into().expect("9 bytes");
                return self.oversized(first);
            }
            if self.rx_len == HEADER_LEN + head.len as usize {
                let rx = std::mem::take(&mut self.rx);
                self.on_frame(now_ns, head, &rx[HEADER_LEN..self.rx_len]);
                self.rx = rx;
                self.rx_len = 0;
                self.maybe_finish_drain();
            }
        }
    }

    /// A frame header (`head`) announcing more than our MAX_FRAME_SIZE. Before the peer's
    /// SETTINGS, "HTTP/" there is an HTTP/1 server's answer (a wrong port, a front end
    /// without HTTP/2), whose first bytes read as a huge frame: named as what it is.
    fn oversized(&mut self, head: [u8; HEADER_LEN]) {
        if !self.peer_settings_seen && head.starts_with(b"HTTP/") {
            return self.conn_error(
                Reason::PROTOCOL_ERROR,
                "the server answered in HTTP/1, not HTTP/2",
            );
        }
        self.conn_error(
            Reason::FRAME_SIZE_ERROR,
            "frame larger than our MAX_FRAME_SIZE",
        );
    }

    // ---- frame handling ----

    fn on_frame(&mut self, now_ns: u64, head: Head, payload: &[u8]) {
        self.last_rx_ns = now_ns;
        if self.block_stream != 0
            && (head.kind != frame::CONTINUATION || head.stream != self.block_stream)
        {
            return self.conn_error(Reason::PROTOCOL_ERROR, "frame inside an open header block");
        }
        if !self.peer_settings_seen
            && (head.kind != frame::SETTINGS || head.flags & frame::FLAG_ACK != 0)
        {
            return self.conn_error(Reason::PROTOCOL_ERROR, "first frame is not SETTINGS");
        }
        let f = match frame::decode(head, payload) {
            Ok(f) => f,
            Err(FrameError {
                reason,
                stream: Some(s),
                what,
            }) => {
                if let Err(what) = self.check_stream_id(s) {
                    return self.conn_error(Reason::PROTOCOL_ERROR, what);
                }
                return self.stream_error(s, reason, what);
            }
            Err(FrameError {
                reason,
                stream: None,
                what,
            }) => return self.conn_error(reason, what),
        };
        match f {
            Frame::Data {
                stream,
                data,
                end_stream,
                flow_len,
            } => self.on_data(stream, data, end_stream, flow_len),
            Frame::Headers {
                stream,
                fragment,
                end_stream,
                end_headers,
                self_dependent,
            } => {
                if let Err(what) = self.check_stream_id(stream) {
                    return self.conn_error(Reason::PROTOCOL_ERROR, what);
                }
                if self_dependent {
                    // Reset now; its block (and CONTINUATIONs) still goes through the decoder,
                    // as for any stream that is gone, so the HPACK table stays in step.
                    self.stream_error(stream, Reason::PROTOCOL_ERROR, "HEADERS depends on itself");
                    if self.phase == Phase::Closed {
                        return;
                    }
                }
                self.block_stream = stream;
                self.block_end_stream = end_stream;
                self.block_len = 0;
                self.block_frames = 0;
                self.block_deadline_ns = now_ns + ms(self.cfg.header_block_open_ms);
                self.on_fragment(fragment, end_headers);
            }
            Frame::Continuation {
                stream,
                fragment,
                end_headers,
            } => {
                if self.block_stream != stream {
                    return self.conn_error(
                        Reason::PROTOCOL_ERROR,
                        "CONTINUATION without an open header block",
                    );
                }
                self.on_fragment(fragment, end_headers);
            }
            Frame::Priority { .. } | Frame::Unknown { .. } => {}
            Frame::RstStream { stream, reason } => {
                if let Err(what) = self.check_stream_id(stream) {
                    return self.conn_error(Reason::PROTOCOL_ERROR, what);
                }
                if let Some(i) = self.streams.find_active(stream) {
                    let sent = self.streams[i].request_sent();
                    self.end_stream(
                        i,
                        StreamEnd::Reset {
                            reason,
                            request_sent: sent,
                        },
                    );
                }
            }
            Frame::Settings { ack: true, .. } => self.settings_ack_deadline_ns = None,
            Frame::Settings {
                ack: false,
                payload,
            } => self.on_settings(now_ns, payload),
            Frame::PushPromise { .. } => {
                self.conn_error(Reason::PROTOCOL_ERROR, "PUSH_PROMISE with push disabled")
            }
            Frame::Ping { ack: true, data } => {
                if self.ping_outstanding.is_some_and(|p| p.data == data) {
                    self.ping_outstanding = None;
                    self.events.push_back(Event::PingAcked);
                }
            }
            Frame::Ping { ack: false, data } => {
                if self.control_flood(now_ns) {
                    return self.conn_error(Reason::ENHANCE_YOUR_CALM, "PING flood");
                }
                if !self.write_control(|b| frame::write_ping(b, true, data)) {
                    self.conn_error(
                        Reason::ENHANCE_YOUR_CALM,
                        "PING ACKs overflow the transmit buffer",
                    );
                }
            }
            Frame::GoAway {
                last_stream,
                reason,
                ..
            } => self.on_goaway(last_stream, reason),
            Frame::WindowUpdate {
                stream: 0,
                increment,
            } => {
                self.send_window += increment as i64;
                if self.send_window > WINDOW_MAX {
                    return self
                        .conn_error(Reason::FLOW_CONTROL_ERROR, "connection window above 2^31-1");
                }
                self.flush_data();
            }
            Frame::WindowUpdate { stream, increment } => {
                if let Err(what) = self.check_stream_id(stream) {
                    return self.conn_error(Reason::PROTOCOL_ERROR, what);
                }
                if let Some(i) = self.streams.find_active(stream) {
                    self.streams[i].send_window += increment as i64;
                    if self.streams[i].send_window > WINDOW_MAX {
                        return self.stream_error(
                            stream,
                            Reason::FLOW_CONTROL_ERROR,
                            "stream window above 2^31-1",
                        );
                    }
                    self.flush_data();
                }
            }
        }
    }

    /// Stream ids the server may use in frames: ones we opened (odd, below our next id).
    fn check_stream_id(&self, stream: u32) -> Result<(), &'static str> {
        if stream % 2 == 0 {
            Err("frame on a server-initiated stream id with push disabled")
        } else if stream >= self.next_stream_id {
            Err("frame on an idle stream")
        } else {
            Ok(())
        }
    }

    fn control_flood(&mut self, now_ns: u64) -> bool {
        if now_ns >= self.control_window_start_ns + NS_PER_S {
            self.control_window_start_ns = now_ns;
            self.control_frames_in_window = 0;
        }
        self.control_frames_in_window += 1;
        self.control_frames_in_window > CONTROL_FRAMES_PER_SECOND_MAX
    }

    fn on_data(&mut self, stream: u32, data: &[u8], end_stream: bool, flow_len: u32) {
        if let Err(what) = self.check_stream_id(stream) {
            return self.conn_error(Reason::PROTOCOL_ERROR, what);
        }
        // Connection flow control counts every DATA frame, even on streams already gone.
        if flow_len as i64 > self.recv_window {
            return self.conn_error(
                Reason::FLOW_CONTROL_ERROR,
                "DATA beyond the connection window",
            );
        }
        self.recv_window -= flow_len as i64;
        self.recv_unacked += flow_len;
        if self.recv_unacked >= self.cfg.conn_window / 2 {
            let inc = self.recv_unacked;
            if self.write_control(|b| frame::write_window_update(b, 0, inc)) {
                self.recv_window += inc as i64;
                self.recv_unacked = 0;
            }
        }
        let Some(i) = self.streams.find_active(stream) else {
            // A stream we reset or released: its frames may still be in flight.
            return;
        };
        let s = &mut self.streams[i];
        if !s.response_started() {
            return self.stream_error(
                stream,
                Reason::PROTOCOL_ERROR,
                "DATA before response HEADERS",
            );
        }
        if flow_len as i64 > s.recv_window {
            return self.stream_error(
                stream,
                Reason::FLOW_CONTROL_ERROR,
                "DATA beyond the stream window",
            );
        }
        s.recv_window -= flow_len as i64;
        let end = s.body_in_len + data.len();
        if end > s.body_in.len() {
            return self.stream_error(
                stream,
                Reason::CANCEL,
                "response body larger than our buffer",
            );
        }
        s.body_in[s.body_in_len..end].copy_from_slice(data);
        s.body_in_len = end;
        if end_stream {
            return self.end_stream(i, StreamEnd::Complete);
        }
        s.recv_unacked += flow_len;
        if s.recv_unacked >= self.cfg.stream_window / 2 {
            let inc = s.recv_unacked;
            if self.write_control(|b| frame::write_window_update(b, stream, inc)) {
                let s = &mut self.streams[i];
                s.recv_window += inc as i64;
                s.recv_unacked = 0;
            }
        }
    }

    fn on_fragment(&mut self, fragment: &[u8], end_headers: bool) {
        self.block_frames += 1;
        if self.block_frames > HEADER_BLOCK_FRAMES_MAX {
            return self.conn_error(Reason::ENHANCE_YOUR_CALM, "CONTINUATION flood");
        }
        let end = self.block_len + fragment.len();
        if end > self.block.len() {
            return self.conn_error(
                Reason::ENHANCE_YOUR_CALM,
                "header block larger than our limit",
            );
        }
        self.block[self.block_len..end].copy_from_slice(fragment);
        self.block_len = end;
        if end_headers {
            self.on_header_block();
        }
    }

    fn on_header_block(&mut self) {
        let stream = self.block_stream;
        self.block_stream = 0;
        let end_stream = self.block_end_stream;
        let block = &self.block[..self.block_len];
        let Some(i) = self.streams.find_active(stream) else {
            // The block is decoded even for streams that are gone: the HPACK table must stay in
            // step. Its fields are dropped, so the thread's one discard list takes them.
            let kept = self.decoder.decode_lenient(
                block,
                &mut HeaderList::new(0, 0),
                &mut discard::ThreadSpill(&self.cfg),
            );
            if let Err(e) = kept {
                self.conn_error(Reason::COMPRESSION_ERROR, hpack_error_text(e));
            }
            return;
        };
        let s = &mut self.streams[i];
        let (list, trailers) = if s.response_started() {
            (&mut s.trailers, true)
        } else {
            s.headers.clear();
            (&mut s.headers, false)
        };
        // More fields than the list keeps (a load balancer's long cookie, say) are decoded and
        // dropped rather than break the connection (RFC 9113 section 10.5.1): the reply keeps
        // what fit, its :status first.
        let kept = self
            .decoder
            .decode_lenient(block, list, &mut discard::ThreadSpill(&self.cfg));
        if let Err(e) = kept {
            return self.conn_error(Reason::COMPRESSION_ERROR, hpack_error_text(e));
        }
        let pseudo = list
            .iter()
            .filter(|(n, _)| n.first() == Some(&b':'))
            .count();
        if trailers {
            if !end_stream {
                return self.stream_error(
                    stream,
                    Reason::PROTOCOL_ERROR,
                    "second header block without END_STREAM",
                );
            }
            if pseudo != 0 {
                return self.stream_error(
                    stream,
                    Reason::PROTOCOL_ERROR,
                    "pseudo-header in trailers",
                );
            }
            return self.end_stream(i, StreamEnd::Complete);
        }
        let status = list.get(b":status");
        if pseudo != 1 || status.is_none_or(|v| v.len() != 3 || !v.iter().all(u8::is_ascii_digit)) {
            return self.stream_error(
                stream,
                Reason::PROTOCOL_ERROR,
                "response headers need exactly one valid :status",
            );
        }
        if status.is_some_and(|v| v[0] == b'1') {
            // Informational (1xx): the real response follows.
            if end_stream {
                return self.stream_error(
                    stream,
                    Reason::PROTOCOL_ERROR,
                    "END_STREAM on a 1xx response",
                );
            }
            self.streams[i].headers.clear();
            return;
        }
        self.streams[i].start_response();
        if end_stream {
            self.end_stream(i, StreamEnd::Complete);
        }
    }

    fn on_settings(&mut self, now_ns: u64, payload: &[u8]) {
        if self.control_flood(now_ns) {
            return self.conn_error(Reason::ENHANCE_YOUR_CALM, "SETTINGS flood");
        }
        for (id, value) in frame::settings(payload) {
            match id {
                frame::SETTINGS_ENABLE_PUSH if value != 0 => {
                    return self.conn_error(Reason::PROTOCOL_ERROR, "server set ENABLE_PUSH");
                }
                frame::SETTINGS_MAX_CONCURRENT_STREAMS => self.peer_streams_max = value,
                frame::SETTINGS_INITIAL_WINDOW_SIZE => {
                    if value as i64 > WINDOW_MAX {
                        return self.conn_error(
                            Reason::FLOW_CONTROL_ERROR,
                            "INITIAL_WINDOW_SIZE above 2^31-1",
                        );
                    }
                    let delta = value as i64 - self.peer_initial_window as i64;
                    self.peer_initial_window = value;
                    for s in self.streams.iter_mut().filter(|s| s.is_active()) {
                        s.send_window += delta;
                        if s.send_window > WINDOW_MAX {
                            return self.conn_error(
                                Reason::FLOW_CONTROL_ERROR,
                                "INITIAL_WINDOW_SIZE change overflows a stream window",
                            );
                        }
                    }
                }
                frame::SETTINGS_MAX_FRAME_SIZE => {
                    if !(frame::FRAME_SIZE_MIN..=frame::FRAME_SIZE_MAX).contains(&value) {
                        return self
                            .conn_error(Reason::PROTOCOL_ERROR, "MAX_FRAME_SIZE out of range");
                    }
                    self.peer_frame_size_max = value;
                }
                frame::SETTINGS_MAX_HEADER_LIST_SIZE => self.peer_header_list_max = value,
                // Our encoder never indexes, so any size suits it; but a peer whose decoder
                // now allows less than it did expects our next block to say so (nghttp2
                // refuses it otherwise), and some expect it after any change. An update to 0
                // is always within the limit, so one goes after every such setting.
                frame::SETTINGS_HEADER_TABLE_SIZE => self.table_size_update_due = true,
                _ => {}
            }
        }
        self.peer_settings_seen = true;
        if !self.write_control(frame::write_settings_ack) {
            return self.conn_error(
                Reason::ENHANCE_YOUR_CALM,
                "SETTINGS ACKs overflow the transmit buffer",
            );
        }
        self.flush_data();
    }

    fn on_goaway(&mut self, last_stream: u32, reason: Reason) {
        let last = self.goaway_last.map_or(last_stream, |l| l.min(last_stream));
        self.goaway_last = Some(last);
        self.goaway_reason = reason;
        if self.phase == Phase::Open {
            self.phase = Phase::Draining;
        }
        for i in 0..self.streams.len() {
            if self.streams[i].is_active() && self.streams[i].id > last {
                self.end_stream(i, StreamEnd::NotProcessed);
            }
        }
        self.push_event(Event::GoAway {
            last_stream: last,
            reason,
        });
        self.maybe_finish_drain();
    }

    fn maybe_finish_drain(&mut self) {
        if self.phase == Phase::Draining && self.active_streams() == 0 {
            self.close_with(ConnError::GoAway {
                reason: self.goaway_reason,
            });
        }
    }

    // ---- sending ----

    /// Sends request body DATA as far as both windows, the peer's frame size and the transmit
    /// buffer allow.
    fn flush_data(&mut self) {
        for i in 0..self.streams.len() {
            if !matches!(self.streams[i].state, StreamState::Open { .. }) {
                continue;
            }
            self.tx.compact();
            let s = &self.streams[i];
            let remaining = s.body_out_len - s.body_out_sent;
            let room = self.tx.room().saturating_sub(HEADER_LEN);
            let n = (remaining as i64)
                .min(self.send_window)
                .min(s.send_window)
                .min(self.peer_frame_size_max as i64)
                .min(room as i64);
            if n <= 0 {
                continue;
            }
            let n = n as usize;
            let last = n == remaining;
            let s = &mut self.streams[i];
            let out = self.tx.spare();
            frame::Head {
                len: n as u32,
                kind: frame::DATA,
                flags: if last { frame::FLAG_END_STREAM } else { 0 },
                stream: s.id,
            }
            .write(out);
            out[HEADER_LEN..HEADER_LEN + n]
                .copy_from_slice(&s.body_out[s.body_out_sent..s.body_out_sent + n]);
            self.tx.commit(HEADER_LEN + n);
            s.body_out_sent += n;
            s.send_window -= n as i64;
            self.send_window -= n as i64;
            if last {
                let end = self.tx.queued_end();
                self.streams[i].close_local(end);
            }
        }
    }

    /// Appends a control frame; false when the transmit buffer is full.
    fn write_control(&mut self, w: impl FnOnce(&mut [u8]) -> Option<usize>) -> bool {
        self.tx.append_control(w)
    }

    fn write_rst(&mut self, stream: u32, reason: Reason) {
        if !self.write_control(|b| frame::write_rst_stream(b, stream, reason)) {
            self.conn_error(
                Reason::ENHANCE_YOUR_CALM,
                "RST_STREAM overflows the transmit buffer",
            );
        }
    }

    // ---- endings ----

    fn push_event(&mut self, e: Event) {
        // Capacity covers one end per slot plus GOAWAY and Closed. A GOAWAY never takes the
        // room reserved for stream ends: a peer repeating GOAWAY must not crowd them out.
        let reserved = if matches!(e, Event::GoAway { .. }) {
            self.streams.len() + 1
        } else {
            0
        };
        if self.events.len() + reserved < self.events.capacity() {
            self.events.push_back(e);
        }
    }

    fn end_stream(&mut self, i: usize, end: StreamEnd) {
        let s = &mut self.streams[i];
        // The peer answered in full before our request did (its body held back by a window):
        // the call is over for us, so the stream is reset rather than left open on the peer.
        let ours_open = end == StreamEnd::Complete && s.request_open();
        s.close(end);
        let id = s.id;
        if ours_open {
            self.write_rst(id, Reason::CANCEL);
        }
        self.push_event(Event::StreamEnded(StreamId(id)));
    }

    fn stream_error(&mut self, stream: u32, reason: Reason, what: &'static str) {
        self.write_rst(stream, reason);
        if let Some(i) = self.streams.find_active(stream) {
            let sent = self.streams[i].request_sent();
            self.end_stream(
                i,
                StreamEnd::PeerError {
                    reason,
                    what,
                    request_sent: sent,
                },
            );
        }
    }

    fn conn_error(&mut self, reason: Reason, what: &'static str) {
        if self.phase == Phase::Closed {
            return;
        }
        // Best effort: the peer learns why unless our buffer is full.
        self.write_control(|b| frame::write_goaway(b, 0, reason));
        self.close_with(ConnError::PeerProtocol { reason, what });
    }

    fn close_with(&mut self, error: ConnError) {
        self.phase = Phase::Closed;
        self.error = Some(error);
        for i in 0..self.streams.len() {
            if self.streams[i].is_active() {
                let sent = self.streams[i].request_sent();
                self.end_stream(
                    i,
                    StreamEnd::ConnectionLost {
                        error,
                        request_sent: sent,
                    },
                );
            }
        }
        self.push_event(Event::Closed(error));
    }
}
