//! The request arena: a fixed number of bundle slots allocated at startup. Holding a slot is
//! being admitted, so the slot count is the in-flight cap: when every slot is taken,
//! [`Arena::acquire`] fails at once and the intake answers 429 instead of growing memory
//! (seed 000's relay reached 75 GB without such a cap).
//!
//! A slot holds one bundle: its metadata and its complete upstream DATA frame
//! ([`FRAME_BYTES_MAX`], computed below from the protobuf encoding rules), which carries the
//! transactions' bytes. The decoder writes the transactions (up to [`BUNDLE_TXS_MAX`] of at
//! most [`PACKET_DATA_SIZE`] bytes each) into one decode room per arena, [`TX_BYTES_PER_SLOT`]
//! bytes, from which the frame is encoded at once: nothing reads them after that, so a room per
//! slot would double every slot for bytes held only during one request's handling. Slot memory
//! is two flat arrays (metadata, frame bytes), so the cold bulk bytes never share cache lines
//! with the hot metadata.
//!
//! Handles carry a generation: releasing a slot bumps it, so a handle kept past its release
//! (double release, use after release) is rejected with [`StaleHandle`] instead of touching the
//! slot's next bundle. Acquire and release pop and push an intrusive LIFO free list: O(1), no
//! allocation, and the most recently freed (cache-warm) slot is reused first.
//!
//! A slot can be lent ([`Arena::lend`]): held by its arena, written by another thread (which
//! decodes a bundle straight into it) until that thread hands it back. The bundle's bytes and
//! metadata live in cells of their own, apart from the arena's bookkeeping, and the owner's
//! accessors touch one slot's cells at a time; so a borrower writing one slot never aliases
//! what the owner reads or writes of another.

use std::cell::UnsafeCell;
use std::fmt;

use crate::clock::Instant;
use crate::wire::{BUNDLE_TXS_MAX, PACKET_DATA_SIZE};

/// Bytes of a protobuf varint holding `v`.
pub const fn varint_len(v: u64) -> usize {
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Bytes of a length-delimited field with a one-byte tag (field numbers 1..=15).
const fn len_field(payload: usize) -> usize {
    1 + varint_len(payload as u64) + payload
}

/// `packet.Meta` as the relay writes it (as Jito's clients do): only `size = data.len()`.
pub const META_BYTES_MAX: usize = 1 + varint_len(PACKET_DATA_SIZE as u64);
/// `packet.Packet { data = 1; meta = 2 }` for a max-size transaction.
pub const PACKET_BYTES_MAX: usize = len_field(PACKET_DATA_SIZE) + len_field(META_BYTES_MAX);
/// `google.protobuf.Timestamp { int64 seconds = 1; int32 nanos = 2 }` at its widest: negative
/// values are 10-byte varints for both fields.
const TIMESTAMP_BYTES_MAX: usize = (1 + 10) + (1 + 10);
/// `shared.Header { Timestamp ts = 1 }`. The relay leaves the header empty, as Jito's clients
/// do; the bound still admits a fully populated one so a later choice cannot overflow a slot.
pub const HEADER_BYTES_MAX: usize = len_field(TIMESTAMP_BYTES_MAX);
/// `bundle.Bundle { header = 2; repeated packets = 3 }` with five max-size packets.
pub const BUNDLE_BYTES_MAX: usize =
    len_field(HEADER_BYTES_MAX) + BUNDLE_TXS_MAX * len_field(PACKET_BYTES_MAX);
/// `searcher.SendBundleRequest { bundle = 1 }`: the gRPC message.
pub const SEND_BUNDLE_BYTES_MAX: usize = len_field(BUNDLE_BYTES_MAX);
/// gRPC length prefix: 1 byte compressed flag + 4 bytes big-endian length.
pub const GRPC_PREFIX_BYTES: usize = 5;
/// HTTP/2 frame header (RFC 9113 §4.1): 24-bit length, type, flags, 31-bit stream id.
pub const H2_FRAME_HEADER_BYTES: usize = 9;
/// HTTP/2's default and minimum SETTINGS_MAX_FRAME_SIZE; the payload must fit one DATA frame.
pub const H2_MAX_FRAME_PAYLOAD_DEFAULT: usize = 16_384;
/// The whole upstream DATA frame of one bundle: frame header, gRPC prefix, SendBundleRequest.
pub const FRAME_BYTES_MAX: usize =
    H2_FRAME_HEADER_BYTES + GRPC_PREFIX_BYTES + SEND_BUNDLE_BYTES_MAX;
const _: () = assert!(
    GRPC_PREFIX_BYTES + SEND_BUNDLE_BYTES_MAX <= H2_MAX_FRAME_PAYLOAD_DEFAULT,
    "a bundle must fit one DATA frame at the default frame size"
);
const _: () = assert!(FRAME_BYTES_MAX <= u16::MAX as usize);
const _: () = assert!(
    crate::jsonrpc::send_transaction_len(PACKET_DATA_SIZE) <= FRAME_BYTES_MAX,
    "a forwarded sendTransaction's request fits the frame area"
);

/// Further regions one bundle may be fanned out to besides its own (`fan_out` ≤ 4).
pub const FAN_EXTRA_MAX: usize = 3;

/// Bytes of an arena's decode room: each transaction of the bundle being decoded has its own
/// fixed 1232-byte region (one room per arena, not per slot).
pub const TX_BYTES_PER_SLOT: usize = BUNDLE_TXS_MAX * PACKET_DATA_SIZE;
/// Bytes of one slot's metadata record.
pub const SLOT_META_BYTES: usize =
    std::mem::size_of::<BundleMeta>() + std::mem::size_of::<SlotAlloc>();
/// Bytes one slot costs in all.
pub const SLOT_BYTES: usize = SLOT_META_BYTES + FRAME_BYTES_MAX;
/// Most slots one arena may hold: indexes are `u32` and `u32::MAX` ends the free list.
pub const MAX_SLOTS: u32 = u32::MAX - 1;

const NIL: u32 = u32::MAX;

/// A reference to one admitted bundle. Copyable; valid until the slot is released.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SlotHandle {
    pub index: u32,
    pub generation: u32,
}

/// Every slot is taken: the in-flight cap is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArenaFull {
    pub capacity: u32,
}

impl fmt::Display for ArenaFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "all {} request slots are in flight", self.capacity)
    }
}

impl std::error::Error for ArenaFull {}

/// The handle's slot has been released since the handle was issued (or it never existed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StaleHandle {
    pub handle: SlotHandle,
}

impl fmt::Display for StaleHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "stale arena handle: slot {} generation {} is no longer held",
            self.handle.index, self.handle.generation
        )
    }
}

impl std::error::Error for StaleHandle {}

/// What the relay knows about a bundle besides its bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BundleMeta {
    pub tx_count: u8,
    /// Length of each transaction, in its fixed region of the decode room while it is decoded
    /// (its bytes are in the frame after that).
    pub tx_len: [u16; BUNDLE_TXS_MAX],
    /// SHA-256 bundle id (Jito's, hex-encoded only when answering).
    pub bundle_id: [u8; 32],
    pub region: u8,
    /// The lane it waits in: its region's pairs of its tenant's egress group (the limiter's
    /// lane number).
    pub lane: u8,
    pub admitted_at: Instant,
    /// Sends tried so far, per copy: `[0]` the one in `lane`, `[1 + i]` the one in
    /// `fan_lanes[i]`. Each copy has tries of its own, so a region that keeps refusing its
    /// copy unprocessed spends none of another region's.
    pub attempts: [u8; 1 + FAN_EXTRA_MAX],
    /// A copy that engines refused unprocessed more than once is not sent again before this
    /// many ms after `admitted_at` (the dispatcher's back-off; 0: never held). One for all of
    /// a fanned-out bundle's copies (the meta keeps its 80 bytes): each copy refused twice or
    /// more waits for the later hold; a copy refused once goes again at once.
    pub held_ms: u16,
    /// Bytes of the encoded frame in the frame area (0: not encoded yet).
    pub frame_len: u16,
    /// Copies of the bundle queued or in flight (a fanned-out bundle waits in several lanes at
    /// once); it ends when the last one does. 1 for a bundle sent to one region.
    pub copies: u8,
    /// The further lanes a fanned-out bundle is queued in at admission, `fan_lanes[..fan_extra]`.
    pub fan_lanes: [u8; FAN_EXTRA_MAX],
    pub fan_extra: u8,
    /// An engine took one of its copies (it ends delivered), or one was lost after being sent
    /// whole (failed, unless another was delivered).
    pub fan_delivered: bool,
    pub fan_failed: bool,
    /// The frame is a JSON-RPC `sendTransaction` body for the engine's HTTP endpoint (a
    /// transaction sent without `bundleOnly=true`), not a gRPC SendBundle message.
    pub json: bool,
    /// It was admitted as a rotating-port bundle (the rotating port, not a region named in its
    /// path): any of its tenant's regions may send it, not only the one it was routed to (a
    /// region that falls behind passes it on).
    pub rotating: bool,
    /// The tenant's slot in the shared tenant state (0: the default tenant).
    pub tenant: u16,
    /// Its serial in the sending thread's record of recent bundles (`journal`), set when it
    /// is queued there.
    pub record: u64,
}

impl BundleMeta {
    /// Which copy waits in `lane`, as `attempts` counts them: 0 for its own lane, `1 + i` for
    /// `fan_lanes[i]`.
    pub fn copy_in(&self, lane: u8) -> usize {
        self.fan_lanes[..usize::from(self.fan_extra)]
            .iter()
            .position(|&l| l == lane && l != self.lane)
            .map_or(0, |i| i + 1)
    }
}

/// The arena's bookkeeping of one slot (never touched by a borrower).
#[derive(Clone, Copy, Debug)]
struct SlotAlloc {
    generation: u32,
    /// Next free slot while free; `NIL` at the end of the list.
    next_free: u32,
    in_use: bool,
}

/// Read access to one held slot.
pub struct SlotRef<'a> {
    pub meta: &'a BundleMeta,
    pub frame: &'a [u8],
}

impl<'a> SlotRef<'a> {
    /// The encoded frame (`frame_len` bytes).
    pub fn encoded_frame(&self) -> &'a [u8] {
        &self.frame[..self.meta.frame_len as usize]
    }
}

/// Write access to one held slot, with the decode room of the thread writing it
/// ([`TX_BYTES_PER_SLOT`] bytes; empty when the slot is written without decoding into it:
/// [`LentSlot::slot_mut`]).
pub struct SlotMut<'a> {
    pub meta: &'a mut BundleMeta,
    txs: &'a mut [u8],
    /// The frame area, [`FRAME_BYTES_MAX`] bytes.
    pub frame: &'a mut [u8],
}

impl SlotMut<'_> {
    /// Makes this slot a copy of `src`: its meta and encoded frame (a bundle moving to
    /// another thread's arena, whose slots are laid out the same).
    pub fn copy_from(&mut self, src: &SlotRef<'_>) {
        *self.meta = *src.meta;
        let n = src.meta.frame_len as usize;
        self.frame[..n].copy_from_slice(&src.frame[..n]);
    }

    /// The fixed [`PACKET_DATA_SIZE`]-byte region of transaction `i` in the decode room.
    pub fn tx_region(&mut self, i: usize) -> &mut [u8] {
        assert!(
            i < BUNDLE_TXS_MAX,
            "a bundle holds at most {BUNDLE_TXS_MAX} transactions"
        );
        let start = i * PACKET_DATA_SIZE;
        &mut self.txs[start..start + PACKET_DATA_SIZE]
    }

    /// The transactions recorded in `meta` and the frame area at once, so the upstream message
    /// can be encoded from the one into the other.
    pub fn txs_and_frame(
        &mut self,
    ) -> (impl ExactSizeIterator<Item = &[u8]> + Clone + '_, &mut [u8]) {
        let txs: &[u8] = self.txs;
        let lens = self.meta.tx_len;
        let iter = (0..self.meta.tx_count as usize).map(move |i| {
            let start = i * PACKET_DATA_SIZE;
            &txs[start..start + lens[i] as usize]
        });
        (iter, &mut *self.frame)
    }

    /// Transaction `i` as recorded in `meta`, in the decode room (until the thread decodes
    /// its next bundle).
    pub fn tx(&self, i: usize) -> &[u8] {
        assert!(
            i < self.meta.tx_count as usize,
            "tx {i} of {}",
            self.meta.tx_count
        );
        let start = i * PACKET_DATA_SIZE;
        &self.txs[start..start + self.meta.tx_len[i] as usize]
    }
}

/// A slot one arena lent to another thread: where its metadata and frame area are. The borrower writes them through [`LentSlot::slot_mut`] and then hands the slot (its
/// handle) back to the owner over a ring, which publishes the writes with it.
#[derive(Clone, Copy, Debug)]
pub struct LentSlot {
    pub handle: SlotHandle,
    meta: *mut BundleMeta,
    frame: *mut u8,
}

// SAFETY: the pointers reach one slot's cells, which only the one thread holding the
// `LentSlot` touches until it hands the slot back.
unsafe impl Send for LentSlot {}

impl LentSlot {
    /// Write access to the lent slot's metadata and frame, without a decode room (for a
    /// bundle copied in, or metadata alone).
    ///
    /// # Safety
    /// The caller is the one borrower of this slot and has not handed it back; the owning
    /// arena is alive (arenas live for the relay's whole run).
    pub unsafe fn slot_mut(&mut self) -> SlotMut<'_> {
        // SAFETY: as the contract says.
        unsafe { self.decode_into(&mut []) }
    }

    /// Write access to the lent slot, as [`Arena::get_mut`] gives its owner, with `room` (the
    /// borrowing thread's own arena's, [`Arena::decode_room`]) to decode the bundle in.
    ///
    /// # Safety
    /// As for [`LentSlot::slot_mut`].
    pub unsafe fn decode_into<'a>(&'a mut self, room: &'a mut [u8]) -> SlotMut<'a> {
        // SAFETY: by the contract above nothing else touches these cells now.
        unsafe {
            SlotMut {
                meta: &mut *self.meta,
                txs: room,
                frame: std::slice::from_raw_parts_mut(self.frame, FRAME_BYTES_MAX),
            }
        }
    }
}

/// A byte buffer as cells, without copying it.
fn cells(buf: Box<[u8]>) -> Box<[UnsafeCell<u8>]> {
    let len = buf.len();
    let ptr = Box::into_raw(buf) as *mut UnsafeCell<u8>;
    // SAFETY: `UnsafeCell<u8>` has `u8`'s layout; the allocation is the box's, same length.
    unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)) }
}

/// Touches every page of `buf` so the kernel backs it now: zeroed allocations are mapped
/// lazily, and an arena that only faulted its pages in as it filled would grow the process
/// under load (and take page faults on the request path) instead of holding its budget from
/// the start.
pub fn prefault(buf: &mut [u8]) {
    const PAGE: usize = 4096;
    for i in (0..buf.len()).step_by(PAGE) {
        // SAFETY: `i` is in bounds; a volatile write the optimiser cannot drop.
        unsafe { std::ptr::write_volatile(buf.as_mut_ptr().add(i), 0) };
    }
}

/// The fixed pool of request slots. One per reactor thread; not shared.
pub struct Arena {
    alloc: Box<[SlotAlloc]>,
    /// Each slot's bundle metadata, transaction bytes and frame area, in cells: a lent slot's
    /// are written by its borrower while the owner works on other slots.
    bundles: Box<[UnsafeCell<BundleMeta>]>,
    frames: Box<[UnsafeCell<u8>]>,
    /// Where this thread decodes a bundle's transactions before encoding its frame
    /// ([`TX_BYTES_PER_SLOT`] bytes), whichever arena's slot the bundle is in.
    room: Box<[u8]>,
    free_head: u32,
    in_use: u32,
}

impl Arena {
    /// Allocates `slots` slots and touches every page, so the arena's memory is resident from the
    /// start and stays flat however full it gets.
    pub fn new(slots: u32) -> Arena {
        assert!(
            (1..=MAX_SLOTS).contains(&slots),
            "arena needs 1 to {MAX_SLOTS} slots"
        );
        let n = slots as usize;
        let alloc = (0..slots)
            .map(|i| SlotAlloc {
                generation: 0,
                next_free: if i + 1 < slots { i + 1 } else { NIL },
                in_use: false,
            })
            .collect();
        let bundles = (0..n)
            .map(|_| UnsafeCell::new(BundleMeta::default()))
            .collect();
        let mut frames = vec![0u8; n * FRAME_BYTES_MAX].into_boxed_slice();
        prefault(&mut frames);
        Arena {
            alloc,
            bundles,
            frames: cells(frames),
            room: vec![0u8; TX_BYTES_PER_SLOT].into_boxed_slice(),
            free_head: 0,
            in_use: 0,
        }
    }

    /// Bytes this arena holds (the budget's arena terms must add up to this).
    pub fn allocated_bytes(&self) -> usize {
        self.alloc.len() * SLOT_META_BYTES + self.frames.len() + self.room.len()
    }

    pub fn capacity(&self) -> u32 {
        self.alloc.len() as u32
    }

    pub fn in_use(&self) -> u32 {
        self.in_use
    }

    pub fn available(&self) -> u32 {
        self.capacity() - self.in_use
    }

    /// Takes a free slot for a bundle admitted at `now`, with fresh metadata; fails at once
    /// when every slot is held.
    #[inline]
    pub fn acquire(&mut self, now: Instant) -> Result<SlotHandle, ArenaFull> {
        let index = self.free_head;
        if index == NIL {
            return Err(ArenaFull {
                capacity: self.capacity(),
            });
        }
        let slot = &mut self.alloc[index as usize];
        debug_assert!(!slot.in_use);
        self.free_head = slot.next_free;
        slot.next_free = NIL;
        slot.in_use = true;
        let generation = slot.generation;
        *self.bundle_mut(index as usize) = BundleMeta {
            admitted_at: now,
            ..BundleMeta::default()
        };
        self.in_use += 1;
        Ok(SlotHandle { index, generation })
    }

    /// Takes a free slot to lend to another thread, which decodes a bundle into it through
    /// the returned [`LentSlot`] and hands it back; the arena neither reads nor writes the
    /// slot's bundle meanwhile (it stays held, its handle valid). `None` when every slot is
    /// held.
    pub fn lend(&mut self, now: Instant) -> Option<LentSlot> {
        let handle = self.acquire(now).ok()?;
        let i = handle.index as usize;
        Some(LentSlot {
            handle,
            meta: self.bundles[i].get(),
            frame: self.cell_ptr(&self.frames, i * FRAME_BYTES_MAX),
        })
    }

    /// Returns the slot to the pool; the handle (and every copy of it) becomes stale.
    #[inline]
    pub fn release(&mut self, handle: SlotHandle) -> Result<(), StaleHandle> {
        let slot = self.held(handle)?;
        let slot = &mut self.alloc[slot];
        slot.in_use = false;
        slot.generation = slot.generation.wrapping_add(1);
        slot.next_free = self.free_head;
        self.free_head = handle.index;
        self.in_use -= 1;
        Ok(())
    }

    pub fn get(&self, handle: SlotHandle) -> Result<SlotRef<'_>, StaleHandle> {
        let i = self.held(handle)?;
        // SAFETY: slot `i` is held and not lent out (a lent slot's handle is the borrower's
        // until it is handed back), so nothing writes its cells while this borrow lives.
        unsafe {
            Ok(SlotRef {
                meta: &*self.bundles[i].get(),
                frame: std::slice::from_raw_parts(
                    self.cell_ptr(&self.frames, i * FRAME_BYTES_MAX),
                    FRAME_BYTES_MAX,
                ),
            })
        }
    }

    pub fn get_mut(&mut self, handle: SlotHandle) -> Result<SlotMut<'_>, StaleHandle> {
        let i = self.held(handle)?;
        let frame = self.cell_ptr(&self.frames, i * FRAME_BYTES_MAX);
        // SAFETY: as in `get`, and `&mut self` makes this the only access the owner has.
        unsafe {
            Ok(SlotMut {
                meta: &mut *self.bundles[i].get(),
                txs: &mut self.room,
                frame: std::slice::from_raw_parts_mut(frame, FRAME_BYTES_MAX),
            })
        }
    }

    /// This thread's decode room, for a slot another arena lent it ([`LentSlot::decode_into`]).
    pub fn decode_room(&mut self) -> &mut [u8] {
        &mut self.room
    }

    fn bundle_mut(&mut self, i: usize) -> &mut BundleMeta {
        // SAFETY: the owner's only access to slot `i`'s metadata (`&mut self`), for a slot it
        // is just taking or holds.
        unsafe { &mut *self.bundles[i].get() }
    }

    /// A pointer to byte `offset` of a cell array, for one slot's region of it.
    fn cell_ptr(&self, cells: &[UnsafeCell<u8>], offset: usize) -> *mut u8 {
        cells[offset].get()
    }

    #[inline]
    fn held(&self, handle: SlotHandle) -> Result<usize, StaleHandle> {
        match self.alloc.get(handle.index as usize) {
            Some(slot) if slot.in_use && slot.generation == handle.generation => {
                Ok(handle.index as usize)
            }
            _ => Err(StaleHandle { handle }),
        }
    }

    /// Panics unless the free list and the held slots partition the arena exactly and the
    /// in-use count matches. O(slots); for tests.
    pub fn check_invariants(&self) {
        let mut on_free_list = vec![false; self.alloc.len()];
        let mut free = 0u32;
        let mut i = self.free_head;
        while i != NIL {
            let slot = &self.alloc[i as usize];
            assert!(!slot.in_use, "slot {i} is on the free list while held");
            assert!(
                !on_free_list[i as usize],
                "slot {i} is on the free list twice"
            );
            on_free_list[i as usize] = true;
            free += 1;
            i = slot.next_free;
        }
        let held = self.alloc.iter().filter(|s| s.in_use).count() as u32;
        assert_eq!(held, self.in_use, "in-use count drifted");
        assert_eq!(
            held + free,
            self.capacity(),
            "a free slot is missing from the free list"
        );
    }
}
