//! Where a connection's byte buffers live: the transmit buffer, the receive buffer for a frame
//! split across reads, the header block in, and each stream's request and response bodies.
//! They are sized for the worst case (a full transmit window of frames, the largest frame the
//! peer may send, the largest bundle) but a connection carrying one bundle at a time uses the
//! first pages of its transmit buffer (a request is encoded straight into it), its request body
//! buffer only when a window holds a body back, and its receive buffer only when a frame
//! arrives split. Zeroed heap memory is written at allocation (glibc's `calloc` clears memory a
//! thread's arena already holds), so thousands of connections each allocating their own would
//! hold all of it resident. A thread that will run many connections instead reserves one zeroed
//! slab for all of them at startup ([`reserve`]): one allocation large enough to be mapped
//! fresh, whose pages the kernel backs only when a connection first writes them.
//!
//! The pages every call writes (the start of the transmit buffer, the header block in, a
//! response body's usual first kilobyte) are touched when the connection is made ([`touched`]),
//! so a bundle's path takes no page fault and a connection's memory does not grow with its
//! first calls; the rest of the worst-case room (a status query's large answer) stays
//! untouched until one comes.
//!
//! This is NOT an allocator: a slab is carved front to back, never reused, and freed when its
//! last buffer and its thread are gone. A connection made where no slab was reserved (or once a
//! slab is used up) allocates its buffers itself, as before.

use std::alloc::{Layout, alloc_zeroed, dealloc, handle_alloc_error};
use std::cell::RefCell;
use std::ptr::NonNull;
use std::sync::Arc;

/// One zeroed allocation that buffers are carved from.
struct Slab {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: the slab is plain bytes; each buffer carved from it is a disjoint range that only its
// one `Buffer` touches.
unsafe impl Send for Slab {}
unsafe impl Sync for Slab {}

impl Drop for Slab {
    fn drop(&mut self) {
        // SAFETY: allocated in `reserve` with this layout; no buffer refers to it any more.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

/// Heap bytes of a slab's shared record (besides the slab itself): one per thread that
/// reserved one.
pub const SLAB_RECORD_BYTES: usize = 2 * size_of::<usize>() + size_of::<Slab>();

/// The page size buffers are laid out for (the smallest; on larger pages a run of touched
/// bytes still spans as few pages as it can).
pub const PAGE_BYTES: usize = 4096;

/// What a slab holds beyond the bytes reserved for buffers: room to start the first run of
/// touched pages on a page ([`align`]).
pub const SLAB_SLACK_BYTES: usize = PAGE_BYTES;

/// This thread's slab and how much of it is handed out.
struct Carver {
    slab: Arc<Slab>,
    next: usize,
}

thread_local! {
    static CARVER: RefCell<Option<Carver>> = const { RefCell::new(None) };
}

/// Reserves `bytes` of zeroed memory for the buffers of the connections this thread will make,
/// and [`SLAB_SLACK_BYTES`] more (replacing any earlier reservation; buffers already carved
/// keep their slab alive). One allocation, at startup.
pub fn reserve(bytes: usize) {
    let carver = (bytes > 0).then(|| {
        // Byte alignment, so the system allocator takes the `calloc` path (a stricter one is
        // allocated and then cleared byte by byte, which would make the whole slab resident).
        let layout = Layout::from_size_align(bytes + SLAB_SLACK_BYTES, 1).expect("slab layout");
        // SAFETY: a non-zero size.
        let ptr = NonNull::new(unsafe { alloc_zeroed(layout) })
            .unwrap_or_else(|| handle_alloc_error(layout));
        Carver {
            slab: Arc::new(Slab { ptr, layout }),
            next: 0,
        }
    });
    CARVER.with(|c| *c.borrow_mut() = carver);
}

/// Skips slab bytes so that the buffer carved `offset` bytes from here begins on a page: a
/// connection's touched buffers then take whole pages rather than straddling one more. With
/// connections of a size in whole pages ([`crate::h2::Connection::slab_bytes_per_connection`]),
/// only the first connection skips any, at most [`SLAB_SLACK_BYTES`]. Nothing without a slab.
pub(super) fn align(offset: usize) {
    CARVER.with(|c| {
        if let Some(c) = c.borrow_mut().as_mut() {
            let at = c.slab.ptr.as_ptr() as usize + c.next + offset;
            c.next += (PAGE_BYTES - at % PAGE_BYTES) % PAGE_BYTES;
        }
    });
}

/// `len` zeroed bytes: from this thread's slab while it has room, else allocated.
pub(super) fn zeroed(len: usize) -> Buffer {
    let carved = CARVER.with(|c| {
        let mut c = c.borrow_mut();
        let c = c.as_mut()?;
        let end = c.next.checked_add(len)?;
        if len == 0 || end > c.slab.layout.size() {
            return None;
        }
        // SAFETY: `next..end` is inside the slab and handed out once.
        let ptr = unsafe { NonNull::new_unchecked(c.slab.ptr.as_ptr().add(c.next)) };
        c.next = end;
        Some(Buffer {
            ptr,
            len,
            slab: Some(c.slab.clone()),
        })
    });
    carved.unwrap_or_else(|| Buffer::boxed(vec![0; len].into_boxed_slice()))
}

/// `len` zeroed bytes as [`zeroed`] gives them, the pages of the first `touch` of them made
/// resident now: what every call on the connection writes, so a call never takes a page fault
/// (the rest, for worst cases, stays untouched until one comes).
pub(super) fn touched(len: usize, touch: usize) -> Buffer {
    const PAGE: usize = PAGE_BYTES;
    let mut b = zeroed(len);
    let end = touch.min(len);
    if end > 0 {
        let base = b.as_mut_ptr();
        let mut at = 0;
        while at < end {
            // SAFETY: `at < len`; a volatile write of the zero already there, which the
            // optimiser cannot drop.
            unsafe { std::ptr::write_volatile(base.add(at), 0) };
            at += PAGE - (base as usize + at) % PAGE;
        }
    }
    b
}

/// A fixed-size byte buffer: a range of a thread's slab, or a box of its own.
pub(super) struct Buffer {
    ptr: NonNull<u8>,
    len: usize,
    /// The slab `ptr` is in; `None`: `ptr` is a `Box<[u8]>` of `len` bytes this buffer owns.
    slab: Option<Arc<Slab>>,
}

// SAFETY: a buffer is the only user of its bytes (a disjoint slab range or its own box).
unsafe impl Send for Buffer {}
unsafe impl Sync for Buffer {}

impl Buffer {
    fn boxed(b: Box<[u8]>) -> Buffer {
        let len = b.len();
        // SAFETY: `Box::into_raw` never returns null.
        let ptr = unsafe { NonNull::new_unchecked(Box::into_raw(b).cast::<u8>()) };
        Buffer {
            ptr,
            len,
            slab: None,
        }
    }
}

impl Default for Buffer {
    fn default() -> Buffer {
        Buffer::boxed(Box::default())
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if self.slab.is_none() {
            // SAFETY: made from a `Box<[u8]>` of `len` bytes in `boxed`, dropped once here.
            drop(unsafe {
                Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                    self.ptr.as_ptr(),
                    self.len,
                ))
            });
        }
    }
}

impl std::ops::Deref for Buffer {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` is valid for `len` bytes for as long as this buffer (it owns the box or
        // keeps the slab alive) and nothing else reaches them.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for Buffer {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` makes this the only access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pages of this thread's slab the kernel holds resident now (`mincore`).
    fn slab_resident_pages() -> usize {
        CARVER.with(|c| {
            let c = c.borrow();
            let c = c.as_ref().expect("a slab");
            let start = c.slab.ptr.as_ptr() as usize / PAGE_BYTES * PAGE_BYTES;
            let end = (c.slab.ptr.as_ptr() as usize + c.slab.layout.size()).div_ceil(PAGE_BYTES)
                * PAGE_BYTES;
            let mut vec = vec![0u8; (end - start) / PAGE_BYTES];
            // SAFETY: [start, end) covers the pages of the live slab; a byte per page.
            let rc = unsafe { libc::mincore(start as *mut _, end - start, vec.as_mut_ptr()) };
            assert_eq!(rc, 0);
            vec.iter().filter(|&&b| b & 1 == 1).count()
        })
    }

    /// What a relay's pool of pairs holds resident: per connection, the pages every call
    /// writes (the header block in, an answer's usual kilobyte, the head of the transmit
    /// buffer), three pages; the room for a status query's answer only once one comes.
    #[test]
    fn a_relay_connection_holds_three_pages_until_a_large_answer_comes() {
        use crate::h2::conn::Connection;
        std::thread::spawn(|| {
            let cfg = crate::relay::upstream_h2_config();
            let n = 8;
            reserve(n * Connection::slab_bytes_per_connection(&cfg));
            let before = slab_resident_pages();
            let conns: Vec<Connection> = (0..n).map(|_| Connection::new(cfg.clone(), 0)).collect();
            assert_eq!(slab_resident_pages() - before, 3 * n);
            drop(conns);
            reserve(0);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn buffers_come_from_the_slab_until_it_is_used_up_then_from_the_heap() {
        std::thread::spawn(|| {
            reserve(256);
            let mut a = zeroed(100);
            let b = zeroed(100);
            assert!(a.slab.is_some() && b.slab.is_some());
            assert!(a.iter().chain(b.iter()).all(|&x| x == 0));
            a[99] = 7;
            assert_eq!(b[0], 0, "buffers do not overlap");
            let c = zeroed(56 + SLAB_SLACK_BYTES + 1);
            assert!(c.slab.is_none(), "past the slab's end: allocated");
            assert_eq!(c.len(), 56 + SLAB_SLACK_BYTES + 1);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn align_starts_the_buffer_carved_that_many_bytes_later_on_a_page() {
        std::thread::spawn(|| {
            reserve(3 * PAGE_BYTES);
            let _skew = zeroed(100);
            align(300);
            let before = zeroed(300);
            let run = zeroed(10);
            assert_eq!(run.as_ptr() as usize % PAGE_BYTES, 0);
            assert_eq!(before.as_ptr() as usize + 300, run.as_ptr() as usize);
            align(0);
            let next = zeroed(10);
            assert_eq!(
                next.as_ptr() as usize % PAGE_BYTES,
                0,
                "aligned, past the run"
            );
            assert!(next.slab.is_some());
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_thread_without_a_slab_allocates_each_buffer() {
        std::thread::spawn(|| {
            let b = zeroed(64);
            assert!(b.slab.is_none());
            assert_eq!(&b[..], &[0u8; 64][..]);
        })
        .join()
        .unwrap();
    }
}
