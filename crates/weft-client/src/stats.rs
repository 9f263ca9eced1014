//! Counters: what moved, and everything the backend got wrong, by reason.

/// Something the backend wrote that the client refused. Each is counted; none panics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RingFault {
    /// A used element named a descriptor beyond the ring.
    UsedIdOutOfRange,
    /// A used element named a descriptor the backend did not hold (used twice, or never
    /// made available).
    UsedIdNotInFlight,
    /// The used index ran more than a ring ahead of us: the ring is stopped.
    UsedIndexRunaway,
    /// A receive buffer's used length is longer than the buffer.
    UsedLenTooLong,
    /// A received frame is shorter than a virtio-net header plus an Ethernet header.
    FrameTooShort,
    /// A received frame is longer than negotiated.
    FrameTooLong,
    /// A received frame's virtio-net header is invalid (see `weft_packet::virtio_net`).
    BadHeader,
    /// A received frame's header asks for an offload we did not accept.
    OffloadNotNegotiated,
    /// A mergeable frame's `num_buffers` is 0 or larger than the ring.
    BadNumBuffers,
}

impl RingFault {
    /// Every fault, in counter order.
    pub const ALL: [RingFault; 9] = [
        RingFault::UsedIdOutOfRange,
        RingFault::UsedIdNotInFlight,
        RingFault::UsedIndexRunaway,
        RingFault::UsedLenTooLong,
        RingFault::FrameTooShort,
        RingFault::FrameTooLong,
        RingFault::BadHeader,
        RingFault::OffloadNotNegotiated,
        RingFault::BadNumBuffers,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

/// Counters of one ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RingStats {
    /// Frames moved.
    pub frames: u64,
    /// Bytes moved (Ethernet frames, virtio-net headers not counted).
    pub bytes: u64,
    /// Kicks sent to the backend.
    pub kicks: u64,
    /// Kicks the backend's suppression (`EVENT_IDX` / `NO_NOTIFY`) let us skip.
    pub kicks_suppressed: u64,
    /// Times a send found no free slot (backpressure) or a receive found nothing.
    pub empty: u64,
    /// Times the client slept on the backend's call eventfd.
    pub sleeps: u64,
    /// Faults by [`RingFault`] (index: position in [`RingFault::ALL`]).
    pub faults: [u64; 9],
}

impl RingStats {
    pub(crate) fn fault(&mut self, f: RingFault) {
        if let Some(c) = self.faults.get_mut(f.index()) {
            *c += 1;
        }
    }

    /// How many times `f` happened.
    pub fn faults_of(&self, f: RingFault) -> u64 {
        self.faults.get(f.index()).copied().unwrap_or(0)
    }

    /// All faults.
    pub fn total_faults(&self) -> u64 {
        self.faults.iter().sum()
    }
}

/// A snapshot of a client's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClientStats {
    /// Our transmit ring (virtqueue 1).
    pub tx: RingStats,
    /// Our receive ring (virtqueue 0).
    pub rx: RingStats,
}
