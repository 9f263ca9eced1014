//! The receive half's descriptor budget: how many descriptors one `receive` may read from
//! the guest's transmit rings, so that a guest posting long chains cannot hold its worker
//! from the other ports on it.
//!
//! What is budgeted is the descriptors of a chain beyond its first. A chain's first costs
//! nothing: a `receive` takes at most a batch of chains, so those are bounded already, and
//! the usual chain (one descriptor holding header and frame, Linux's and DPDK's) is never
//! held back or charged — the plain group path (`plain_group.rs`) does no budget work at
//! all beyond asking, once a group, whether the port is in debt.
//!
//! A deficit counter, as in deficit round robin: each `receive` adds a quantum (half a
//! descriptor per frame of room in the batch) to the port's credit, capped at one quantum;
//! chains are taken while the credit is positive, each paying for the descriptors its walk
//! read beyond its first. A chain is never cut in the middle (one is at most
//! `MAX_CHAIN_DESCRIPTORS` long), so the last one may leave the credit below zero: the port
//! then sits out the polls that pay the debt back, reading nothing, and asks its worker to
//! keep polling meanwhile (`PortRx::needs_polling`). Chains of several descriptors are
//! taken fewer per poll while the budget binds (a full batch of two-descriptor chains in
//! two polls; Linux's TSO frames, about twenty descriptors and 64 KB each, three to a poll
//! of a 128-frame batch), which costs them only more polls when the worker has nothing
//! else to do.
//!
//! Why so tight: in the `hostile_neighbour_tests` rig a descriptor of a chain of one-byte
//! buffers costs the walk about 16 ns, a usual frame (received, switched and copied into
//! another guest) about 50 ns; at 64 descriptors a poll a guest posting the longest chains
//! its port takes costs a busy neighbour (a full batch a poll) about an eighth of its rate
//! (`scripts/bench-budget`, two short runs on a quiet machine: 0.89× and 0.84×).

use weft_switch::port::MAX_BATCH;

/// Descriptors beyond a chain's first a `receive` may read, per two frames of room in its
/// batch.
pub(super) const EXTRA_DESCRIPTORS_PER_TWO_FRAMES: usize = 1;

/// The least quantum, whatever the batch size: more than a Linux guest's longest chain
/// (about 20 descriptors), so that one is taken at every poll even by a switch polling a
/// few frames at a time.
pub(super) const MIN_QUANTUM: usize = 32;

/// The budget of one receive half (see the module documentation).
#[derive(Debug, Default)]
pub(super) struct Credit {
    /// Descriptors beyond their chains' first the port may still read: at most one
    /// quantum, below zero after a chain that read more than was left.
    left: isize,
    /// This `receive` left chains behind for want of credit.
    cut: bool,
    /// Descriptors read so far beyond the chains taken (kept here, in memory, rather than
    /// in a counter the take loop would keep live in a register: the usual chain adds
    /// nothing to it).
    extra_read: u64,
}

/// The quantum of a `receive` with room for `room` frames.
pub(crate) fn quantum(room: usize) -> usize {
    (room.min(MAX_BATCH) * EXTRA_DESCRIPTORS_PER_TWO_FRAMES / 2).max(MIN_QUANTUM)
}

impl Credit {
    /// A new `receive` with room for `room` frames: one quantum more, at most one in all.
    pub(super) fn refill(&mut self, room: usize) {
        let q = isize::try_from(quantum(room)).unwrap_or(isize::MAX);
        self.left = self.left.saturating_add(q).min(q);
        self.cut = false;
    }

    /// A queue's chains were left for a later poll for want of credit.
    pub(super) fn mark_cut(&mut self) {
        self.cut = true;
    }

    /// Whether the last `receive` left chains behind for want of credit (no kick will
    /// announce them: the worker must poll again).
    pub(super) fn cut(&self) -> bool {
        self.cut
    }

    /// Nothing more may be read this `receive`.
    #[inline(always)]
    pub(super) fn exhausted(&self) -> bool {
        self.left <= 0
    }

    /// A chain's walk read `descriptors` (its first is free).
    #[inline(always)]
    pub(super) fn spend(&mut self, descriptors: usize) {
        let extra = descriptors.saturating_sub(1);
        self.left = self
            .left
            .saturating_sub(isize::try_from(extra).unwrap_or(isize::MAX));
        self.extra_read = self.extra_read.wrapping_add(extra as u64);
    }

    /// A chain was read but is not among those taken (given back, or its ring broke): its
    /// first descriptor, for the count.
    pub(super) fn read_not_taken(&mut self) {
        self.extra_read = self.extra_read.wrapping_add(1);
    }

    /// Descriptors read beyond the chains taken, since the port started (differences of
    /// two readings are what a look read beyond its chains).
    pub(super) fn extra_read(&self) -> u64 {
        self.extra_read
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credit_never_grows_past_one_quantum_while_idle() {
        let mut c = Credit::default();
        for _ in 0..10 {
            c.refill(128);
        }
        assert_eq!(c.left, 64);
        assert_eq!(quantum(128), 64);
    }

    #[test]
    fn a_debt_is_paid_back_over_the_following_polls() {
        let mut c = Credit::default();
        c.refill(64);
        assert_eq!(c.left, 32);
        c.spend(1);
        assert_eq!(c.left, 32, "a chain's first descriptor is free");
        c.spend(1025);
        assert!(c.exhausted());
        let mut polls_sat_out = 0;
        loop {
            c.refill(64);
            if !c.exhausted() {
                break;
            }
            polls_sat_out += 1;
        }
        // 1024 - 32 = 992 owed, 32 paid back per poll: 31 polls read nothing (the last of
        // them brings the credit back to zero, which is not yet enough).
        assert_eq!(polls_sat_out, 31);
    }

    #[test]
    fn a_tiny_batch_still_gets_a_chains_worth() {
        assert_eq!(quantum(0), MIN_QUANTUM);
        assert_eq!(quantum(1), MIN_QUANTUM);
        assert_eq!(quantum(MAX_BATCH * 4), MAX_BATCH / 2);
    }
}
