//! The receive half's descriptor budget: how many descriptors one `receive` may read from
//! the guest's transmit rings, so that a guest posting long chains cannot hold its worker
//! from the other ports on it.
//!
//! A deficit counter, as in deficit round robin: each `receive` adds a quantum (a few
//! descriptors per frame of room in the batch) to the port's credit, capped at one quantum;
//! chains are taken while the credit is positive, each paying for the descriptors its walk
//! read. A chain is never cut in the middle (one is at most `MAX_CHAIN_DESCRIPTORS` long),
//! so the last one may leave the credit below zero: the port then sits out the polls that
//! pay the debt back, reading nothing, and asks its worker to keep polling meanwhile
//! (`PortRx::needs_polling`). The usual chain is one descriptor per frame: a full batch of
//! them costs half a quantum, and a group of them pays with one subtraction.

use weft_switch::port::MAX_BATCH;

/// Descriptors a `receive` may read per frame of room in its batch. Two covers a guest that
/// keeps the virtio-net header in a descriptor of its own at every frame of a full batch;
/// chains longer on average (TSO frames of twenty descriptors) are taken fewer per poll
/// only while the budget binds, and each moves 64 KB.
pub(super) const DESCRIPTORS_PER_FRAME: usize = 2;

/// The least quantum, whatever the batch size: three times a Linux guest's longest chain,
/// so that one is taken at every poll even by a switch polling one frame at a time.
pub(super) const MIN_QUANTUM: usize = 64;

/// The budget of one receive half (see the module documentation).
#[derive(Debug, Default)]
pub(super) struct Credit {
    /// Descriptors the port may still read: at most one quantum, below zero after a chain
    /// that read more than was left.
    left: isize,
    /// This `receive` left chains behind for want of credit.
    cut: bool,
}

/// The quantum of a `receive` with room for `room` frames.
pub(super) fn quantum(room: usize) -> usize {
    room.min(MAX_BATCH)
        .saturating_mul(DESCRIPTORS_PER_FRAME)
        .max(MIN_QUANTUM)
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

    /// Descriptors left (none when in debt).
    #[inline(always)]
    pub(super) fn available(&self) -> usize {
        usize::try_from(self.left).unwrap_or(0)
    }

    /// Nothing more may be read this `receive`.
    #[inline(always)]
    pub(super) fn exhausted(&self) -> bool {
        self.left <= 0
    }

    /// `n` descriptors were read.
    #[inline(always)]
    pub(super) fn spend(&mut self, n: usize) {
        self.left = self
            .left
            .saturating_sub(isize::try_from(n).unwrap_or(isize::MAX));
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
        assert_eq!(c.available(), quantum(128));
        assert_eq!(quantum(128), 256);
    }

    #[test]
    fn a_debt_is_paid_back_over_the_following_polls() {
        let mut c = Credit::default();
        c.refill(32);
        assert_eq!(c.available(), 64);
        c.spend(1025);
        assert!(c.exhausted());
        let mut polls_sat_out = 0;
        loop {
            c.refill(32);
            if !c.exhausted() {
                break;
            }
            polls_sat_out += 1;
        }
        // 1025 - 64 = 961 owed, 64 paid back per poll: 15 polls with nothing read.
        assert_eq!(polls_sat_out, 15);
    }

    #[test]
    fn a_tiny_batch_still_gets_a_chains_worth() {
        assert_eq!(quantum(0), MIN_QUANTUM);
        assert_eq!(quantum(1), MIN_QUANTUM);
        assert_eq!(quantum(MAX_BATCH * 4), MAX_BATCH * DESCRIPTORS_PER_FRAME);
    }
}
