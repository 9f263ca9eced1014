//! Stage 3's slow path: frames a destination cannot take as they are. Too big ones are
//! counted (and the port told, so an overlay can answer the sender); the rest have their
//! checksum completed or are cut into segments in the switch's own buffers, after what was
//! queued before them, so that order holds.

use weft_packet::gso::{complete_checksum, Segmenter};
use weft_packet::OffloadInfo;

use crate::counters::DropReason;
use crate::port::TxFrame;
use crate::switch::PortSlot;
use crate::types::Timestamp;

use super::{bytes_of, count_tx, datagrams_fit, Outbox, CHUNK};

/// The largest frame the slow path (checksum completion, segmentation) can take.
const MAX_SLOW_FRAME: usize = 65_535 + 64;

/// Where the slow path (checksum completion, segmentation) works.
#[derive(Default)]
pub(super) struct SlowBuffers {
    /// A linear copy of one frame.
    linear: Vec<u8>,
    /// Segments produced from it.
    segments: Vec<u8>,
}

impl<'a> Outbox<'_, 'a> {
    /// A frame the destination cannot take as it is: too big, or needing its checksum
    /// completed or segmentation. Returns false when it was dropped.
    #[cold]
    #[inline(never)]
    pub(super) fn queue_slow(
        &mut self,
        slot: &mut PortSlot,
        slow: &mut SlowBuffers,
        tx: TxFrame<'a>,
        l3_offset: usize,
    ) -> bool {
        let tx = &tx;
        let caps = slot.caps;
        // A TCP super-frame is cut to fit; a UDP one is not (its datagrams are the sender's).
        let too_big = if tx.offload.is_gso() {
            !datagrams_fit(&tx.offload, tx.len(), l3_offset, caps.mtu)
        } else {
            tx.len() > caps.max_frame_len || tx.len().saturating_sub(l3_offset) > caps.mtu
        };
        if too_big {
            // Counted whatever the port does with it; the port may answer the sender.
            self.drops.note(DropReason::FrameTooBig, 1);
            slot.tx.too_big(tx, caps.mtu);
            return false;
        }
        // Keep order: send what is queued first.
        self.flush(slot);
        match slow_path(slot, tx, l3_offset, slow, self.now) {
            Ok(()) => true,
            Err(reason) => {
                self.drops.note(reason, 1);
                false
            }
        }
    }
}

/// Completes the checksum of, or segments, a frame the destination cannot take as it is.
#[cold]
#[inline(never)]
fn slow_path(
    slot: &mut PortSlot,
    frame: &TxFrame<'_>,
    l3_offset: usize,
    slow: &mut SlowBuffers,
    now: Timestamp,
) -> Result<(), DropReason> {
    let SlowBuffers { linear, segments } = slow;
    let caps = slot.caps;
    if frame.len() > MAX_SLOW_FRAME {
        return Err(DropReason::FrameTooBig);
    }
    linear.resize(frame.len(), 0);
    let len = frame.copy_to(linear).ok_or(DropReason::BadOffload)?;
    let bytes = &mut linear[..len];
    if !frame.offload.is_gso() {
        complete_checksum(bytes, &frame.offload).map_err(|_| DropReason::BadOffload)?;
        let out = [TxFrame::whole(bytes, OffloadInfo::default())];
        send_all(slot, &out, now);
        return Ok(());
    }
    // Segments carry at most an MTU of L3 packet behind this frame's own L2 header.
    let seg_len = (l3_offset + caps.mtu).min(caps.max_frame_len);
    let mut seg =
        Segmenter::new(bytes, &frame.offload, seg_len).map_err(|_| DropReason::BadOffload)?;
    segments.resize(seg_len * CHUNK, 0);
    loop {
        // Fill up to CHUNK segments, then hand them over in one call.
        let mut lens = [0usize; CHUNK];
        let mut count = 0;
        for (slot, len) in segments.chunks_mut(seg_len).zip(lens.iter_mut()) {
            match seg.next_segment(slot) {
                None => break,
                Some(Ok(n)) => {
                    *len = n;
                    count += 1;
                }
                Some(Err(_)) => return Err(DropReason::BadOffload),
            }
        }
        if count == 0 {
            return Ok(());
        }
        let empty: &[u8] = &[];
        let mut out = [TxFrame::whole(empty, OffloadInfo::default()); CHUNK];
        for ((o, chunk), len) in out
            .iter_mut()
            .zip(segments.chunks(seg_len))
            .zip(lens)
            .take(count)
        {
            *o = TxFrame::whole(&chunk[..len], OffloadInfo::default());
        }
        send_all(slot, &out[..count], now);
        if count < CHUNK {
            return Ok(());
        }
    }
}

/// Hands `frames` to the port; what it refuses is counted as [`DropReason::TxQueueFull`].
fn send_all(slot: &mut PortSlot, frames: &[TxFrame<'_>], now: Timestamp) {
    let accepted = slot.tx.transmit(frames).min(frames.len());
    let sent = &frames[..accepted];
    count_tx(slot, sent, bytes_of(sent), now);
    slot.counters
        .drops
        .add(DropReason::TxQueueFull, (frames.len() - accepted) as u64);
}
