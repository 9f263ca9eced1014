//! Writing frames into the guest's receive chains: one frame over as many chains as it
//! takes (mergeable buffers), its virtio-net header, and offloads done in software.

use weft_packet::{OffloadInfo, Segmenter};
use weft_switch::TxFrame;

use weft_packet::virtio_net;

use crate::chain::{write_rx_chain, ChainError, FrameSource, TableRef};
use crate::config::MAX_FRAME_LEN;
use crate::counters::{FrameDrop, QueueFault};
use crate::features::Features;
use crate::ring_access::{
    AvailCursor, GuestBytes, GuestView, SplitRing, MAX_CHAIN_DESCRIPTORS, PREFETCH_DISTANCE,
};

/// What the guest is told about a frame: `DATA_VALID` only if it negotiated checksums;
/// for a frame that asks for neither a checksum nor segmentation, nothing else (its other
/// fields mean nothing to the guest: zeros, as [`virtio_net::plain_header_words`] writes).
fn offload_for_guest(info: OffloadInfo, features: Features) -> OffloadInfo {
    let data_valid = info.data_valid && features.guest_csum();
    if !info.needs_csum && !info.is_gso() {
        return OffloadInfo {
            data_valid,
            ..OffloadInfo::default()
        };
    }
    OffloadInfo { data_valid, ..info }
}

/// Gives the chains a frame took (from `first` on) back to the available ring.
fn rewind(cursor: &mut AvailCursor, used: &mut Vec<(u16, u32)>, first: usize) {
    for _ in first..used.len() {
        cursor.back();
    }
    used.truncate(first);
}

/// How putting one frame into the ring went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Put {
    Done,
    /// The guest has no buffer left: stop the burst.
    NoBuffers,
    /// This frame cannot go in; the next may.
    Dropped(FrameDrop),
    /// The ring is broken.
    Fault(QueueFault),
    /// The burst's descriptor budget is spent (`tx/budget.rs`): the frame's chains went
    /// back, and the burst stops.
    OutOfBudget,
}

/// Fills the guest's receive ring for one burst.
pub(super) struct RingWriter<'q, 'm> {
    pub(super) ring: SplitRing<'m>,
    pub(super) cursor: AvailCursor,
    pub(super) view: &'q GuestView<'m>,
    pub(super) table: TableRef,
    pub(super) features: Features,
    /// `features.header_len()`, asked once per burst.
    pub(super) hdr_len: usize,
    pub(super) used: &'q mut Vec<(u16, u32)>,
    pub(super) delivered: u64,
    pub(super) bytes: u64,
    /// Descriptors the port may still read (`tx/budget.rs`): none at zero or below.
    pub(super) credit: isize,
    /// Descriptors read so far.
    pub(super) descriptors: usize,
}

impl RingWriter<'_, '_> {
    /// Writes `frame` behind a header saying its offloads into as many chains as it
    /// takes (one without mergeable buffers); on failure gives the chains back.
    #[inline(always)]
    pub(super) fn put(&mut self, frame: &TxFrame<'_>) -> Put {
        let hdr_len = self.hdr_len;
        // The frame written now stands for the one that will reach the chain prefetched.
        let span = hdr_len + frame.len();
        self.ring.prefetch_ahead(
            self.view,
            &self.cursor,
            PREFETCH_DISTANCE,
            span,
            Some(hdr_len),
        );
        // The caller added the frame's allowance (`tx/budget.rs`): nothing left means a debt
        // the earlier frames ran up.
        if self.credit <= 0 {
            return Put::OutOfBudget;
        }
        let Some(first_head) = self.cursor.next_head(&self.ring) else {
            return Put::NoBuffers;
        };
        if self.put_in_one_buffer(first_head, hdr_len, frame) {
            self.spend(1);
            return Put::Done;
        }
        self.put_in_chains(first_head, span, frame)
    }

    /// The general path of [`RingWriter::put`], from chain `first_head` (already taken)
    /// on: the frame over as many chains as it takes.
    #[inline(never)]
    fn put_in_chains(&mut self, first_head: u16, span: usize, frame: &TxFrame<'_>) -> Put {
        let hdr_len = self.hdr_len;
        let mut src = FrameSource::new(frame);
        let first = self.used.len();
        let mut header = None;
        let mut taken = Some(first_head);
        // Descriptors this frame's chains held: at most MAX_CHAIN_DESCRIPTORS in all, as
        // Linux's vhost allows one packet (`UIO_MAXIOV`).
        let mut frame_descriptors = 0usize;
        loop {
            let chain_head = match taken.take() {
                Some(h) => h,
                None => {
                    self.ring.prefetch_ahead(
                        self.view,
                        &self.cursor,
                        PREFETCH_DISTANCE,
                        span,
                        Some(0),
                    );
                    if self.credit <= 0 {
                        rewind(&mut self.cursor, self.used, first);
                        return Put::OutOfBudget;
                    }
                    let Some(h) = self.cursor.next_head(&self.ring) else {
                        rewind(&mut self.cursor, self.used, first);
                        return Put::NoBuffers;
                    };
                    h
                }
            };
            let is_first = self.used.len() == first;
            let mut chain = self.ring.chain(self.view, chain_head);
            let want_header = if is_first { hdr_len } else { 0 };
            let written = write_rx_chain(&mut chain, self.table, want_header, &mut src);
            self.spend(chain.descriptors_read());
            frame_descriptors += chain.descriptors_read();
            match written {
                Ok(w) => {
                    if is_first {
                        header = w.header;
                    }
                    self.used.push((w.head, w.len));
                }
                Err(ChainError::Drop(reason)) => {
                    self.cursor.back();
                    rewind(&mut self.cursor, self.used, first);
                    return Put::Dropped(reason);
                }
                Err(ChainError::Fault(fault)) => {
                    self.used.truncate(first);
                    return Put::Fault(fault);
                }
                Err(ChainError::NoRoom) => {
                    self.used.truncate(first);
                    return Put::Fault(QueueFault::MalformedChain);
                }
            }
            if src.remaining() == 0 {
                break;
            }
            if frame_descriptors >= usize::from(MAX_CHAIN_DESCRIPTORS) {
                rewind(&mut self.cursor, self.used, first);
                return Put::Dropped(FrameDrop::TooManyDescriptors);
            }
            if !self.features.mergeable_rx() || self.used.len() - first >= usize::from(u16::MAX) {
                // Without mergeable buffers a frame must fit one chain.
                rewind(&mut self.cursor, self.used, first);
                return Put::Dropped(FrameDrop::GuestBufferTooSmall);
            }
        }
        let buffers = u16::try_from(self.used.len() - first).unwrap_or(u16::MAX);
        if let Some(slot) = header {
            // `slot` is the `hdr_len` bytes the chain walk kept for the header (a 10-byte
            // legacy header has no num_buffers; the 12-byte one always does).
            slot.write(&offload_for_guest(frame.offload, self.features), buffers);
        }
        self.delivered += 1;
        self.bytes += frame.len() as u64;
        Put::Done
    }

    /// The common case, without the general chain walk: chain `chain_head` is one
    /// write-only buffer that takes header and frame whole. False (nothing used) otherwise,
    /// for [`RingWriter::put_in_chains`].
    #[inline(always)]
    fn put_in_one_buffer(&mut self, chain_head: u16, hdr_len: usize, frame: &TxFrame<'_>) -> bool {
        let total = hdr_len + frame.len();
        if hdr_len != virtio_net::HEADER_LEN {
            return false;
        }
        let Some(dst) = self.one_buffer(chain_head, total) else {
            return false;
        };
        if !self.write_whole(&dst, frame) {
            return false;
        }
        let len = u32::try_from(total).unwrap_or(u32::MAX);
        self.used.push((chain_head, len));
        self.delivered += 1;
        self.bytes += frame.len() as u64;
        true
    }
}

impl<'m> RingWriter<'_, 'm> {
    /// `n` descriptors were read.
    #[inline(always)]
    pub(super) fn spend(&mut self, n: usize) {
        self.credit = self
            .credit
            .saturating_sub(isize::try_from(n).unwrap_or(isize::MAX));
        self.descriptors += n;
    }

    /// The `total` bytes of chain `chain_head`, when it is one write-only buffer (no NEXT,
    /// not INDIRECT) at least that long, inside one region.
    #[inline(always)]
    pub(super) fn one_buffer(&self, chain_head: u16, total: usize) -> Option<GuestBytes<'m>> {
        let desc = self.ring.descriptor(chain_head)?;
        self.ring.release_descriptor_line(chain_head);
        let usable = desc.is_write_only()
            && !desc.has_next()
            && !desc.refers_to_indirect_table()
            && usize::try_from(desc.len()).is_ok_and(|len| len >= total);
        usable
            .then(|| self.view.bytes(desc.addr(), total))
            .flatten()
    }

    /// Writes a 12-byte header saying the frame's offloads (one buffer), then its head, body
    /// and tail, into `dst`. False when the body or the tail (bytes of some guest's memory)
    /// overlaps `dst`: the buffer is not used then (whatever was copied into it is the
    /// device's to overwrite), and the general walk drops the frame and counts why. The
    /// head is the switch's own bytes.
    #[inline(always)]
    pub(super) fn write_whole(&self, dst: &GuestBytes<'_>, frame: &TxFrame<'_>) -> bool {
        let (head, body, info) = (frame.head(), frame.body, &frame.offload);
        let hdr_len = virtio_net::HEADER_LEN;
        // The usual frame's header without building it field by field: what
        // `offload_for_guest` leaves of it, written out here (normalising first and then
        // encoding costs 13 instructions a frame more, measured).
        let header = if info.needs_csum || info.is_gso() {
            virtio_net::header_words(&offload_for_guest(*info, self.features), 1)
        } else {
            virtio_net::plain_header_words(info.data_valid && self.features.guest_csum(), 1)
        };
        let body_at = hdr_len + head.len();
        dst.write(body_at, body)
            && (frame.tail.is_empty() || dst.write_shared(body_at + body.len(), &frame.tail))
            && (head.is_empty() || dst.write(hdr_len, head))
            && dst.store_header(header)
    }
}

/// Buffers for offloads done in software, allocated on first use.
#[derive(Default)]
pub(super) struct SoftwareOffload {
    frame: Vec<u8>,
    segment: Vec<u8>,
}

impl SoftwareOffload {
    /// Completes the checksum of, or segments, a frame the guest cannot take as it is, and
    /// puts the result into the ring. Segments already put stay there if a later one fails.
    pub(super) fn put(
        &mut self,
        w: &mut RingWriter<'_, '_>,
        f: &TxFrame<'_>,
        max_frame_len: usize,
    ) -> Put {
        if self.frame.len() < MAX_FRAME_LEN {
            self.frame.resize(MAX_FRAME_LEN, 0);
            self.segment.resize(MAX_FRAME_LEN, 0);
        }
        let Some(len) = f.copy_to(&mut self.frame) else {
            return Put::Dropped(FrameDrop::FrameTooLong);
        };
        let Some(frame) = self.frame.get(..len) else {
            return Put::Dropped(FrameDrop::FrameTooLong);
        };
        let Ok(mut segments) = Segmenter::new(frame, &f.offload, max_frame_len) else {
            return Put::Dropped(FrameDrop::OffloadFailed);
        };
        while let Some(next) = segments.next_segment(&mut self.segment) {
            let Some(segment) = next.ok().and_then(|n| self.segment.get(..n)) else {
                return Put::Dropped(FrameDrop::OffloadFailed);
            };
            match w.put(&TxFrame::whole(segment, OffloadInfo::default())) {
                Put::Done => {}
                other => return other,
            }
        }
        Put::Done
    }
}
