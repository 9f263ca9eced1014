//! The common transmit chains taken a group at a time: one readable descriptor holding a
//! 12-byte header and the frame, lent to the switch (its first bytes copied, the rest in
//! place: `BatchFrames::lend`).
//!
//! Why in groups: taken one at a time, each chain paid for its own look ahead (reading the
//! available ring and a descriptor several chains on, to prefetch), three pushes and a
//! header check. In stages over a group — heads and descriptors, then the headers, then the
//! frames into the batch together — each stage is a short loop of independent loads, so the
//! processor overlaps their misses by itself, the prefetches are for addresses already
//! known, and a group whose headers all ask for nothing (the usual one) has no header
//! parsed. A chain that is not plain ends the group; the general walk
//! (`queue.rs`) takes it.

use weft_packet::{virtio_net, OffloadInfo};
use weft_switch::{FrameHandle, RxBatch, RxDesc};

use crate::chain::{plain_tx_buffer, FrameLoc, GuestPtr};
use crate::counters::{FrameDrop, QueueCounters};
use crate::features::Features;
use crate::ring_access::{AvailCursor, GuestBytes, GuestView, SplitRing};

use super::queue::{admit_header, BatchFrames, RxQueue};

/// Most chains in one group: a burst of the usual size.
pub(super) const GROUP: usize = 32;

/// What one group did.
#[derive(Debug, Default)]
pub(super) struct GroupTaken {
    /// Chains taken (frames in the batch and frames dropped).
    pub(super) chains: usize,
    /// Frames put in the batch.
    pub(super) frames: usize,
    /// Of them, frames copied whole (their headers reach past the snapshot).
    pub(super) bounced: usize,
    pub(super) bytes: u64,
    /// The reason of the last frame dropped, for the rate-limited log.
    pub(super) last_drop: Option<FrameDrop>,
    /// The group ended at a chain that is not plain (left for the general walk).
    pub(super) stopped: bool,
}

/// Where the group's frames go: the batch, this queue's place in the receive half, the
/// negotiated features (for the headers that ask for offloads).
pub(super) struct GroupTarget<'b> {
    pub(super) frames: &'b mut BatchFrames,
    pub(super) batch: &'b mut RxBatch,
    pub(super) index: usize,
    pub(super) features: Features,
}

impl RxQueue {
    /// Takes up to `want` (at most [`GROUP`]) plain chains from `cursor`, lending their
    /// frames to the batch, which has room for them all. Stops before the first chain that
    /// is not plain. Frames whose header asks for what may not be asked are dropped, and
    /// their chains count as taken (they go back to the guest with the batch).
    pub(super) fn take_plain_group(
        &mut self,
        ring: &SplitRing<'_>,
        view: &GuestView<'_>,
        cursor: &mut AvailCursor,
        to: &mut GroupTarget<'_>,
        want: usize,
        counters: &QueueCounters,
    ) -> GroupTaken {
        // A guest that may ask for no offload writes only headers saying "no offload": they
        // are not read. That spares a line per frame the guest's core wrote last (the
        // header lies just below the frame, in another line for DPDK's virtio-user), a
        // cross-core miss that cost 7–15 % of the port's rate at 64 B (measured in one run,
        // `scripts/ab-vhost`).
        let headers_unread = !to.features.guest_may_ask_offloads();
        // Heads and descriptors in one short loop of independent loads (their misses
        // overlap), stopping at the first chain that is not plain: it goes back to the ring.
        let mut heads = [0u16; GROUP];
        let mut buffers = [GuestBytes::EMPTY; GROUP];
        let mut plain = 0;
        let mut stopped = false;
        for (head_slot, buffer_slot) in heads.iter_mut().zip(&mut buffers).take(want) {
            let Some(head) = cursor.next_head(ring) else {
                break;
            };
            let desc = ring.descriptor(head);
            ring.release_descriptor_line(head);
            let Some(bytes) = desc.and_then(|desc| plain_tx_buffer(view, &desc)) else {
                cursor.back();
                stopped = true;
                break;
            };
            // The lines of the Ethernet header, read by the switch, and of the virtio-net
            // header if it is read below.
            let from = if headers_unread {
                virtio_net::HEADER_LEN
            } else {
                0
            };
            let to_end = virtio_net::HEADER_LEN + weft_packet::ethernet::HEADER_LEN;
            bytes.prefetch_read_at(from, to_end - from);
            *head_slot = head;
            *buffer_slot = bytes;
            plain += 1;
        }
        let mut taken = GroupTaken {
            chains: plain,
            stopped,
            ..GroupTaken::default()
        };
        let buffers = buffers.get(..plain).unwrap_or_default();
        let heads = heads.get(..plain).unwrap_or_default();
        // The usual group: every header asks for nothing (`flags` and `gso_type` zero; every
        // other field then means nothing), or is not read. Its frames are snapshot, then go
        // into the batch together.
        let plain_headers = headers_unread || buffers.iter().all(|b| b.read_u16_le(0) == Some(0));
        if plain_headers && to.batch.room() >= plain {
            let first = to.frames.frames.len();
            let bounce_mark = to.frames.bounce.used();
            let mut locs = [FrameLoc::Bounce(0, 0); GROUP];
            let mut n = 0;
            for (loc, bytes) in locs.iter_mut().zip(buffers) {
                let (at, len) = bytes.after(virtio_net::HEADER_LEN);
                match to.frames.snapshot(first + n, GuestPtr(at), len) {
                    Ok(Some(l)) => *loc = l,
                    // No room to copy a frame whose headers reach past its snapshot (or, which
                    // cannot be, past the batch): it and the chains after it go back.
                    _ => break,
                }
                n += 1;
            }
            let handles = (first..first + n).map(|h| u32::try_from(h).unwrap_or(u32::MAX));
            let descs = handles.map(|h| RxDesc {
                handle: FrameHandle(h),
                offload: OffloadInfo::default(),
            });
            if to.batch.extend_exact(descs) {
                for _ in n..plain {
                    cursor.back();
                }
                let locs = locs.get(..n).unwrap_or_default();
                self.heads
                    .extend_from_slice(heads.get(..n).unwrap_or_default());
                let index = to.index;
                to.frames.frames.extend(locs.iter().map(|l| (*l, index)));
                taken.chains = n;
                taken.stopped |= n < plain;
                taken.frames = n;
                taken.bounced = locs
                    .iter()
                    .filter(|l| matches!(l, FrameLoc::Bounce(..)))
                    .count();
                taken.bytes = buffers
                    .iter()
                    .take(n)
                    .map(|b| (b.len() - virtio_net::HEADER_LEN) as u64)
                    .sum();
                return taken;
            }
            to.frames.bounce.truncate(bounce_mark);
        }
        for (k, (bytes, head)) in buffers.iter().zip(heads).enumerate() {
            let (at, frame_len) = bytes.after(virtio_net::HEADER_LEN);
            let offload = if plain_headers {
                Ok(OffloadInfo::default())
            } else {
                match bytes.read_u16_le(0) {
                    Some(0) => Ok(OffloadInfo::default()),
                    _ => bytes
                        .read_array::<{ virtio_net::HEADER_LEN }>()
                        .ok_or(FrameDrop::FrameTooShort)
                        .and_then(|header| admit_header(&header, frame_len, to.features)),
                }
            };
            let outcome = offload.map(|offload| {
                to.frames
                    .lend(to.batch, GuestPtr(at), frame_len, offload, to.index)
            });
            let reason = match outcome {
                Ok(Ok(Some(loc))) => {
                    self.heads.push(*head);
                    taken.frames += 1;
                    taken.bounced += usize::from(matches!(loc, FrameLoc::Bounce(..)));
                    taken.bytes += frame_len as u64;
                    continue;
                }
                Ok(Err(_)) => {
                    // No room to copy a frame whose headers reach past its snapshot: this
                    // chain and the ones after it go back, for the next batch.
                    for _ in k..buffers.len() {
                        cursor.back();
                    }
                    taken.chains = k;
                    taken.stopped = true;
                    break;
                }
                // Fails only when the caller asked for more than the room.
                Ok(Ok(None)) => FrameDrop::FrameTooShort,
                Err(reason) => reason,
            };
            self.heads.push(*head);
            counters.dropped(reason);
            taken.last_drop = Some(reason);
        }
        taken
    }
}
