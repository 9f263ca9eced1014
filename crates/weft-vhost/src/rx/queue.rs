//! One guest transmit queue as the receive half serves it, and the frames of a batch.

use std::sync::Arc;
use std::time::Instant;

use virtio_queue::QueueT;
use vm_memory::{GuestAddress, VolatileSlice};
use weft_packet::{virtio_net, OffloadInfo, VirtioNetHeader};
use weft_switch::port::MAX_BATCH;
use weft_switch::{FrameHandle, RxBatch, RxDesc};

use crate::bounce::Bounce;
use crate::chain::{read_tx_chain, ChainError, FrameLoc, GuestPtr, TableRef};
use crate::config::MAX_QUEUE_PAIRS;
use crate::counters::{FrameDrop, QueueFault};
use crate::dispatch::Dispatch;
use crate::features::Features;
use crate::memory::GuardedMemory;
use crate::ring_access::{GuestView, SplitRing, PREFETCH_DISTANCE};
use crate::vring::{Vring, VringState};

use super::budget::Credit;
use super::plain_group::{GroupTarget, GROUP};

/// The offload state a guest's transmit header asks for, if it is well formed and asks
/// only for what the guest negotiated; the drop reason otherwise.
pub(super) fn admit_header(
    header: &[u8],
    frame_len: usize,
    features: Features,
) -> Result<OffloadInfo, FrameDrop> {
    if !features.guest_may_ask_offloads() {
        // The only header the guest may write says "no offload": whatever it wrote, the
        // frame is taken as it is (the group path does not even read the header).
        return Ok(OffloadInfo::default());
    }
    match VirtioNetHeader::new_unchecked(header).to_offload_info(frame_len) {
        Ok(info) if features.guest_may_send(&info) => Ok(info),
        Ok(_) => Err(FrameDrop::OffloadNotNegotiated),
        Err(e) => Err(FrameDrop::BadHeader(e)),
    }
}

/// The bytes of a lent frame copied into weft's memory: everything the switch reads to
/// decide (the Ethernet header and tags, IPv4 with any options or IPv6 with short extension
/// headers, and the L4 ports) lies within them; a frame whose headers reach further is
/// copied whole. The rest stays in the guest's memory as the frame's tail.
pub(crate) const SNAPSHOT_LEN: usize = 128;

/// Where the frames of the current batch are, whichever queue they came from.
pub(super) struct BatchFrames {
    /// Each frame handed to the switch (indexed by handle) and the queue it came from.
    pub(super) frames: Vec<(FrameLoc, usize)>,
    /// Lent frames' first [`SNAPSHOT_LEN`] bytes, frame `h` at `h * SNAPSHOT_LEN`.
    pub(super) snapshots: Vec<u8>,
    pub(super) bounce: Bounce,
    pub(super) lend: bool,
    /// Frames each queue put in this batch (for its batch-size histogram).
    pub(super) per_queue: [usize; MAX_QUEUE_PAIRS as usize],
    /// Descriptors the port may still read this `receive` (all its queues together).
    pub(super) credit: Credit,
}

/// The `len` bytes at `ptr` in guest memory.
///
/// # Safety
/// `ptr..ptr + len` must lie inside one mapped region of guest memory that stays mapped
/// for `'m`.
pub(crate) unsafe fn guest_slice<'m>(ptr: GuestPtr, len: usize) -> VolatileSlice<'m> {
    // SAFETY: the caller's promise: mapped for `'m`, so volatile access to it is sound
    // whatever the guest writes.
    unsafe { VolatileSlice::new(ptr.0.cast_mut(), len) }
}

impl BatchFrames {
    /// Room for a whole batch's snapshots, allocated once (zeroed pages: only the part a
    /// batch writes becomes resident).
    pub(super) fn snapshot_room() -> Vec<u8> {
        vec![0; MAX_BATCH * SNAPSHOT_LEN]
    }

    /// Hands a frame lying contiguous in guest memory (`len` bytes at `ptr`, inside one
    /// region of the memory of the queue at place `index`, which stays mapped until the
    /// batch is finished) to the switch's batch: its first [`SNAPSHOT_LEN`] bytes copied
    /// into weft's memory, the rest lent; the whole frame copied into the bounce buffer when
    /// the headers the switch reads reach past the snapshot. `Ok(Some(loc))`: in the batch,
    /// at `loc`; `Ok(None)` when the batch is full; `Err(NoRoom)` when the bounce buffer is,
    /// and the chain must wait for the next batch.
    #[inline(always)]
    pub(super) fn lend(
        &mut self,
        batch: &mut RxBatch,
        ptr: GuestPtr,
        len: usize,
        offload: OffloadInfo,
        index: usize,
    ) -> Result<Option<FrameLoc>, ChainError> {
        let Some(loc) = self.snapshot(self.frames.len(), ptr, len)? else {
            return Ok(None);
        };
        if self.push(batch, loc, offload, index) {
            return Ok(Some(loc));
        }
        if let FrameLoc::Bounce(start, _) = loc {
            self.bounce.truncate(start);
        }
        Ok(None)
    }

    /// The snapshot of the frame that will have handle `h` (see [`BatchFrames::lend`], whose
    /// promise the caller makes too): where the switch will find it, `None` past the batch's
    /// room, `Err(NoRoom)` when it must be copied whole and the bounce buffer is full.
    #[inline(always)]
    pub(super) fn snapshot(
        &mut self,
        h: usize,
        ptr: GuestPtr,
        len: usize,
    ) -> Result<Option<FrameLoc>, ChainError> {
        let at = h * SNAPSHOT_LEN;
        let taken = len.min(SNAPSHOT_LEN);
        let Some(slot) = self.snapshots.get_mut(at..at + taken) else {
            return Ok(None);
        };
        // SAFETY: `ptr..ptr + len` is mapped guest memory that stays mapped until the batch
        // is finished (the caller's promise), so its first `taken` bytes are readable; `slot`
        // is weft's own memory, `taken` bytes long, so the two do not overlap. A raw copy,
        // no reference formed: the guest may write meanwhile, and the snapshot is then
        // whatever the copy read — the bytes the switch decides on and delivers.
        unsafe { core::ptr::copy_nonoverlapping(ptr.0, slot.as_mut_ptr(), taken) };
        if len <= SNAPSHOT_LEN || weft_packet::FrameSummary::headers_fit(slot, len) {
            return Ok(Some(FrameLoc::Guest(ptr, len)));
        }
        let start = self.bounce.used();
        // SAFETY: as above.
        self.bounce.append(&unsafe { guest_slice(ptr, len) })?;
        Ok(Some(FrameLoc::Bounce(start, len)))
    }

    /// Hands the frame at `loc` (from the queue at place `index`) to the switch's batch
    /// with `offload`; false when the batch is full (the caller keeps within its room, so
    /// this is a frame to drop rather than lose).
    #[inline(always)]
    pub(super) fn push(
        &mut self,
        batch: &mut RxBatch,
        loc: FrameLoc,
        offload: OffloadInfo,
        index: usize,
    ) -> bool {
        let handle = u32::try_from(self.frames.len()).unwrap_or(u32::MAX);
        let desc = RxDesc {
            handle: FrameHandle(handle),
            offload,
        };
        let pushed = batch.push(desc).is_ok();
        if pushed {
            self.frames.push((loc, index));
        }
        pushed
    }
}

/// One guest transmit queue as the receive half serves it: its own batch, completions,
/// dispatch state and epoch, so that a broken or stopped queue stops only itself.
pub(super) struct RxQueue {
    /// The queue pair (the guest's transmit queue `2 × pair + 1`).
    pub(super) pair: usize,
    /// The guest memory the current batch's frames from this queue lie in: holding it
    /// keeps the mapping alive until `finish`, whatever the frontend does meanwhile.
    pub(super) mem: Option<Arc<GuardedMemory>>,
    /// Chains taken this batch, in order (dropped frames included).
    pub(super) heads: Vec<u16>,
    /// The ring epoch the batch was taken under.
    pub(super) epoch: u64,
    /// Chains finished but not yet returned (the control thread held the ring).
    pub(super) pending: Vec<u16>,
    pub(super) pending_epoch: u64,
    pub(super) dispatch: Dispatch,
    /// The ring was being served at the last look (a switch-driven port whose ring is
    /// stopped needs no polling).
    pub(super) ring_live: bool,
}

impl RxQueue {
    pub(super) fn retire_batch(&mut self) {
        if !self.heads.is_empty() {
            if self.pending_epoch != self.epoch {
                self.pending.clear();
            }
            self.pending.append(&mut self.heads);
            self.pending_epoch = self.epoch;
        }
    }

    /// Returns finished chains to the used ring, if they belong to the ring as it is now.
    pub(super) fn complete_pending(&mut self, vring: &Vring, st: &mut VringState, now: Instant) {
        if self.pending.is_empty() {
            return;
        }
        if self.pending_epoch != st.epoch || !st.running {
            // The frontend stopped the ring meanwhile; the next start reads them again.
            self.pending.clear();
            return;
        }
        let Some(mem) = st.mem.clone() else {
            self.pending.clear();
            return;
        };
        // With the optimistic policy the first completion is made visible alone and the
        // guest asked early; then the rest, all with one used-index store.
        let early = usize::from(st.notifier.early());
        let entries = |range: std::ops::Range<usize>| {
            self.pending
                .get(range)
                .unwrap_or_default()
                .iter()
                .map(|head| (*head, 0u32))
        };
        let mut fault = None;
        let mut published = 0usize;
        if early > 0 {
            match st.publish_used(&mem, entries(0..1)) {
                Ok(n) => published = n,
                Err(n) => {
                    published = n;
                    fault = Some(QueueFault::RingInaccessible);
                }
            }
            if published > 0 {
                vring.first_visible(st, now);
            }
        }
        if fault.is_none() {
            match st.publish_used(&mem, entries(early..self.pending.len())) {
                Ok(n) => published += n,
                Err(n) => {
                    published += n;
                    fault = Some(QueueFault::RingInaccessible);
                }
            }
        }
        let done = u16::try_from(published).unwrap_or(u16::MAX);
        self.pending.clear();
        st.in_flight = st.in_flight.saturating_sub(done);
        if let Some(f) = fault {
            st.fault(f, &vring.counters, vring.name);
        }
        let after_early = if st.notifier.early() {
            done.saturating_sub(1)
        } else {
            done
        };
        // Completions carry no bytes: the density of transmit completions is theirs alone.
        vring.burst_done(st, now, u64::from(after_early), 0);
    }

    /// Takes up to `limit` chains into the batch; returns how many chains were taken.
    /// `index` is this queue's place in the receive half (recorded with each frame).
    pub(super) fn take_chains(
        &mut self,
        vring: &Vring,
        st: &mut VringState,
        frames: &mut BatchFrames,
        batch: &mut RxBatch,
        index: usize,
        limit: usize,
    ) -> usize {
        let Some(mem) = self.mem.clone() else {
            return 0;
        };
        let counters = &vring.counters;
        let hdr_len = st.features.header_len();
        let features = st.features;
        let table = TableRef {
            desc_table: GuestAddress(st.queue.desc_table()),
            size: st.queue.size(),
        };
        let mut fault = None;
        let mut last_drop = None;
        let (mut taken, mut bytes, mut lent, mut bounced) = (0usize, 0u64, 0u64, 0u64);
        let extra_before = frames.credit.extra_read();
        let view = GuestView::new(&mem);
        let cursor = SplitRing::new(&view, &st.queue)
            .ok_or(QueueFault::RingInaccessible)
            .and_then(|ring| Ok((ring.cursor(st.queue.next_avail())?, ring)));
        match cursor {
            Err(f) => fault = Some(f),
            Ok((mut cursor, ring)) => {
                // Room in the batch (taken by frames) and for chains (taken by frames and
                // drops alike), counted here rather than asked of both every time.
                let mut room = batch.room();
                let limit = limit.min(MAX_BATCH.saturating_sub(self.heads.len()));
                let plain_groups = frames.lend && hdr_len == virtio_net::HEADER_LEN;
                while room > 0 && taken < limit && !frames.credit.exhausted() {
                    if plain_groups {
                        // One descriptor a chain: free of the budget.
                        let want = room.min(limit - taken).min(GROUP);
                        let mut to = GroupTarget {
                            frames: &mut *frames,
                            batch: &mut *batch,
                            index,
                            features,
                        };
                        let group = self.take_plain_group(
                            &ring,
                            &view,
                            &mut cursor,
                            &mut to,
                            want,
                            counters,
                        );
                        taken += group.chains;
                        room -= group.frames;
                        bytes += group.bytes;
                        lent += (group.frames - group.bounced) as u64;
                        bounced += group.bounced as u64;
                        last_drop = group.last_drop.or(last_drop);
                        if !group.stopped {
                            // The group took all it could: the ring is empty, or more
                            // groups follow.
                            if group.chains == 0 {
                                break;
                            }
                            continue;
                        }
                        if room == 0 || taken >= limit || frames.credit.exhausted() {
                            break;
                        }
                    }
                    ring.prefetch_ahead(
                        &view,
                        &cursor,
                        PREFETCH_DISTANCE,
                        hdr_len + weft_packet::ethernet::HEADER_LEN,
                        None,
                    );
                    let Some(head) = cursor.next_head(&ring) else {
                        break;
                    };
                    taken += 1;
                    self.heads.push(head);
                    let mut chain = ring.chain(&view, head);
                    let read =
                        read_tx_chain(&mut chain, table, hdr_len, &mut frames.bounce, frames.lend);
                    frames.credit.spend(chain.descriptors_read());
                    let read = match read {
                        Ok(read) => read,
                        Err(ChainError::NoRoom) => {
                            cursor.back();
                            taken -= 1;
                            frames.credit.read_not_taken();
                            self.heads.pop();
                            break;
                        }
                        Err(ChainError::Fault(f)) => {
                            // The chain is not returned: the ring is broken anyway.
                            taken -= 1;
                            frames.credit.read_not_taken();
                            self.heads.pop();
                            fault = Some(f);
                            break;
                        }
                        Err(ChainError::Drop(reason)) => {
                            counters.dropped(reason);
                            last_drop = Some(reason);
                            continue;
                        }
                    };
                    let header = read.header.get(..hdr_len).unwrap_or(&read.header);
                    let pushed =
                        admit_header(header, read.len, features).map(|info| match read.loc {
                            FrameLoc::Guest(ptr, len) => frames.lend(batch, ptr, len, info, index),
                            loc => Ok(frames.push(batch, loc, info, index).then_some(loc)),
                        });
                    let refused = match pushed {
                        Ok(Ok(Some(loc))) => {
                            room -= 1;
                            bytes += read.len as u64;
                            match loc {
                                FrameLoc::Guest(..) => lent += 1,
                                FrameLoc::Bounce(..) => bounced += 1,
                            }
                            None
                        }
                        // Cannot happen (room was checked): drop rather than lose it.
                        Ok(Ok(None)) => Some(FrameDrop::FrameTooShort),
                        Ok(Err(_)) => {
                            // No room to copy its headers: the chain waits for the next batch.
                            cursor.back();
                            taken -= 1;
                            frames.credit.read_not_taken();
                            self.heads.pop();
                            break;
                        }
                        Err(reason) => Some(reason),
                    };
                    if let Some(reason) = refused {
                        if let FrameLoc::Bounce(start, _) = read.loc {
                            frames.bounce.truncate(start);
                        }
                        counters.dropped(reason);
                        last_drop = Some(reason);
                    }
                }
                if frames.credit.exhausted() && cursor.has_more() && fault.is_none() {
                    frames.credit.mark_cut();
                    counters.budget_cut();
                }
                st.queue.set_next_avail(cursor.position());
            }
        }
        // Every chain taken read its first descriptor; the rest was counted as it was read.
        counters.add_descriptors(taken as u64 + (frames.credit.extra_read() - extra_before));
        let taken_u16 = u16::try_from(taken).unwrap_or(u16::MAX);
        st.in_flight = st.in_flight.saturating_add(taken_u16);
        counters.add_frames(lent + bounced, bytes);
        counters.add_lent(lent, bounced);
        if let Some(reason) = last_drop {
            // Counted above; this only logs (rate-limited).
            st.log_drop(reason, vring.name);
        }
        if let Some(f) = fault {
            st.fault(f, counters, vring.name);
        }
        taken
    }
}
