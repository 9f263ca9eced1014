//! The bounded queue of packets handed to the control plane by the `controller` action
//! (Hyper-Switch's upcall). Slots are allocated once; a full queue refuses (the caller counts
//! the drop), it never grows and never blocks the data path.

use std::collections::VecDeque;

use crate::flow_key::FlowKey;
use crate::port::RxFrame;

/// A packet handed to the control plane.
#[derive(Debug, Clone)]
pub struct Upcall {
    /// The packet's key (ingress port included).
    pub key: FlowKey,
    /// The frame's first bytes, up to the queue's snap length.
    pub data: Vec<u8>,
    /// The frame's full length.
    pub orig_len: usize,
}

/// Upcall counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UpcallStats {
    /// Packets queued.
    pub queued: u64,
    /// Packets refused because the queue was full.
    pub dropped_full: u64,
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
    pub fn offer(&mut self, key: &FlowKey, frame: &RxFrame<'_>) -> bool {
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
        assert!(q.offer(&k, &RxFrame::local(&[1; 100])));
        assert!(q.offer(&k, &RxFrame::local(&[2; 10])));
        assert!(!q.offer(&k, &RxFrame::local(&[3; 10])));
        assert_eq!(
            q.stats(),
            UpcallStats {
                queued: 2,
                dropped_full: 1
            }
        );
        let mut seen = Vec::new();
        assert_eq!(q.drain(|u| seen.push((u.data.len(), u.orig_len))), 2);
        assert_eq!(seen, vec![(64, 100), (10, 10)]);
        assert!(
            q.offer(&k, &RxFrame::local(&[4; 10])),
            "buffers are recycled after drain"
        );
    }
}
