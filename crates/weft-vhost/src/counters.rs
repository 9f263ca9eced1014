//! Per-queue counters: frames, bytes, notifications, and every drop and fault by reason.
//!
//! Written by the data path (and by the control thread when it stops a ring), read from
//! any thread. Frames and bytes are added once per batch.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use weft_packet::VirtioNetHeaderError;

/// Why a queue stopped being served: its ring can no longer be trusted. The frontend must
/// reset the ring (stop and restart it) before the port serves it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum QueueFault {
    /// The available index moved more than the queue size past what was consumed.
    #[error("available index out of range")]
    AvailIndexOutOfRange,
    /// A chain head in the available ring is not a descriptor of the table.
    #[error("chain head index out of range")]
    HeadIndexOutOfRange,
    /// A descriptor's `next` is not a descriptor of its table.
    #[error("next descriptor index out of range")]
    NextIndexOutOfRange,
    /// A chain longer than its table: a loop.
    #[error("descriptor chain loops or exceeds the queue size")]
    ChainTooLong,
    /// A chain of more than 1024 buffers (direct or through an indirect table, zero-length
    /// ones included): more than any driver writes, refused as Linux's vhost refuses it.
    #[error("descriptor chain of more than 1024 descriptors")]
    TooManyDescriptors,
    /// An indirect table that is nested, empty, too large or not a whole number of
    /// descriptors.
    #[error("bad indirect descriptor table")]
    BadIndirectTable,
    /// A descriptor table (direct or indirect) lies outside guest memory.
    #[error("descriptor table not readable")]
    DescriptorUnreadable,
    /// A buffer lies outside guest memory or wraps around the address space.
    #[error("buffer address outside guest memory")]
    AddressOutOfRange,
    /// A chain whose buffers add up to more than 4 GiB.
    #[error("descriptor chain larger than 4 GiB")]
    ChainTooLarge,
    /// A device-writable buffer in a transmit chain, or a read-only one in a receive chain.
    #[error("descriptor of the wrong direction")]
    WrongDirection,
    /// The available or used ring could not be read or written.
    #[error("ring not accessible")]
    RingInaccessible,
    /// A chain that ended early for no reason a second look could name.
    #[error("malformed descriptor chain")]
    MalformedChain,
    /// A receive chain too short for the virtio-net header: no frame could ever use it.
    #[error("receive chain shorter than the virtio-net header")]
    ChainShorterThanHeader,
    /// The frontend shrank the file behind the ring's memory while it was mapped (the
    /// SIGBUS that followed was caught: `memory/sigbus.rs`).
    #[error("guest memory truncated by the frontend")]
    MemoryTruncated,
}

impl QueueFault {
    /// Every fault, in counter order.
    pub const ALL: [QueueFault; 14] = [
        QueueFault::AvailIndexOutOfRange,
        QueueFault::HeadIndexOutOfRange,
        QueueFault::NextIndexOutOfRange,
        QueueFault::ChainTooLong,
        QueueFault::TooManyDescriptors,
        QueueFault::BadIndirectTable,
        QueueFault::DescriptorUnreadable,
        QueueFault::AddressOutOfRange,
        QueueFault::ChainTooLarge,
        QueueFault::WrongDirection,
        QueueFault::RingInaccessible,
        QueueFault::MalformedChain,
        QueueFault::ChainShorterThanHeader,
        QueueFault::MemoryTruncated,
    ];

    /// The counter index.
    pub fn index(self) -> usize {
        Self::ALL.iter().position(|f| *f == self).unwrap_or(0)
    }

    /// The fault's name in counters and state (`snake_case`).
    pub fn counter_name(self) -> &'static str {
        match self {
            QueueFault::AvailIndexOutOfRange => "avail_index_out_of_range",
            QueueFault::HeadIndexOutOfRange => "head_index_out_of_range",
            QueueFault::NextIndexOutOfRange => "next_index_out_of_range",
            QueueFault::ChainTooLong => "chain_too_long",
            QueueFault::TooManyDescriptors => "too_many_descriptors",
            QueueFault::BadIndirectTable => "bad_indirect_table",
            QueueFault::DescriptorUnreadable => "descriptor_unreadable",
            QueueFault::AddressOutOfRange => "address_out_of_range",
            QueueFault::ChainTooLarge => "chain_too_large",
            QueueFault::WrongDirection => "wrong_direction",
            QueueFault::RingInaccessible => "ring_inaccessible",
            QueueFault::MalformedChain => "malformed_chain",
            QueueFault::ChainShorterThanHeader => "chain_shorter_than_header",
            QueueFault::MemoryTruncated => "memory_truncated",
        }
    }
}

/// Why one frame was dropped while its queue goes on being served (the chain is returned
/// to the guest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum FrameDrop {
    /// The chain is shorter than the virtio-net header.
    #[error("chain shorter than the virtio-net header")]
    HeaderTooShort,
    /// The frame after the header is shorter than an Ethernet header.
    #[error("frame shorter than an Ethernet header")]
    FrameTooShort,
    /// The frame is longer than the largest super-frame.
    #[error("frame longer than the largest super-frame")]
    FrameTooLong,
    /// A descriptor of length zero in a transmit chain.
    #[error("zero-length descriptor")]
    ZeroLengthDescriptor,
    /// The virtio-net header is inconsistent with its frame.
    #[error("bad virtio-net header: {0}")]
    BadHeader(VirtioNetHeaderError),
    /// The guest used an offload it did not negotiate.
    #[error("offload not negotiated by the guest")]
    OffloadNotNegotiated,
    /// The guest's receive buffers are too small for the frame (or its first buffer for the
    /// header).
    #[error("guest receive buffers too small")]
    GuestBufferTooSmall,
    /// The frame needed an offload the guest did not negotiate, and doing it in software
    /// failed (its headers do not allow segmentation or checksumming).
    #[error("offload failed in software")]
    OffloadFailed,
    /// A receive buffer overlaps the frame to be written into it (both in one guest's
    /// memory: a frontend breaking the rule that a buffer it made available is the
    /// device's alone). Writing would change the frame while it is being read.
    #[error("receive buffer overlaps the frame")]
    BufferOverlapsFrame,
    /// The frame would take more than 1024 descriptors of the guest's receive buffers over
    /// all its chains (mergeable buffers this small are no driver's): its chains go back.
    #[error("frame would take more than 1024 receive descriptors")]
    TooManyDescriptors,
}

/// Number of [`FrameDrop`] counters (bad headers are counted per header error).
const DROP_COUNTERS: usize = 23;

impl FrameDrop {
    /// The counter index: one per reason, one per kind of header error.
    pub fn index(self) -> usize {
        use VirtioNetHeaderError as H;
        match self {
            FrameDrop::HeaderTooShort => 0,
            FrameDrop::FrameTooShort => 1,
            FrameDrop::FrameTooLong => 2,
            FrameDrop::ZeroLengthDescriptor => 3,
            FrameDrop::OffloadNotNegotiated => 4,
            FrameDrop::GuestBufferTooSmall => 5,
            FrameDrop::OffloadFailed => 6,
            FrameDrop::BufferOverlapsFrame => 21,
            FrameDrop::TooManyDescriptors => 22,
            FrameDrop::BadHeader(h) => match h {
                H::UnknownFlags(_) => 7,
                H::RscInfo => 8,
                H::UnknownGsoType(_) => 9,
                H::UfoUnsupported => 10,
                H::EcnWithoutTcpGso => 11,
                H::GsoWithoutNeedsCsum => 12,
                H::GsoSizeZero => 13,
                H::GsoSizeTooLarge(_) => 14,
                H::TooManySegments { .. } => 15,
                H::CsumOutOfFrame { .. } => 16,
                H::CsumStartInEthernetHeader { .. } => 17,
                H::BadGsoCsumOffset { .. } => 18,
                H::HdrLenTooLarge { .. } => 19,
            },
        }
    }

    /// A short name for the counter at `index` (for metrics and logs).
    pub fn counter_name(index: usize) -> &'static str {
        const NAMES: [&str; DROP_COUNTERS] = [
            "header_too_short",
            "frame_too_short",
            "frame_too_long",
            "zero_length_descriptor",
            "offload_not_negotiated",
            "guest_buffer_too_small",
            "offload_failed",
            "header_unknown_flags",
            "header_rsc_info",
            "header_unknown_gso_type",
            "header_ufo",
            "header_ecn_without_tcp_gso",
            "header_gso_without_needs_csum",
            "header_gso_size_zero",
            "header_gso_size_too_large",
            "header_too_many_segments",
            "header_csum_out_of_frame",
            "header_csum_start_in_ethernet_header",
            "header_bad_gso_csum_offset",
            "header_hdr_len_too_large",
            "other",
            "buffer_overlaps_frame",
            "too_many_descriptors",
        ];
        NAMES.get(index).copied().unwrap_or("other")
    }
}

/// Buckets of the batch-size histogram: bucket `i` counts batches of `2^i..2^(i+1)`
/// frames, the last one everything from 1024 up.
pub const BATCH_BUCKETS: usize = 11;

/// The histogram bucket of a batch of `frames` (at least 1) frames.
pub fn batch_bucket(frames: u64) -> usize {
    let log2 = usize::try_from(frames.max(1).ilog2()).unwrap_or(usize::MAX);
    log2.min(BATCH_BUCKETS - 1)
}

/// Counters of one virtqueue.
#[derive(Debug, Default)]
pub(crate) struct QueueCounters {
    frames: AtomicU64,
    bytes: AtomicU64,
    lent: AtomicU64,
    bounced: AtomicU64,
    notifications: AtomicU64,
    notifications_suppressed: AtomicU64,
    kicks_drained: AtomicU64,
    kicks: AtomicU64,
    notifications_held: AtomicU64,
    dispatch_changes: AtomicU64,
    batch_sizes: [AtomicU64; BATCH_BUCKETS],
    no_buffers: AtomicU64,
    discarded_in_flight: AtomicU64,
    software_offloads: AtomicU64,
    descriptors: AtomicU64,
    budget_cuts: AtomicU64,
    drops: [AtomicU64; DROP_COUNTERS],
    faults: [AtomicU64; QueueFault::ALL.len()],
}

fn bump(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl QueueCounters {
    pub(crate) fn add_frames(&self, frames: u64, bytes: u64) {
        if frames > 0 {
            bump(&self.frames, frames);
            bump(&self.bytes, bytes);
        }
    }
    pub(crate) fn add_lent(&self, lent: u64, bounced: u64) {
        if lent > 0 {
            bump(&self.lent, lent);
        }
        if bounced > 0 {
            bump(&self.bounced, bounced);
        }
    }
    pub(crate) fn notified(&self, sent: bool) {
        bump(
            if sent {
                &self.notifications
            } else {
                &self.notifications_suppressed
            },
            1,
        );
    }
    pub(crate) fn kick_drained(&self) {
        bump(&self.kicks_drained, 1);
    }
    pub(crate) fn kicks_received(&self, n: u64) {
        if n > 0 {
            bump(&self.kicks, n);
        }
    }
    pub(crate) fn notification_held(&self) {
        bump(&self.notifications_held, 1);
    }
    pub(crate) fn dispatch_changed(&self) {
        bump(&self.dispatch_changes, 1);
    }
    /// A batch of `frames` frames (none: not a batch).
    pub(crate) fn batch(&self, frames: u64) {
        if frames > 0 {
            if let Some(c) = self.batch_sizes.get(batch_bucket(frames)) {
                bump(c, 1);
            }
        }
    }
    pub(crate) fn no_buffers(&self) {
        bump(&self.no_buffers, 1);
    }
    pub(crate) fn add_software_offloads(&self, n: u64) {
        if n > 0 {
            bump(&self.software_offloads, n);
        }
    }
    /// `n` descriptors read (added once per burst).
    pub(crate) fn add_descriptors(&self, n: u64) {
        if n > 0 {
            bump(&self.descriptors, n);
        }
    }
    /// A look at the ring ended by the descriptor budget with chains left.
    pub(crate) fn budget_cut(&self) {
        bump(&self.budget_cuts, 1);
    }
    pub(crate) fn discarded_in_flight(&self, n: u64) {
        bump(&self.discarded_in_flight, n);
    }
    pub(crate) fn dropped(&self, reason: FrameDrop) {
        if let Some(c) = self.drops.get(reason.index()) {
            bump(c, 1);
        }
    }
    pub(crate) fn faulted(&self, fault: QueueFault) {
        if let Some(c) = self.faults.get(fault.index()) {
            bump(c, 1);
        }
    }

    /// A copy of the counters.
    pub(crate) fn snapshot(&self) -> QueueStats {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        QueueStats {
            frames: load(&self.frames),
            bytes: load(&self.bytes),
            lent: load(&self.lent),
            bounced: load(&self.bounced),
            notifications: load(&self.notifications),
            notifications_suppressed: load(&self.notifications_suppressed),
            kicks_drained: load(&self.kicks_drained),
            kicks: load(&self.kicks),
            notifications_held: load(&self.notifications_held),
            dispatch_changes: load(&self.dispatch_changes),
            batch_sizes: std::array::from_fn(|i| load(&self.batch_sizes[i])),
            no_buffers: load(&self.no_buffers),
            discarded_in_flight: load(&self.discarded_in_flight),
            software_offloads: load(&self.software_offloads),
            descriptors: load(&self.descriptors),
            budget_cuts: load(&self.budget_cuts),
            drops: std::array::from_fn(|i| load(&self.drops[i])),
            faults: std::array::from_fn(|i| load(&self.faults[i])),
        }
    }
}

/// A snapshot of a queue's counters.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueueStats {
    /// Frames received from (transmit queue) or delivered to (receive queue) the guest.
    pub frames: u64,
    /// Their bytes (frames only, virtio-net headers excluded).
    pub bytes: u64,
    /// Received frames lent to the switch from guest memory (their headers copied, the rest
    /// in place; short frames wholly copied into the snapshot).
    pub lent: u64,
    /// Received frames copied whole into the bounce buffer first (scattered over several
    /// buffers, headers reaching past the snapshot, or lending off).
    pub bounced: u64,
    /// Notifications (interrupts) sent to the guest.
    pub notifications: u64,
    /// Notifications the guest's suppression (flags or `used_event`) made unnecessary.
    pub notifications_suppressed: u64,
    /// Notifications the port's policy held back (coalesced, or an optimistic
    /// end-of-coalescing judged too cold or too hot); a held one is sent later if the guest
    /// still wants it.
    pub notifications_held: u64,
    /// Times the kick counter was drained before re-enabling guest notifications.
    pub kicks_drained: u64,
    /// Kicks received from the guest (transmit queue; counted when the port reads its kick
    /// descriptor, so kicks since the last read are not in yet).
    pub kicks: u64,
    /// Times adaptive dispatch changed between guest-driven and switch-driven (transmit
    /// queue).
    pub dispatch_changes: u64,
    /// Batches by size: bucket `i` counts batches of `2^i..2^(i+1)` frames (the last
    /// everything larger); see [`batch_bucket`].
    pub batch_sizes: [u64; BATCH_BUCKETS],
    /// Bursts cut short because the guest had no receive buffers.
    pub no_buffers: u64,
    /// Chains in flight when the frontend stopped the ring; the next start re-reads them.
    pub discarded_in_flight: u64,
    /// Frames whose offload (checksum, segmentation) the port did in software because the
    /// guest did not negotiate it.
    pub software_offloads: u64,
    /// Descriptors read from the queue's rings (the chains' own, and those of their
    /// indirect tables): the work the guest asked of the port.
    pub descriptors: u64,
    /// Looks at the queue cut short by the port's descriptor budget (chains left for the
    /// next poll, or frames toward the guest refused for this burst), so that one guest
    /// cannot hold its worker from the other ports.
    pub budget_cuts: u64,
    /// Dropped frames per [`FrameDrop::index`].
    pub drops: [u64; DROP_COUNTERS],
    /// Faults per [`QueueFault::index`].
    pub faults: [u64; QueueFault::ALL.len()],
}

impl QueueStats {
    /// Adds `other` counter by counter (totals over queues).
    pub fn accumulate(&mut self, other: &QueueStats) {
        let pairs = [
            (&mut self.frames, other.frames),
            (&mut self.bytes, other.bytes),
            (&mut self.lent, other.lent),
            (&mut self.bounced, other.bounced),
            (&mut self.notifications, other.notifications),
            (
                &mut self.notifications_suppressed,
                other.notifications_suppressed,
            ),
            (&mut self.notifications_held, other.notifications_held),
            (&mut self.kicks_drained, other.kicks_drained),
            (&mut self.kicks, other.kicks),
            (&mut self.dispatch_changes, other.dispatch_changes),
            (&mut self.no_buffers, other.no_buffers),
            (&mut self.discarded_in_flight, other.discarded_in_flight),
            (&mut self.software_offloads, other.software_offloads),
            (&mut self.descriptors, other.descriptors),
            (&mut self.budget_cuts, other.budget_cuts),
        ];
        for (mine, theirs) in pairs {
            *mine = mine.wrapping_add(theirs);
        }
        let arrays = [
            (&mut self.batch_sizes[..], &other.batch_sizes[..]),
            (&mut self.drops[..], &other.drops[..]),
            (&mut self.faults[..], &other.faults[..]),
        ];
        for (mine, theirs) in arrays {
            for (m, t) in mine.iter_mut().zip(theirs) {
                *m = m.wrapping_add(*t);
            }
        }
    }

    /// Count of drops for one reason.
    pub fn dropped(&self, reason: FrameDrop) -> u64 {
        self.drops.get(reason.index()).copied().unwrap_or(0)
    }
    /// Count of one fault.
    pub fn faulted(&self, fault: QueueFault) -> u64 {
        self.faults.get(fault.index()).copied().unwrap_or(0)
    }
    /// Every drop, all reasons.
    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum()
    }
    /// Every fault.
    pub fn total_faults(&self) -> u64 {
        self.faults.iter().sum()
    }
    /// Batches counted in the histogram.
    pub fn batches(&self) -> u64 {
        self.batch_sizes.iter().sum()
    }
}

/// Lets one log line through per interval and counts the ones held back, so that a guest
/// sending garbage cannot flood the log.
#[derive(Debug)]
pub(crate) struct LogLimiter {
    next: Option<Instant>,
    suppressed: u64,
}

impl LogLimiter {
    const INTERVAL: Duration = Duration::from_secs(1);

    pub(crate) const fn new() -> Self {
        LogLimiter {
            next: None,
            suppressed: 0,
        }
    }

    /// `Some(held back since the last line)` when a line may be logged now.
    pub(crate) fn allow(&mut self) -> Option<u64> {
        let now = Instant::now();
        if self.next.is_some_and(|next| now < next) {
            self.suppressed = self.suppressed.saturating_add(1);
            return None;
        }
        self.next = Some(now + Self::INTERVAL);
        Some(std::mem::take(&mut self.suppressed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fault_has_its_own_counter_and_name() {
        for (i, f) in QueueFault::ALL.iter().enumerate() {
            assert_eq!(f.index(), i);
        }
        let names: std::collections::HashSet<_> =
            QueueFault::ALL.iter().map(|f| f.counter_name()).collect();
        assert_eq!(names.len(), QueueFault::ALL.len());
    }

    #[test]
    fn header_errors_are_counted_apart() {
        let c = QueueCounters::default();
        c.dropped(FrameDrop::BadHeader(VirtioNetHeaderError::GsoSizeZero));
        c.dropped(FrameDrop::BadHeader(VirtioNetHeaderError::RscInfo));
        c.dropped(FrameDrop::BadHeader(VirtioNetHeaderError::RscInfo));
        let s = c.snapshot();
        assert_eq!(
            s.dropped(FrameDrop::BadHeader(VirtioNetHeaderError::RscInfo)),
            2
        );
        assert_eq!(
            s.dropped(FrameDrop::BadHeader(VirtioNetHeaderError::GsoSizeZero)),
            1
        );
        assert_eq!(s.total_drops(), 3);
        assert_eq!(
            FrameDrop::counter_name(FrameDrop::BadHeader(VirtioNetHeaderError::RscInfo).index()),
            "header_rsc_info"
        );
    }

    #[test]
    fn batch_sizes_fall_in_power_of_two_buckets() {
        let buckets: Vec<usize> = [1u64, 2, 3, 4, 7, 8, 64, 1023, 1024, 5000]
            .iter()
            .map(|n| batch_bucket(*n))
            .collect();
        assert_eq!(buckets, vec![0, 1, 1, 2, 2, 3, 6, 9, 10, 10]);
        let c = QueueCounters::default();
        c.batch(0);
        c.batch(1);
        c.batch(33);
        c.batch(40);
        let s = c.snapshot();
        assert_eq!(s.batches(), 3);
        assert_eq!((s.batch_sizes[0], s.batch_sizes[5]), (1, 2));
    }

    #[test]
    fn log_limiter_holds_back_lines_within_the_interval() {
        let mut l = LogLimiter::new();
        assert_eq!(l.allow(), Some(0));
        assert_eq!(l.allow(), None);
        assert_eq!(l.allow(), None);
        l.next = Some(Instant::now());
        assert_eq!(l.allow(), Some(2));
    }
}
