//! A bounded single-producer single-consumer ring of `Copy` messages: one thread pushes, one
//! other thread pops, neither waits nor locks. Allocated once at its capacity (a power of two).
//!
//! The producer owns `tail`, the consumer `head`; each reads the other's with `Acquire` and
//! publishes its own with `Release`, so a message's bytes are visible before its slot is. Each
//! side also keeps a cached copy of the other's index, so the common push or pop touches the
//! shared line of the other side only when the ring looks full (or empty): a burst of messages
//! costs one cross-core transfer of that line, not one per message.
//!
//! It is NOT a multi-producer queue: exactly one thread may call [`Ring::push`] and exactly one
//! [`Ring::pop`] over the ring's life (the mesh hands each side to one reactor thread).

use std::cell::{Cell, UnsafeCell};
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU32, Ordering};

/// The producer's or the consumer's index with its cache of the other's, on lines of its own.
#[repr(align(128))]
struct Side {
    /// This side's position (messages pushed, or popped), wrapping.
    own: AtomicU32,
    /// The other side's position as this side last read it.
    seen: Cell<u32>,
}

/// See the module docs.
pub struct Ring<T: Copy> {
    producer: Side,
    consumer: Side,
    mask: u32,
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
}

// SAFETY: a slot is written by the producer before `tail` is released past it and read by the
// consumer only after acquiring that `tail`, and overwritten only after the consumer released
// `head` past it: no slot is ever accessed by both at once. Each `Cell` is touched by its side's
// one thread only (the single-producer single-consumer contract of the module docs).
unsafe impl<T: Copy + Send> Sync for Ring<T> {}
// SAFETY: as above; the messages are plain `Copy` data.
unsafe impl<T: Copy + Send> Send for Ring<T> {}

impl<T: Copy> Ring<T> {
    /// A ring holding at most `capacity` messages (rounded up to a power of two, at least 2).
    pub fn new(capacity: usize) -> Ring<T> {
        let capacity = capacity.max(2).next_power_of_two();
        assert!(capacity <= 1 << 30, "ring capacity {capacity}");
        Ring {
            producer: Side {
                own: AtomicU32::new(0),
                seen: Cell::new(0),
            },
            consumer: Side {
                own: AtomicU32::new(0),
                seen: Cell::new(0),
            },
            mask: capacity as u32 - 1,
            slots: (0..capacity)
                .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
                .collect(),
        }
    }

    /// Bytes a ring of `capacity` messages holds on the heap (the budget counts it).
    pub const fn allocation_bytes(capacity: usize) -> usize {
        let capacity = if capacity < 2 {
            2
        } else {
            capacity.next_power_of_two()
        };
        capacity * std::mem::size_of::<T>()
    }

    pub fn capacity(&self) -> usize {
        self.mask as usize + 1
    }

    /// Adds `msg` at the tail, or gives it back when the ring is full. Producer only.
    #[inline]
    pub fn push(&self, msg: T) -> Result<(), T> {
        let tail = self.producer.own.load(Ordering::Relaxed);
        if tail.wrapping_sub(self.producer.seen.get()) > self.mask {
            self.producer
                .seen
                .set(self.consumer.own.load(Ordering::Acquire));
            if tail.wrapping_sub(self.producer.seen.get()) > self.mask {
                return Err(msg);
            }
        }
        // SAFETY: the slot at `tail` is free (the consumer is past it, checked above) and only
        // this producer writes it.
        unsafe { (*self.slots[(tail & self.mask) as usize].get()).write(msg) };
        self.producer
            .own
            .store(tail.wrapping_add(1), Ordering::Release);
        Ok(())
    }

    /// Takes the message at the head, if there is one. Consumer only.
    #[inline]
    pub fn pop(&self) -> Option<T> {
        let head = self.consumer.own.load(Ordering::Relaxed);
        if head == self.consumer.seen.get() {
            self.consumer
                .seen
                .set(self.producer.own.load(Ordering::Acquire));
            if head == self.consumer.seen.get() {
                return None;
            }
        }
        // SAFETY: the producer released `tail` past `head` (read above with Acquire), so the
        // slot holds a message written before that release; only this consumer reads it.
        let msg = unsafe { (*self.slots[(head & self.mask) as usize].get()).assume_init() };
        self.consumer
            .own
            .store(head.wrapping_add(1), Ordering::Release);
        Some(msg)
    }

    /// Whether a message waits, as any thread sees it now (the consumer uses it to decide it may
    /// sleep; the answer can be stale by the time it returns).
    pub fn is_empty(&self) -> bool {
        self.producer.own.load(Ordering::Acquire) == self.consumer.own.load(Ordering::Acquire)
    }

    /// Messages waiting, as any thread sees it now.
    pub fn len(&self) -> usize {
        self.producer
            .own
            .load(Ordering::Acquire)
            .wrapping_sub(self.consumer.own.load(Ordering::Acquire)) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_ring_gives_the_message_back_and_keeps_order() {
        let r: Ring<u32> = Ring::new(4);
        for i in 0..4 {
            r.push(i).unwrap();
        }
        assert_eq!(r.push(9), Err(9));
        assert_eq!(r.len(), 4);
        for i in 0..4 {
            assert_eq!(r.pop(), Some(i));
        }
        assert_eq!(r.pop(), None);
        assert!(r.is_empty());
    }

    #[test]
    fn indexes_wrap_past_u32() {
        let r: Ring<u64> = Ring::new(2);
        r.producer.own.store(u32::MAX - 1, Ordering::Relaxed);
        r.producer.seen.set(u32::MAX - 1);
        r.consumer.own.store(u32::MAX - 1, Ordering::Relaxed);
        r.consumer.seen.set(u32::MAX - 1);
        for round in 0..5u64 {
            r.push(round).unwrap();
            r.push(round + 100).unwrap();
            assert!(r.push(0).is_err());
            assert_eq!(r.pop(), Some(round));
            assert_eq!(r.pop(), Some(round + 100));
        }
    }
}
