//! The transmit buffer: frames are appended at its tail and sent from its head, and every byte
//! has an offset in the connection's transmit stream (what [`super::conn::Connection::request_end`]
//! and `transmitted_total` compare). A transport that sends asynchronously pins the pending
//! bytes: until the send is reported the buffer is only appended to, never compacted, so the
//! kernel reads what was meant.
//!
//! This file holds the buffer and its offsets; it is NOT where frames are chosen or written
//! ([`super::conn`] and [`super::frame`]).

/// Room a control frame needs at the tail: the largest we write (GOAWAY and PING, 17 bytes)
/// with room to spare, so the buffer compacts before one would not fit.
const CONTROL_FRAME_ROOM_BYTES: usize = 64;

use super::storage::Buffer;

pub(super) struct Transmit {
    buf: Buffer,
    head: usize,
    tail: usize,
    /// `buf[head..tail]` is being sent by an asynchronous transport: do not move it.
    pinned: bool,
    /// Bytes of the transmit stream reported sent since the connection began.
    sent_total: u64,
}

impl Transmit {
    /// An empty buffer over `buf`, as at the start of a connection.
    pub(super) fn over(buf: Buffer) -> Transmit {
        Transmit {
            buf,
            head: 0,
            tail: 0,
            pinned: false,
            sent_total: 0,
        }
    }

    /// The storage, taken out for reuse by the next connection (this one is left empty).
    pub(super) fn take_storage(&mut self) -> Buffer {
        std::mem::take(&mut self.buf)
    }

    /// Bytes to send now.
    pub(super) fn pending(&self) -> &[u8] {
        &self.buf[self.head..self.tail]
    }

    /// Bytes to send now, held in place until [`Transmit::advance`].
    pub(super) fn pin(&mut self) -> &[u8] {
        self.pinned = true;
        &self.buf[self.head..self.tail]
    }

    /// `n` pending bytes were sent; this also ends a pin.
    pub(super) fn advance(&mut self, n: usize) {
        self.pinned = false;
        self.head += n;
        self.sent_total += n as u64;
        debug_assert!(self.head <= self.tail);
        if self.head == self.tail {
            self.head = 0;
            self.tail = 0;
        }
    }

    /// Bytes of the transmit stream reported sent.
    pub(super) fn sent_total(&self) -> u64 {
        self.sent_total
    }

    /// The transmit stream's offset just past the bytes queued so far.
    pub(super) fn queued_end(&self) -> u64 {
        self.sent_total + (self.tail - self.head) as u64
    }

    /// Bytes that can be appended at the tail as it stands.
    pub(super) fn room(&self) -> usize {
        self.buf.len() - self.tail
    }

    /// Moves the pending bytes to the front, unless they are pinned.
    pub(super) fn compact(&mut self) {
        if self.head > 0 && !self.pinned {
            self.buf.copy_within(self.head..self.tail, 0);
            self.tail -= self.head;
            self.head = 0;
        }
    }

    /// The space at the tail, for a writer that then reports what it wrote with
    /// [`Transmit::commit`].
    pub(super) fn spare(&mut self) -> &mut [u8] {
        &mut self.buf[self.tail..]
    }

    pub(super) fn commit(&mut self, n: usize) {
        debug_assert!(self.tail + n <= self.buf.len());
        self.tail += n;
    }

    /// Appends what `w` writes at the tail; false when it does not fit.
    pub(super) fn append(&mut self, w: impl FnOnce(&mut [u8]) -> Option<usize>) -> bool {
        match w(&mut self.buf[self.tail..]) {
            Some(n) => {
                self.tail += n;
                true
            }
            None => false,
        }
    }

    /// Appends a control frame, compacting first when the tail is short of room.
    pub(super) fn append_control(&mut self, w: impl FnOnce(&mut [u8]) -> Option<usize>) -> bool {
        if self.room() < CONTROL_FRAME_ROOM_BYTES {
            self.compact();
        }
        self.append(w)
    }
}
