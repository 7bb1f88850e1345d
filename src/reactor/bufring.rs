//! A provided-buffer ring: receive buffers the kernel picks from when a multishot recv
//! completes, so thousands of idle sockets hold no buffer each. A thread has two, one per kind
//! of peer, each sized to what that peer sends ([`RecvBuffers`]).

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::IoUring;
use io_uring::types::BufRingEntry;

/// The buffer group client connections' receives take their buffers from.
pub const INTAKE_GROUP: u16 = 0;
/// The buffer group upstream connections' receives take their buffers from.
pub const UPSTREAM_GROUP: u16 = 1;

/// Receive buffers per thread and their sizes, one provided ring for client connections and one
/// for upstream connections; idle sockets hold none. A buffer is held only from its receive's
/// completion to the end of that completion's batch (then given back), so a ring needs room
/// for the receives that land between two batches, not one per socket. Past that a socket's
/// multishot receive ends with `ENOBUFS` and is re-armed once the batch's buffers are back;
/// nothing is lost. Each buffer is resident (the kernel cycles through all of them), so count
/// times size is what a ring costs in RSS.
///
/// Clients: a request of up to five base58 transactions fits one 16 KiB buffer; 64 is a burst
/// of 64 client receives within one iteration (a thread's clients are tens of connections, or
/// a few from a load balancer).
pub const INTAKE_RECV_BUFFERS: u16 = 64;
pub const INTAKE_RECV_BUFFER_BYTES: usize = 16 * 1024;
/// Engines: a gRPC reply (HEADERS, DATA, trailers) is a few hundred bytes, a tip-account list
/// under 1 KiB; a larger read (a TLS handshake, replies queued behind a stall) takes several
/// buffers. 256 is a burst of 256 replies within one iteration across a thread's pairs.
pub const UPSTREAM_RECV_BUFFERS: u16 = 256;
pub const UPSTREAM_RECV_BUFFER_BYTES: usize = 2 * 1024;
/// Bytes of one ring entry (the kernel's `io_uring_buf`), allocated per buffer.
pub const RECV_RING_ENTRY_BYTES: usize = std::mem::size_of::<BufRingEntry>();

/// A registered buffer ring: `count` buffers of `size` bytes, buffer group `group`.
pub struct BufRing {
    ring: *mut BufRingEntry,
    ring_layout: Layout,
    mask: u16,
    tail: u16,
    base: Box<[u8]>,
    size: usize,
}

impl BufRing {
    /// Allocates and registers the ring with every buffer provided. `count` is a power of two
    /// up to 32,768 (the kernel's limit).
    pub fn new(ring: &IoUring, group: u16, count: u16, size: usize) -> std::io::Result<BufRing> {
        assert!(count.is_power_of_two() && count <= 1 << 15);
        let ring_layout =
            Layout::from_size_align(count as usize * std::mem::size_of::<BufRingEntry>(), 4096)
                .expect("ring layout");
        // SAFETY: a non-zero size; checked for null below.
        let ptr = unsafe { alloc_zeroed(ring_layout) }.cast::<BufRingEntry>();
        assert!(!ptr.is_null(), "buffer ring allocation failed");
        let mut base = vec![0u8; count as usize * size].into_boxed_slice();
        crate::arena::prefault(&mut base);
        let mut br = BufRing {
            ring: ptr,
            ring_layout,
            mask: count - 1,
            tail: 0,
            base,
            size,
        };
        // SAFETY: the ring memory is page-aligned, `count` entries, and lives as long as `br`,
        // which is dropped only after the ring stops using it (the reactor unregisters first).
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(ptr as u64, count, group, 0)?
        };
        for bid in 0..count {
            br.push(bid);
        }
        br.publish();
        Ok(br)
    }

    /// Bytes this ring holds.
    #[allow(dead_code)]
    pub fn allocated_bytes(&self) -> usize {
        self.base.len() + self.ring_layout.size()
    }

    /// The first `len` bytes of buffer `bid`, as a completion reported them.
    pub fn data(&self, bid: u16, len: usize) -> &[u8] {
        let start = bid as usize * self.size;
        &self.base[start..start + len.min(self.size)]
    }

    /// Gives buffer `bid` back (visible to the kernel after [`BufRing::publish`]).
    pub fn push(&mut self, bid: u16) {
        let idx = (self.tail & self.mask) as usize;
        // SAFETY: idx < count; the entry is ours until the tail is published.
        let e = unsafe { &mut *self.ring.add(idx) };
        e.set_addr(self.base.as_ptr() as u64 + (bid as u64) * self.size as u64);
        e.set_len(self.size as u32);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Makes every pushed buffer visible to the kernel.
    pub fn publish(&mut self) {
        // The tail shares the first entry's `resv` field (bytes 14..16 of the ring).
        // SAFETY: the ring is at least one entry long and 2-byte aligned at that offset.
        let tail = unsafe { &*(self.ring.cast::<u8>().add(14).cast::<AtomicU16>()) };
        tail.store(self.tail, Ordering::Release);
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ring.cast(), self.ring_layout) };
    }
}

/// A thread's two rings: requests from clients land in large buffers (a whole bundle request
/// in one), answers from engines in small ones (a gRPC reply is a few hundred bytes).
pub struct RecvBuffers {
    pub intake: BufRing,
    pub upstream: BufRing,
}

impl RecvBuffers {
    /// Makes every buffer given back since the last call visible to the kernel.
    pub fn publish(&mut self) {
        self.intake.publish();
        self.upstream.publish();
    }
}
