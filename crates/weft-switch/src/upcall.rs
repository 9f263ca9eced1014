//! The bounded queue of packets handed to the control plane by the `controller` action
//! (Hyper-Switch's upcall). Slots are allocated once; a full queue refuses (the caller counts
//! the drop), it never grows and never blocks the data path.
//!
//! Each lane's [`Switch`](crate::Switch) fills its own queue while it classifies a batch,
//! without a lock. When the switch has an [`UpcallHub`] (weftd gives every switch one), the
//! lane hands the batch's upcalls to the hub's subscriptions right after the batch (one lock
//! per subscription per batch, [`hub`]); without one they wait for
//! [`Switch::drain_upcalls`](crate::Switch::drain_upcalls).

pub mod hub;

use std::collections::VecDeque;

use crate::flow_key::FlowKey;
use crate::flow_table::RuleId;
use crate::port::RxFrame;

pub use hub::{RuleRef, SubscribedUpcall, UpcallHub, UpcallSubscription};

/// Why a packet was handed to the control plane.
///
/// Only [`Action`](UpcallReason::Action) exists today. Reasons that could come later, each
/// its own variant: a flow-table miss sent up instead of to the learning bridge (OpenFlow's
/// table-miss), a frame the switch could not deliver (no destination, too big), or a port's
/// security refusal reported to a controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum UpcallReason {
    /// A matching rule's `controller` action.
    #[default]
    Action,
}

impl UpcallReason {
    /// The reason's name on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            UpcallReason::Action => "action",
        }
    }
}

/// A packet handed to the control plane.
#[derive(Debug, Clone)]
pub struct Upcall {
    /// The packet's key (ingress port included).
    pub key: FlowKey,
    /// Why.
    pub reason: UpcallReason,
    /// The rule whose action sent it up, when a rule did.
    pub rule: Option<RuleId>,
    /// The frame's first bytes, up to the queue's snap length.
    pub data: Vec<u8>,
    /// The frame's full length.
    pub orig_len: usize,
}

/// Upcall counters (one lane's; a switch's are the sum over its lanes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UpcallStats {
    /// Packets queued.
    pub queued: u64,
    /// Packets refused because the queue was full.
    pub dropped_full: u64,
    /// Packets handed to the hub while no subscription wanted the switch's upcalls: dropped.
    pub unclaimed: u64,
    /// Copies a subscription lost because its queue was full (one per subscription).
    pub subscriber_lost: u64,
}

impl UpcallStats {
    /// Adds another lane's counters.
    pub fn add(&mut self, other: &UpcallStats) {
        self.queued += other.queued;
        self.dropped_full += other.dropped_full;
        self.unclaimed += other.unclaimed;
        self.subscriber_lost += other.subscriber_lost;
    }
}

/// A fixed-capacity queue of upcalls with preallocated buffers.
#[derive(Debug)]
pub struct UpcallQueue {
    queue: VecDeque<Upcall>,
    free: Vec<Vec<u8>>,
    snaplen: usize,
    stats: UpcallStats,
}

impl UpcallQueue {
    /// A queue of `capacity` upcalls, each keeping at most `snaplen` bytes of its frame.
    pub fn new(capacity: usize, snaplen: usize) -> Self {
        UpcallQueue {
            queue: VecDeque::with_capacity(capacity),
            free: (0..capacity).map(|_| Vec::with_capacity(snaplen)).collect(),
            snaplen,
            stats: UpcallStats::default(),
        }
    }

    /// Queues a copy of `frame`; false when the queue is full (counted).
    pub fn offer(
        &mut self,
        key: &FlowKey,
        frame: &RxFrame<'_>,
        reason: UpcallReason,
        rule: Option<RuleId>,
    ) -> bool {
        let Some(mut data) = self.free.pop() else {
            self.stats.dropped_full += 1;
            return false;
        };
        // Buffers are recycled at their size; they grow to the snap length once.
        data.resize(frame.len().min(self.snaplen), 0);
        let n = frame.copy_prefix(&mut data);
        data.truncate(n);
        self.queue.push_back(Upcall {
            key: *key,
            reason,
            rule,
            data,
            orig_len: frame.len(),
        });
        self.stats.queued += 1;
        true
    }

    /// Hands every queued upcall to `f`, oldest first, and recycles the buffers.
    pub fn drain(&mut self, mut f: impl FnMut(&Upcall)) -> usize {
        let mut n = 0;
        while let Some(u) = self.queue.pop_front() {
            f(&u);
            self.free.push(u.data);
            n += 1;
        }
        n
    }

    /// The queued upcalls, oldest first, left queued.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Upcall> + '_ {
        self.queue.iter()
    }

    /// Counts upcalls no subscription wanted.
    pub(crate) fn note_unclaimed(&mut self, n: usize) {
        self.stats.unclaimed += n as u64;
    }

    /// Counts copies subscriptions lost.
    pub(crate) fn note_subscriber_lost(&mut self, n: u64) {
        self.stats.subscriber_lost += n;
    }

    /// Upcalls waiting.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Counters.
    pub fn stats(&self) -> UpcallStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_queue_refuses_and_counts() {
        let mut q = UpcallQueue::new(2, 64);
        let k = FlowKey::default();
        let a = UpcallReason::Action;
        assert!(q.offer(&k, &RxFrame::local(&[1; 100]), a, None));
        assert!(q.offer(&k, &RxFrame::local(&[2; 10]), a, None));
        assert!(!q.offer(&k, &RxFrame::local(&[3; 10]), a, None));
        assert_eq!(
            q.stats(),
            UpcallStats {
                queued: 2,
                dropped_full: 1,
                ..UpcallStats::default()
            }
        );
        let mut seen = Vec::new();
        assert_eq!(q.drain(|u| seen.push((u.data.len(), u.orig_len))), 2);
        assert_eq!(seen, vec![(64, 100), (10, 10)]);
        assert!(
            q.offer(&k, &RxFrame::local(&[4; 10]), a, None),
            "buffers are recycled after drain"
        );
    }
}
