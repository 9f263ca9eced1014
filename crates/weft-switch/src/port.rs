//! What a port is to the core: a receive half that fills batches and lends out the bytes of
//! the frames it received, and a transmit half that takes bursts of frames.
//!
//! The halves are separate because they have separate owners: the receive half belongs to
//! the worker that polls it; the transmit half is a destination for every worker forwarding
//! to the port (the daemon puts it behind one lock, taken once per batch per destination, as
//! VALE does). Received frames stay where the port keeps them (a guest's buffer, a ring) until
//! the batch is finished, so delivery can copy each frame exactly once, straight from the
//! source port's memory into the destination's. A port whose memory another party can
//! write (a guest's) lends a copy of the frame's head and the rest as a [`SharedTail`]
//! (`port/frame.rs`): the switch decides on bytes nobody else can change.

use weft_packet::OffloadInfo;

mod device;
mod frame;
pub use device::{
    CounterClass, CounterSource, DeviceCounter, DeviceError, DeviceStatus, Link, OnePairDevice,
    PortDevice, Unsplit,
};
pub use frame::{RxFrame, SharedTail};

/// Identifies one received frame inside its port, until [`PortRx::finish`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FrameHandle(pub u32);

/// One received frame as the batch records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RxDesc {
    /// Where the port keeps the bytes.
    pub handle: FrameHandle,
    /// Offload state the port read beside the frame (virtio-net header and the like).
    pub offload: OffloadInfo,
}

/// The largest batch the core accepts.
pub const MAX_BATCH: usize = 1024;
/// The default batch size. 128 rather than 64: a vhost-user port facing a 256-entry ring
/// then takes up to half of it at a look, and the benchmark's generator forwarded 3–6 %
/// more frames through weft (in-process A/B, `docs/performance-history.md`).
pub const DEFAULT_BATCH: usize = 128;

/// A receive burst: frame descriptors a port pushed, up to a fixed capacity.
///
/// Allocated once; `clear` and `push` never allocate.
#[derive(Debug)]
pub struct RxBatch {
    descs: Vec<RxDesc>,
    capacity: usize,
    /// The first this many frames are the port's own ([`RxBatch::push_own`]).
    own: usize,
}

impl RxBatch {
    /// A batch of `capacity` frames, clamped to 1..=[`MAX_BATCH`].
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.clamp(1, MAX_BATCH);
        RxBatch {
            descs: Vec::with_capacity(capacity),
            capacity,
            own: 0,
        }
    }
    /// The most frames the batch holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    /// Frames in the batch.
    pub fn len(&self) -> usize {
        self.descs.len()
    }
    /// True when no frame is in the batch.
    pub fn is_empty(&self) -> bool {
        self.descs.is_empty()
    }
    /// Room left.
    pub fn room(&self) -> usize {
        self.capacity - self.descs.len()
    }
    /// Adds a frame; gives it back when the batch is full.
    #[inline]
    pub fn push(&mut self, desc: RxDesc) -> Result<(), RxDesc> {
        if self.descs.len() >= self.capacity {
            return Err(desc);
        }
        self.descs.push(desc);
        Ok(())
    }
    /// Adds every frame `descs` yields, or none when they do not all fit (false then): one
    /// room check for a group of frames rather than one per frame.
    #[inline]
    pub fn extend_exact<I: ExactSizeIterator<Item = RxDesc>>(&mut self, descs: I) -> bool {
        if descs.len() > self.room() {
            return false;
        }
        self.descs.extend(descs);
        true
    }
    /// Adds a frame the port made itself rather than received from its link (an ICMP
    /// answer an overlay port gives on behalf of a remote destination): the switch forwards
    /// it but learns nothing from it, since its source address is not a station behind the
    /// port. Such frames come first: gives the frame back when the batch is full or already
    /// holds a received one.
    pub fn push_own(&mut self, desc: RxDesc) -> Result<(), RxDesc> {
        if self.own != self.descs.len() {
            return Err(desc);
        }
        self.push(desc)?;
        self.own += 1;
        Ok(())
    }
    /// How many frames at the start of the batch the port made itself.
    pub fn own_frames(&self) -> usize {
        self.own
    }
    /// Empties the batch.
    pub fn clear(&mut self) {
        self.descs.clear();
        self.own = 0;
    }
    /// The frames received.
    pub fn descs(&self) -> &[RxDesc] {
        &self.descs
    }
}

/// What a port can take on transmit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortCaps {
    /// Largest L3 packet (IP header and payload) in an ordinary frame: the port's MTU.
    pub mtu: usize,
    /// Largest ordinary frame, Ethernet header and up to two VLAN tags included, FCS
    /// excluded (MTU + 22). Frames whose L3 packet exceeds the MTU must be GSO frames the
    /// port accepts, or are segmented or dropped.
    pub max_frame_len: usize,
    /// Accepts frames whose L4 checksum is still to be computed (virtio `NEEDS_CSUM`).
    pub partial_csum: bool,
    /// Accepts TCP/IPv4 super-frames.
    pub tso4: bool,
    /// Accepts TCP/IPv6 super-frames.
    pub tso6: bool,
    /// Accepts UDP (USO) super-frames.
    pub uso: bool,
    /// Largest super-frame it accepts.
    pub max_gso_frame_len: usize,
}

impl PortCaps {
    /// A plain Ethernet port with MTU `mtu`, no offloads.
    pub const fn plain(mtu: usize) -> Self {
        PortCaps {
            mtu,
            max_frame_len: mtu + 22,
            partial_csum: false,
            tso4: false,
            tso6: false,
            uso: false,
            max_gso_frame_len: 0,
        }
    }
    /// A port that takes everything a virtio-net device can: partial checksums and 64 KB
    /// TCP/UDP super-frames.
    pub const fn full_offload(mtu: usize) -> Self {
        PortCaps {
            mtu,
            max_frame_len: mtu + 22,
            partial_csum: true,
            tso4: true,
            tso6: true,
            uso: true,
            max_gso_frame_len: 65_535 + 22,
        }
    }
    /// True when the port accepts super-frames of this kind.
    pub fn accepts_gso(&self, kind: weft_packet::GsoKind) -> bool {
        match kind {
            weft_packet::GsoKind::None => true,
            weft_packet::GsoKind::TcpV4 => self.tso4,
            weft_packet::GsoKind::TcpV6 => self.tso6,
            weft_packet::GsoKind::UdpL4 => self.uso,
        }
    }
}

/// The receive half of a port.
pub trait PortRx: Send {
    /// Pushes up to `batch.room()` received frames into `batch`. The frames stay valid (and
    /// readable through [`PortRx::frame`]) until [`PortRx::finish`].
    fn receive(&mut self, batch: &mut RxBatch);

    /// The bytes of a frame pushed by the last `receive`. An unknown handle yields an empty
    /// frame (which the core drops as malformed), never a panic. Everything the switch
    /// reads to decide must lie in [`RxFrame::head`], in memory only weft writes: for a
    /// frame whose headers reach further, the port copies the whole frame there.
    fn frame(&self, handle: FrameHandle) -> RxFrame<'_>;

    /// Every frame of the last `receive` has been delivered or dropped: the port may reuse
    /// their buffers (return descriptors to a guest, advance a ring...).
    fn finish(&mut self);

    /// What every other port of the switch takes, as one set of capabilities (an offload
    /// only if all of them have it; the smallest MTU and frame lengths), told by
    /// [`crate::Switch::poll`] when it may have changed (a port added or removed, or found
    /// renegotiated). A port that merges the frames it receives into super-frames (inner
    /// GRO) merges only kinds that no destination would cut again. Ignored by default.
    fn peers_accept(&mut self, _peers: &PortCaps) {}

    /// A file descriptor that becomes readable when the port may have frames to receive, so
    /// that an idle worker can sleep on it (epoll) instead of polling. `None`: the port has
    /// no such descriptor and must be polled.
    fn readiness_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }

    /// True while the port must be polled even though its readiness descriptor is quiet
    /// (a vhost-user port in switch-driven mode, whose guest does not kick, or one holding
    /// back a notification only a later look sends): an idle worker then yields and polls
    /// again instead of sleeping. Asked between passes, so it must be cheap.
    fn needs_polling(&self) -> bool {
        false
    }
}

/// A frame to transmit: a rewritten head (the Ethernet addresses and the VLAN tags the
/// destination wants, at most [`TxFrame::MAX_HEAD`] bytes) followed by the rest of the frame
/// where it lies: `body` in weft's memory, then `tail` in shared memory (a guest's buffer;
/// usually empty). Copying `head`, `body` and `tail` gives the frame.
#[derive(Debug, Clone, Copy)]
pub struct TxFrame<'a> {
    /// `None` for a frame sent as it is: one byte to write, not a head's worth.
    head: Option<Head>,
    /// The frame after the head, borrowed from the source.
    pub body: &'a [u8],
    /// The rest of the frame, still in the source's shared memory.
    pub tail: SharedTail<'a>,
    /// Offload state, offsets already shifted for the rewritten head.
    pub offload: OffloadInfo,
}

#[derive(Debug, Clone, Copy)]
struct Head {
    bytes: [u8; TxFrame::MAX_HEAD],
    len: u8,
}

impl<'a> TxFrame<'a> {
    /// Room for two MAC addresses and two VLAN tags.
    pub const MAX_HEAD: usize = 20;

    /// A frame sent as it is (no rewritten head).
    #[inline]
    pub fn whole(frame: &'a [u8], offload: OffloadInfo) -> Self {
        TxFrame {
            head: None,
            body: frame,
            tail: SharedTail::default(),
            offload,
        }
    }

    /// A received frame sent as it is.
    #[inline]
    pub fn of(frame: RxFrame<'a>, offload: OffloadInfo) -> Self {
        TxFrame {
            head: None,
            body: frame.head,
            tail: frame.tail,
            offload,
        }
    }

    /// The same frame with `tail` after its body.
    #[inline]
    pub fn with_tail(self, tail: SharedTail<'a>) -> Self {
        TxFrame { tail, ..self }
    }

    /// The frame's bytes when they are one slice in weft's memory (no rewritten head, no
    /// shared tail).
    #[inline]
    pub fn contiguous(&self) -> Option<&'a [u8]> {
        (self.head.is_none() && self.tail.is_empty()).then_some(self.body)
    }

    /// A frame with a head (at most [`TxFrame::MAX_HEAD`] bytes; longer is cut).
    pub fn with_head(head: &[u8], body: &'a [u8], offload: OffloadInfo) -> Self {
        let n = head.len().min(Self::MAX_HEAD);
        let mut bytes = [0; Self::MAX_HEAD];
        bytes[..n].copy_from_slice(&head[..n]);
        // n <= MAX_HEAD = 20, fits in u8.
        let len = u8::try_from(n).unwrap_or(0);
        TxFrame {
            head: Some(Head { bytes, len }),
            body,
            tail: SharedTail::default(),
            offload,
        }
    }

    /// The rewritten head.
    #[inline]
    pub fn head(&self) -> &[u8] {
        match &self.head {
            None => &[],
            Some(h) => &h.bytes[..usize::from(h.len)],
        }
    }

    /// Total length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.head().len() + self.body.len() + self.tail.len()
    }

    /// True for an empty frame.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies the frame into `out`; returns the bytes written, or `None` when `out` is too
    /// small (nothing is written then).
    #[inline]
    pub fn copy_to(&self, out: &mut [u8]) -> Option<usize> {
        let (h, b) = (self.head(), self.body);
        if h.is_empty() && self.tail.is_empty() {
            out.get_mut(..b.len())?.copy_from_slice(b);
            return Some(b.len());
        }
        let total = self.len();
        let out = out.get_mut(..total)?;
        Some(self.copy_prefix(out))
    }

    /// The frame's pieces in order (head, body, tail; empty ones skipped) as address and
    /// length, for a gathered system call (an iovec per piece). The addresses are valid
    /// while the frame is (`'a`).
    pub fn raw_parts(&self) -> impl Iterator<Item = (*const u8, usize)> + '_ {
        let head = self.head();
        [
            (head.as_ptr(), head.len()),
            (self.body.as_ptr(), self.body.len()),
            (self.tail.as_ptr(), self.tail.len()),
        ]
        .into_iter()
        .filter(|(_, len)| *len > 0)
    }

    /// Copies the frame's first `out.len()` bytes (or all, if fewer) into `out`; returns
    /// how many.
    pub fn copy_prefix(&self, out: &mut [u8]) -> usize {
        let mut n = 0;
        for part in [self.head(), self.body] {
            let take = part.len().min(out.len() - n);
            out[n..n + take].copy_from_slice(&part[..take]);
            n += take;
        }
        n + self.tail.copy_to(&mut out[n..])
    }
}

/// The transmit half of a port.
pub trait PortTx: Send {
    /// What the port can take.
    fn caps(&self) -> PortCaps;

    /// Transmits a burst. Returns how many frames, from the front, the port accepted; the
    /// rest are dropped by the caller and counted as [`crate::DropReason::TxQueueFull`]. A
    /// port never blocks here.
    fn transmit(&mut self, frames: &[TxFrame<'_>]) -> usize;

    /// A number that changes whenever [`PortTx::caps`] may have changed (a guest negotiated
    /// its offloads after the port was attached, say). The switch caches the caps and reads
    /// them again when this moves. Ports whose caps never change keep the default.
    fn caps_generation(&self) -> u64 {
        0
    }

    /// The core refused `frame` for this port: its L3 packet is larger than `mtu` (the
    /// port's [`PortCaps::mtu`]), or the frame longer than [`PortCaps::max_frame_len`], and
    /// it is no super-frame the core could segment. Called once per such frame, in the
    /// destination's pass over the batch (so between its `transmit` calls), after the core
    /// counted it as [`crate::DropReason::FrameTooBig`]. The frame is not transmitted
    /// whatever the port does here: a port that can tell the sender (an overlay answering
    /// with ICMP "fragmentation needed", as a router would) does so; the default does
    /// nothing, so the frame is only the counted drop. Must not block or allocate.
    fn too_big(&mut self, frame: &TxFrame<'_>, mtu: usize) {
        let _ = (frame, mtu);
    }
}

/// The two halves of a detached port, given back by `remove_port`.
pub struct PortHalves {
    /// The receive half, when the switch held it.
    pub rx: Option<Box<dyn PortRx>>,
    /// The transmit half.
    pub tx: Box<dyn PortTx>,
}

impl PortHalves {
    /// Both halves of one lane, boxed.
    pub fn pair(rx: impl PortRx + 'static, tx: impl PortTx + 'static) -> PortHalves {
        PortHalves {
            rx: Some(Box::new(rx)),
            tx: Box::new(tx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rx_batch_refuses_past_capacity() {
        let mut b = RxBatch::new(2);
        assert!(b.push(RxDesc::default()).is_ok());
        assert!(b.push(RxDesc::default()).is_ok());
        assert!(b.push(RxDesc::default()).is_err());
        assert_eq!(b.room(), 0);
        b.clear();
        assert_eq!(b.room(), 2);
    }

    #[test]
    fn rx_batch_capacity_is_clamped() {
        assert_eq!(RxBatch::new(0).capacity(), 1);
        assert_eq!(RxBatch::new(1 << 20).capacity(), MAX_BATCH);
    }

    #[test]
    fn tx_frame_copies_head_then_body() {
        let body = [9u8; 10];
        let f = TxFrame::with_head(&[1, 2, 3], &body, OffloadInfo::default());
        assert_eq!(f.len(), 13);
        let mut out = [0u8; 13];
        assert_eq!(f.copy_to(&mut out), Some(13));
        assert_eq!(&out[..3], &[1, 2, 3]);
        assert_eq!(&out[3..], &body);
        assert_eq!(f.copy_to(&mut [0u8; 12]), None);
    }
}
