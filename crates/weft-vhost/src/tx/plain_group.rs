//! Frames put a group at a time into receive chains that each take one whole: the common
//! case (a frame that fits the guest's buffer, one write-only descriptor, with a 12-byte
//! header).
//!
//! Why in groups: put one at a time, each frame paid for its own look ahead (the available
//! ring and a descriptor several chains on, to prefetch) and one push per used element. Here
//! the chains of a group are found first — heads and descriptors in one short loop of
//! independent loads, whose misses the processor overlaps by itself — and their lines asked
//! for writing (but the header's, for reading: `GuestBytes::prefetch_receive`), so that
//! the copies that follow find them coming; then the frames are copied, and the used
//! elements recorded together. A frame that does not go this way ends the group, and
//! [`RingWriter::put`] takes it.

use weft_packet::{ethernet, virtio_net};
use weft_switch::TxFrame;

use crate::config::MAX_FRAME_LEN;
use crate::ring_access::GuestBytes;

use super::ring_writer::RingWriter;

/// Most frames in one group: a burst of the usual size.
pub(super) const GROUP: usize = 32;

/// Most bytes of each buffer of a group asked for writing before its copies. A group asks
/// for all its buffers at once: whole 1514-byte frames (24 lines each, 32 frames) crowd the
/// first-level cache and its miss buffers before a byte is copied; the first 256 bytes
/// (the header's line and the copy's start) are taken early and the hardware follows the
/// rest of each copy. Measured in one run each (`scripts/ab-vhost --size 1514`, against
/// 256): whole buffers 0.921 (41 of 42 phases lower), 128 bytes 0.988, 512 bytes 0.985, none
/// 0.990 of whole buffers. A 64-byte frame's buffer (76 bytes) is prefetched whole either way
/// (its header's line for reading).
const PREFETCH_WRITE_SPAN: usize = 256;

impl RingWriter<'_, '_> {
    /// Puts the first of `frames` (at most [`GROUP`]) that each go whole into the next
    /// receive chain, that chain being one write-only buffer long enough; returns how many
    /// went in (all delivered, their used elements recorded). Stops before the first frame
    /// that does not, giving its chain back to the ring, for [`RingWriter::put`].
    pub(super) fn put_plain_group(&mut self, frames: &[TxFrame<'_>]) -> usize {
        if self.hdr_len != virtio_net::HEADER_LEN {
            return 0;
        }
        let prefetchw = self.ring.has_prefetchw();
        let mut heads = [0u16; GROUP];
        let mut buffers = [GuestBytes::EMPTY; GROUP];
        let mut found = 0;
        for ((f, head_slot), buffer_slot) in frames.iter().zip(&mut heads).zip(&mut buffers) {
            let len = f.len();
            if !(ethernet::HEADER_LEN..=MAX_FRAME_LEN).contains(&len)
                || !self.features.guest_may_receive(&f.offload)
            {
                break;
            }
            let total = virtio_net::HEADER_LEN + len;
            let Some(head) = self.cursor.next_head(&self.ring) else {
                break;
            };
            // One write-only buffer long enough, in one region.
            let Some(bytes) = self.one_buffer(head, total) else {
                self.cursor.back();
                break;
            };
            bytes.prefetch_receive(
                virtio_net::HEADER_LEN,
                total.min(PREFETCH_WRITE_SPAN),
                prefetchw,
            );
            *head_slot = head;
            *buffer_slot = bytes;
            found += 1;
        }
        // One descriptor a frame, less than its allowance: nothing to the budget
        // (`tx/budget.rs`), only to the count.
        self.descriptors += found;
        let mut done = 0;
        for (f, bytes) in frames.iter().zip(&buffers).take(found) {
            if !self.write_whole(bytes, f) {
                break;
            }
            done += 1;
        }
        // Chains found for frames not written go back, the first of them for `put`.
        for _ in done..found {
            self.cursor.back();
        }
        let used = heads.iter().zip(&buffers).take(done);
        self.used.extend(
            used.map(|(head, bytes)| (*head, u32::try_from(bytes.len()).unwrap_or(u32::MAX))),
        );
        self.delivered += done as u64;
        self.bytes += buffers
            .iter()
            .take(done)
            .map(|b| (b.len() - virtio_net::HEADER_LEN) as u64)
            .sum::<u64>();
        done
    }
}
