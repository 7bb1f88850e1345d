//! One thread's side of the mesh: the slots other threads lent it, the bundles it hands them,
//! the ones they hand it, and what it tells them about its own pool. Sans-IO: it touches the
//! shared rings and lines, never a socket or a clock, and allocates only at startup.
//!
//! Where a bundle goes is decided before it is decoded: to whichever thread's pool can send it
//! soonest (its published [`Estimate`], plus the bundles this thread handed it since that was
//! published), kept here when this thread can send it as soon. A bundle for another thread is
//! decoded straight into a slot that thread lent this one, so it is written once, where it
//! will be sent from. Without a credit for the best thread the bundle stays here: a full ring
//! never loses a bundle, it only costs the bundle the better pool.

use std::sync::Arc;

use crate::arena::{Arena, BundleMeta, LentSlot};
use crate::clock::Instant;
use crate::mesh::{Estimate, Handoff, Mesh};

/// See the module docs.
pub struct Peers {
    mesh: Arc<Mesh>,
    me: usize,
    /// Per peer: a slot it lent that a failed decode left unused, kept for the next bundle.
    spare: Box<[Option<LentSlot>]>,
    /// Per peer: slots this thread lent it and has not had back.
    lent: Box<[u32]>,
    /// Per peer and lane (`peer × lanes + lane`): bundles handed to it since the publish
    /// generation in `seen`, which its published estimate does not count yet.
    handed: Box<[u32]>,
    lanes: usize,
    seen: Box<[u64]>,
    /// Peers handed a bundle (or told news) this iteration, to wake if they sleep.
    wake: Box<[bool]>,
    wake_list: Box<[u16]>,
    wake_len: usize,
    /// What this thread last published, per lane.
    published: Box<[Estimate]>,
}

impl Peers {
    /// Thread `me`'s side of `mesh` for `lanes` lanes, allocated now.
    pub fn new(mesh: Arc<Mesh>, me: usize, lanes: usize) -> Peers {
        let n = mesh.threads();
        assert!(me < n, "thread {me} of a mesh of {n}");
        assert!(lanes <= crate::limiter::LANES_MAX, "{lanes} lanes");
        Peers {
            mesh,
            me,
            spare: vec![None; n].into_boxed_slice(),
            lent: vec![0; n].into_boxed_slice(),
            handed: vec![0; n * lanes].into_boxed_slice(),
            lanes,
            seen: vec![0; n].into_boxed_slice(),
            wake: vec![false; n].into_boxed_slice(),
            wake_list: vec![0; n].into_boxed_slice(),
            wake_len: 0,
            published: vec![Estimate::NONE; lanes].into_boxed_slice(),
        }
    }

    /// The heap bytes one thread's side holds in a mesh of `threads` with `lanes` lanes (the
    /// budget counts it).
    pub const fn allocation_bytes(threads: usize, lanes: usize) -> usize {
        threads
            * (std::mem::size_of::<Option<LentSlot>>()
                + std::mem::size_of::<u32>()
                + lanes * std::mem::size_of::<u32>()
                + std::mem::size_of::<u64>()
                + std::mem::size_of::<bool>()
                + std::mem::size_of::<u16>())
            + lanes * std::mem::size_of::<Estimate>()
    }

    pub fn me(&self) -> usize {
        self.me
    }

    pub fn mesh(&self) -> &Arc<Mesh> {
        &self.mesh
    }

    /// The other thread whose pool can send a bundle for lane `r` soonest, and when; `None`
    /// when none has a pair up for it.
    pub fn best(&mut self, r: usize, now: Instant) -> Option<(usize, u64)> {
        let mut best: Option<(usize, u64)> = None;
        for t in 0..self.mesh.threads() {
            // A stopping thread sends nothing more: what it is handed, it ends unsent.
            if t == self.me || self.mesh.is_leaving(t) {
                continue;
            }
            let at = self.leaves(t, r, now);
            if at != crate::mesh::NEVER && best.is_none_or(|(_, b)| at < b) {
                best = Some((t, at));
            }
        }
        best
    }

    /// When thread `t`'s pool would send a bundle for lane `r` handed to it now: its published
    /// estimate, behind what this thread handed it since ([`crate::mesh::NEVER`] for none).
    pub fn leaves(&mut self, t: usize, r: usize, now: Instant) -> u64 {
        let generation = self.mesh.generation(t);
        if generation != self.seen[t] {
            // Its estimate now counts what was handed to it before it published.
            self.seen[t] = generation;
            self.handed[t * self.lanes..(t + 1) * self.lanes].fill(0);
        }
        self.mesh
            .estimate(t, r)
            .at(now, u64::from(self.handed[t * self.lanes + r]))
    }

    /// A slot `peer` lent this thread, ready for a bundle admitted at `now`; `None` when none
    /// is left (the ring is empty: its owner lends more as its slots come back).
    pub fn take_credit(&mut self, peer: usize, now: Instant) -> Option<LentSlot> {
        if self.mesh.is_leaving(peer) {
            return None;
        }
        let mut slot = self.spare[peer]
            .take()
            .or_else(|| self.mesh.credits(peer, self.me).pop())?;
        // SAFETY: a slot lent to this thread and not handed back: its cells are ours alone.
        let s = unsafe { slot.slot_mut() };
        *s.meta = BundleMeta {
            admitted_at: now,
            ..BundleMeta::default()
        };
        Some(slot)
    }

    /// A lent slot the bundle did not use (its decode failed): kept for the next one.
    pub fn keep_credit(&mut self, peer: usize, slot: LentSlot) {
        debug_assert!(self.spare[peer].is_none());
        self.spare[peer] = Some(slot);
    }

    /// Hands `peer` back its slot with a decoded bundle for `lane` in it; `moved`: one this
    /// thread had admitted and copied there ([`Handoff::moved`]).
    pub fn hand_off(&mut self, peer: usize, mut slot: LentSlot, lane: u8, moved: bool) {
        // SAFETY: as in `take_credit`; the ring's release publishes these writes to the owner.
        let meta = &mut unsafe { slot.slot_mut() }.meta;
        meta.lane = lane;
        // A newly admitted bundle's fan-out copies wait in the peer's lanes too.
        let (fan_lanes, extra) = (meta.fan_lanes, if moved { 0 } else { meta.fan_extra });
        let pushed = self.mesh.handoffs(self.me, peer).push(Handoff {
            slot: slot.handle,
            lane,
            moved,
        });
        // Its owner lent at most a ring's worth, so the ring has room for every one back.
        assert!(pushed.is_ok(), "a handoff ring is never full");
        self.mesh.count_handoff(self.me, peer);
        self.handed[peer * self.lanes + lane as usize] += 1;
        for &l in &fan_lanes[..usize::from(extra)] {
            self.handed[peer * self.lanes + usize::from(l)] += 1;
        }
        self.wake(peer);
    }

    /// Wakes `peer` after this iteration, if it sleeps.
    fn wake(&mut self, peer: usize) {
        if !self.wake[peer] {
            self.wake[peer] = true;
            self.wake_list[self.wake_len] = peer as u16;
            self.wake_len += 1;
        }
    }

    /// A peer handed a bundle (or told news) since the last call, to wake when it sleeps.
    pub fn poll_wake(&mut self) -> Option<usize> {
        if self.wake_len == 0 {
            return None;
        }
        self.wake_len -= 1;
        let peer = self.wake_list[self.wake_len] as usize;
        self.wake[peer] = false;
        Some(peer)
    }

    /// Every bundle other threads handed this one, oldest first per peer.
    pub fn receive(&mut self, mut each: impl FnMut(Handoff)) {
        for b in 0..self.mesh.threads() {
            if b == self.me {
                continue;
            }
            while let Some(h) = self.mesh.handoffs(b, self.me).pop() {
                self.lent[b] -= 1;
                each(h);
            }
        }
    }

    /// This thread is stopping ([`Mesh::leave`]).
    pub fn leave(&self) {
        self.mesh.leave(self.me);
    }

    /// This thread stops for good ([`Mesh::close`]).
    pub fn close(&self) {
        self.mesh.close(self.me);
    }

    /// Every thread has stopped for good ([`Mesh::all_closed`]).
    pub fn all_closed(&self) -> bool {
        self.mesh.all_closed()
    }

    /// Whether a handoff (or news of a region heard again) waits for this thread.
    pub fn has_inbound(&self) -> bool {
        self.mesh.has_handoffs_for(self.me) || self.mesh.has_news_for(self.me)
    }

    /// Tells every other thread that region `r`'s engine answered a bundle here at `now`,
    /// ending a silence, and wakes them.
    pub fn heard_again(&mut self, r: usize, now: Instant) {
        self.mesh.heard_again(self.me, r, now);
        for peer in 0..self.mesh.threads() {
            // A stopping thread sends nothing more.
            if peer != self.me && !self.mesh.is_leaving(peer) {
                self.wake(peer);
            }
        }
    }

    /// Lends each other thread slots of `arena` until it holds its share of credits.
    pub fn lend(&mut self, arena: &mut Arena, now: Instant) {
        let k = self.mesh.credits_per_peer() as u32;
        for b in 0..self.mesh.threads() {
            if b == self.me {
                continue;
            }
            while self.lent[b] < k {
                let Some(slot) = arena.lend(now) else {
                    return;
                };
                let pushed = self.mesh.credits(self.me, b).push(slot);
                assert!(
                    pushed.is_ok(),
                    "a credit ring holds every credit outstanding"
                );
                self.lent[b] += 1;
            }
        }
    }

    /// Slots this thread has lent and not had back (held by its arena, holding no bundle of
    /// its own).
    pub fn lent_out(&self) -> u32 {
        self.lent.iter().sum()
    }

    /// Publishes lane `r`'s estimate, if it changed.
    pub fn publish(&mut self, r: usize, e: Estimate) -> bool {
        if self.published[r] == e {
            return false;
        }
        self.published[r] = e;
        self.mesh.publish(self.me, r, e);
        true
    }

    /// Ends a round of [`Peers::publish`] calls of which some changed an estimate.
    pub fn published(&self) {
        self.mesh.published(self.me);
    }
}
