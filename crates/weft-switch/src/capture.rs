//! Packet capture: a port can copy the frames it receives and/or sends into bounded
//! buffers that a control thread drains (to write a pcap file, say).
//!
//! A buffer holds a fixed number of frames, each cut at the snap length; slots are reused,
//! so a running capture does not allocate once every slot has been used. The data path
//! takes the buffer's lock once per batch, never waits for a reader beyond that, and
//! counts what did not fit as lost instead of blocking.

use std::sync::{Mutex, MutexGuard};

use crate::port::SharedTail;
use crate::types::Timestamp;

/// Which frames a capture takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CaptureDirection {
    /// Frames the switch received from the port.
    In,
    /// Frames the switch sent to the port.
    Out,
    /// Both.
    Both,
}

impl CaptureDirection {
    /// True when a frame going `way` is taken.
    pub fn takes(self, way: CaptureDirection) -> bool {
        self == CaptureDirection::Both || self == way
    }
}

/// One captured frame, as handed to [`CaptureBuffer::drain`].
#[derive(Debug, Clone, Copy)]
pub struct CapturedFrame<'a> {
    /// When the switch handled it (the worker's monotonic clock).
    pub time: Timestamp,
    /// [`CaptureDirection::In`] or [`CaptureDirection::Out`].
    pub direction: CaptureDirection,
    /// The frame's full length.
    pub orig_len: usize,
    /// Its first bytes, up to the snap length.
    pub data: &'a [u8],
}

struct Slot {
    time: Timestamp,
    direction: CaptureDirection,
    orig_len: usize,
    data: Vec<u8>,
}

struct Ring {
    slots: Vec<Slot>,
    /// Index of the oldest frame.
    head: usize,
    len: usize,
    lost: u64,
}

/// A bounded buffer of captured frames.
pub struct CaptureBuffer {
    ring: Mutex<Ring>,
    capacity: usize,
    snaplen: usize,
}

impl std::fmt::Debug for CaptureBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureBuffer")
            .field("capacity", &self.capacity)
            .field("snaplen", &self.snaplen)
            .finish()
    }
}

impl CaptureBuffer {
    /// A buffer of `capacity` frames (at least 1), each cut at `snaplen` bytes (at least 14).
    pub fn new(capacity: usize, snaplen: usize) -> Self {
        let capacity = capacity.max(1);
        let slots = (0..capacity)
            .map(|_| Slot {
                time: Timestamp(0),
                direction: CaptureDirection::In,
                orig_len: 0,
                data: Vec::new(),
            })
            .collect();
        CaptureBuffer {
            ring: Mutex::new(Ring {
                slots,
                head: 0,
                len: 0,
                lost: 0,
            }),
            capacity,
            snaplen: snaplen.max(14),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Ring> {
        // A panic while holding the lock leaves at worst a half-copied frame.
        self.ring.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Opens the buffer for a batch of frames: one lock for the whole batch.
    pub(crate) fn writer(&self) -> CaptureWriter<'_> {
        CaptureWriter {
            ring: self.lock(),
            capacity: self.capacity,
            snaplen: self.snaplen,
        }
    }

    /// Hands up to `max` frames, oldest first, to `f`, and frees their slots.
    pub fn drain(&self, max: usize, mut f: impl FnMut(&CapturedFrame<'_>)) -> usize {
        let mut ring = self.lock();
        let n = ring.len.min(max);
        for _ in 0..n {
            let head = ring.head;
            let slot = &ring.slots[head];
            f(&CapturedFrame {
                time: slot.time,
                direction: slot.direction,
                orig_len: slot.orig_len,
                data: &slot.data,
            });
            ring.head = (head + 1) % self.capacity;
            ring.len -= 1;
        }
        n
    }

    /// Frames that did not fit, so far.
    pub fn lost(&self) -> u64 {
        self.lock().lost
    }

    /// Frames waiting.
    pub fn len(&self) -> usize {
        self.lock().len
    }

    /// True when no frame waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The buffer, locked for one batch.
pub(crate) struct CaptureWriter<'a> {
    ring: MutexGuard<'a, Ring>,
    capacity: usize,
    snaplen: usize,
}

impl CaptureWriter<'_> {
    /// Copies a frame given in parts (a rewritten head and the rest).
    pub(crate) fn push(
        &mut self,
        time: Timestamp,
        direction: CaptureDirection,
        parts: [&[u8]; 2],
        shared: SharedTail<'_>,
    ) {
        let ring = &mut *self.ring;
        if ring.len == self.capacity {
            ring.lost += 1;
            return;
        }
        let tail = (ring.head + ring.len) % self.capacity;
        let slot = &mut ring.slots[tail];
        slot.time = time;
        slot.direction = direction;
        slot.orig_len = parts[0].len() + parts[1].len() + shared.len();
        slot.data.clear();
        for part in parts {
            let room = self.snaplen - slot.data.len();
            slot.data.extend_from_slice(&part[..part.len().min(room)]);
        }
        let at = slot.data.len();
        let take = shared.len().min(self.snaplen - at);
        if take > 0 {
            slot.data.resize(at + take, 0);
            shared.copy_to(&mut slot.data[at..]);
        }
        ring.len += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_come_out_in_order_cut_at_the_snap_length() {
        let b = CaptureBuffer::new(4, 20);
        {
            let mut w = b.writer();
            w.push(
                Timestamp(1),
                CaptureDirection::In,
                [&[1; 10], &[2; 30]],
                SharedTail::default(),
            );
            w.push(
                Timestamp(2),
                CaptureDirection::Out,
                [&[], &[3; 15]],
                SharedTail::default(),
            );
        }
        let mut seen = Vec::new();
        assert_eq!(
            b.drain(10, |f| seen.push((
                f.time.0,
                f.direction,
                f.orig_len,
                f.data.to_vec()
            ))),
            2
        );
        assert_eq!(seen[0].2, 40);
        assert_eq!(seen[0].3.len(), 20);
        assert_eq!(&seen[0].3[..10], &[1; 10]);
        assert_eq!(seen[1], (2, CaptureDirection::Out, 15, vec![3; 15]));
        assert!(b.is_empty());
    }

    #[test]
    fn a_full_buffer_counts_lost_frames_and_recovers_after_drain() {
        let b = CaptureBuffer::new(2, 64);
        {
            let mut w = b.writer();
            for i in 0..5u8 {
                w.push(
                    Timestamp(u64::from(i)),
                    CaptureDirection::In,
                    [&[i; 14], &[]],
                    SharedTail::default(),
                );
            }
        }
        assert_eq!(b.lost(), 3);
        let mut firsts = Vec::new();
        b.drain(1, |f| firsts.push(f.data[0]));
        b.writer().push(
            Timestamp(9),
            CaptureDirection::In,
            [&[9; 14], &[]],
            SharedTail::default(),
        );
        b.drain(10, |f| firsts.push(f.data[0]));
        assert_eq!(firsts, vec![0, 1, 9], "oldest first, across the wrap");
    }

    #[test]
    fn direction_filter() {
        assert!(CaptureDirection::Both.takes(CaptureDirection::In));
        assert!(CaptureDirection::Out.takes(CaptureDirection::Out));
        assert!(!CaptureDirection::In.takes(CaptureDirection::Out));
    }
}
