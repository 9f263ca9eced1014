//! The port's receive half: frames the guest transmits (its transmit queue), lent to the
//! switch for one batch and returned to the guest in `finish`.
//!
//! Guest kicks follow the dispatch mode (`dispatch.rs`). Guest-driven: while chains keep
//! coming the guest is asked not to kick (the worker is polling anyway); on the first empty
//! poll the kick counter is drained, kicks are re-enabled and the ring looked at once more,
//! so that a worker going to sleep on the port's readiness descriptor is woken by the
//! guest's next kick. Draining happens only on that busy-to-idle transition: one system
//! call per burst, none per poll. Switch-driven: kicks stay off even when idle and the port
//! asks its worker to keep polling ([`PortRx::needs_polling`]); adaptive dispatch leaving
//! switch-driven mode goes through the same drain, re-enable and look again.
//!
//! Each `receive` is also the worker's look at the port that sends notifications the
//! policy held back (`notify.rs`), on both queues.

use std::sync::Arc;
use std::time::Instant;

use virtio_queue::{Error as QueueError, QueueOwnedT, QueueT};
use vm_memory::{GuestAddress, GuestMemoryMmap};
use weft_packet::VirtioNetHeader;
use weft_switch::port::MAX_BATCH;
use weft_switch::{FrameHandle, PortRx, RxBatch, RxDesc};

use crate::bounce::Bounce;
use crate::chain::{read_tx_chain, ChainError, FrameLoc, TableRef};
use crate::counters::{FrameDrop, QueueFault};
use crate::device::DeviceShared;
use crate::dispatch::{Dispatch, Driven};
use crate::fds::drain;
use crate::vring::{VringState, TX_QUEUE};

/// The receive half of a vhost-user port (see the module documentation).
pub struct VhostPortRx {
    dev: Arc<DeviceShared>,
    /// The guest memory the current batch's frames lie in: holding it keeps the mapping
    /// alive until `finish`, whatever the frontend does meanwhile.
    mem: Option<Arc<GuestMemoryMmap>>,
    /// Chains taken this batch, in order (dropped frames included).
    heads: Vec<u16>,
    /// Where each frame handed to the switch is (indexed by handle).
    frames: Vec<FrameLoc>,
    /// The ring epoch the batch was taken under.
    epoch: u64,
    /// Chains finished but not yet returned (the control thread held the ring).
    pending: Vec<u16>,
    pending_epoch: u64,
    bounce: Bounce,
    lend: bool,
    dispatch: Dispatch,
    /// The ring was being served at the last look (a switch-driven port whose ring is
    /// stopped needs no polling).
    ring_live: bool,
}

impl std::fmt::Debug for VhostPortRx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VhostPortRx")
            .field("in_batch", &self.heads.len())
            .field("pending", &self.pending.len())
            .finish()
    }
}

impl VhostPortRx {
    pub(crate) fn new(dev: Arc<DeviceShared>) -> Self {
        let lend = dev.config.lend_guest_memory;
        let bounce = Bounce::new(dev.config.effective_bounce_limit());
        dev.tx_vring().set_notify_policy(dev.config.notify);
        let dispatch = Dispatch::new(dev.config.dispatch);
        VhostPortRx {
            dev,
            mem: None,
            heads: Vec::with_capacity(MAX_BATCH),
            frames: Vec::with_capacity(MAX_BATCH),
            epoch: 0,
            pending: Vec::with_capacity(2 * MAX_BATCH),
            pending_epoch: 0,
            bounce,
            lend,
            dispatch,
            ring_live: false,
        }
    }

    /// The batch is over: its frames are forgotten and its chains wait to be returned
    /// (those of an older epoch are forgotten too).
    fn retire_batch(&mut self) {
        self.frames.clear();
        self.bounce.reset();
        if !self.heads.is_empty() {
            if self.pending_epoch != self.epoch {
                self.pending.clear();
            }
            self.pending.append(&mut self.heads);
            self.pending_epoch = self.epoch;
        }
    }

    /// Returns finished chains to the used ring, if they belong to the ring as it is now.
    fn complete_pending(&mut self, st: &mut VringState, now: Instant) {
        if self.pending.is_empty() {
            return;
        }
        let counters = &self.dev.tx_vring().counters;
        if self.pending_epoch != st.epoch || !st.running {
            // The frontend stopped the ring meanwhile; the next start reads them again.
            self.pending.clear();
            return;
        }
        let Some(mem) = st.mem.clone() else {
            self.pending.clear();
            return;
        };
        let vring = self.dev.tx_vring();
        let mut fault = None;
        let mut done: u16 = 0;
        for head in self.pending.drain(..) {
            if st.queue.add_used(&*mem, head, 0).is_err() {
                fault = Some(QueueFault::RingInaccessible);
                break;
            }
            done = done.wrapping_add(1);
            if done == 1 {
                // Optimistic policy: the first completion is visible, ask early.
                vring.first_visible(st, now);
            }
        }
        self.pending.clear();
        st.in_flight = st.in_flight.saturating_sub(done);
        if let Some(f) = fault {
            st.fault(f, counters, "tx");
        }
        let after_early = if st.notifier.early() {
            done.saturating_sub(1)
        } else {
            done
        };
        // Completions carry no bytes: the density of transmit completions is theirs alone.
        vring.burst_done(st, now, u64::from(after_early), 0);
    }

    /// Takes chains into the batch; returns how many chains were taken.
    fn take_chains(&mut self, st: &mut VringState, batch: &mut RxBatch) -> usize {
        let Some(mem) = self.mem.clone() else {
            return 0;
        };
        let counters = &self.dev.tx_vring().counters;
        let hdr_len = st.features.header_len();
        let features = st.features;
        let table = TableRef {
            desc_table: GuestAddress(st.queue.desc_table()),
            size: st.queue.size(),
        };
        let mut fault = None;
        let mut last_drop = None;
        let (mut taken, mut bytes, mut lent, mut bounced) = (0usize, 0u64, 0u64, 0u64);
        match st.queue.iter(&*mem) {
            Err(e) => {
                fault = Some(match e {
                    QueueError::InvalidAvailRingIndex => QueueFault::AvailIndexOutOfRange,
                    _ => QueueFault::RingInaccessible,
                });
            }
            Ok(mut iter) => {
                while batch.room() > 0 && self.heads.len() < MAX_BATCH {
                    let Some(chain) = iter.next() else {
                        break;
                    };
                    let head = chain.head_index();
                    let read =
                        read_tx_chain(chain, &mem, table, hdr_len, &mut self.bounce, self.lend);
                    let read = match read {
                        Ok(read) => read,
                        Err(ChainError::NoRoom) => {
                            iter.go_to_previous_position();
                            break;
                        }
                        Err(ChainError::Fault(f)) => {
                            // The chain is not returned: the ring is broken anyway.
                            fault = Some(f);
                            break;
                        }
                        Err(ChainError::Drop(reason)) => {
                            counters.dropped(reason);
                            last_drop = Some(reason);
                            self.heads.push(head);
                            taken += 1;
                            continue;
                        }
                    };
                    taken += 1;
                    self.heads.push(head);
                    let header = VirtioNetHeader::new_unchecked(
                        read.header.get(..hdr_len).unwrap_or(&read.header),
                    );
                    let refused = match header.to_offload_info(read.len) {
                        Ok(info) if features.guest_may_send(&info) => {
                            let handle = u32::try_from(self.frames.len()).unwrap_or(u32::MAX);
                            let desc = RxDesc {
                                handle: FrameHandle(handle),
                                offload: info,
                            };
                            if batch.push(desc).is_ok() {
                                self.frames.push(read.loc);
                                bytes += read.len as u64;
                                match read.loc {
                                    FrameLoc::Guest(..) => lent += 1,
                                    FrameLoc::Bounce(..) => bounced += 1,
                                }
                                None
                            } else {
                                // Cannot happen (room was checked): drop rather than lose it.
                                Some(FrameDrop::FrameTooShort)
                            }
                        }
                        Ok(_) => Some(FrameDrop::OffloadNotNegotiated),
                        Err(e) => Some(FrameDrop::BadHeader(e)),
                    };
                    if let Some(reason) = refused {
                        if let FrameLoc::Bounce(start, _) = read.loc {
                            self.bounce.truncate(start);
                        }
                        counters.dropped(reason);
                        last_drop = Some(reason);
                    }
                }
            }
        }
        let taken_u16 = u16::try_from(taken).unwrap_or(u16::MAX);
        st.in_flight = st.in_flight.saturating_add(taken_u16);
        counters.add_frames(lent + bounced, bytes);
        counters.add_lent(lent, bounced);
        if let Some(reason) = last_drop {
            // Counted above; this only logs (rate-limited).
            st.log_drop(reason, "tx");
        }
        if let Some(f) = fault {
            st.fault(f, counters, "tx");
        }
        taken
    }
}

impl Drop for VhostPortRx {
    /// Gives the guest back the chains of an unfinished batch, so that removing the port
    /// from a switch does not leak the guest's transmit buffers. Waits for the ring's lock
    /// (held by the control thread for a moment at most).
    fn drop(&mut self) {
        self.retire_batch();
        if self.pending.is_empty() {
            return;
        }
        let dev = Arc::clone(&self.dev);
        let mut st = dev.tx_vring().lock();
        self.complete_pending(&mut st, Instant::now());
    }
}

impl PortRx for VhostPortRx {
    fn receive(&mut self, batch: &mut RxBatch) {
        if !self.heads.is_empty() {
            // The caller skipped `finish`: return the last batch before lending more.
            self.finish();
        }
        let dev = Arc::clone(&self.dev);
        let now = Instant::now();
        // The worker's look at the port: notifications held back toward the guest.
        dev.rx_vring().tick(now);
        let Some(mut st) = dev.tx_vring().try_lock() else {
            return;
        };
        self.complete_pending(&mut st, now);
        dev.tx_vring().tick_locked(&mut st, now);
        if !st.serving() {
            self.mem = None;
            // Nothing to poll until the frontend starts the ring again (which wakes the
            // worker through the kick descriptor); adaptive dispatch starts over.
            self.ring_live = false;
            self.dispatch.restart();
            if st.fault.is_some() && st.kick.is_some() {
                // A broken ring is not read again until restarted: stop watching its kicks,
                // or a guest kicking it would keep waking the worker.
                dev.replace_kick(TX_QUEUE, &mut st, None);
            } else if let Some(kick) = &st.kick {
                // Started but disabled: a pending kick would keep an idle worker awake.
                drain(kick);
            }
            return;
        }
        match (&self.mem, &st.mem) {
            (Some(mine), Some(cur)) if Arc::ptr_eq(mine, cur) => {}
            (_, cur) => self.mem = cur.clone(),
        }
        self.epoch = st.epoch;
        self.ring_live = true;
        let taken = self.take_chains(&mut st, batch);
        let Some(mem) = self.mem.clone() else {
            return;
        };
        let (driven, changed) = self.dispatch.observe(now, taken);
        if changed {
            dev.tx_vring().counters.dispatch_changed();
        }
        if driven == Driven::Switch || taken > 0 {
            // Switch-driven: never ask for kicks. Guest-driven: not while chains keep
            // coming (the worker is here anyway).
            let held_off = if driven == Driven::Switch {
                // Rewritten at every batch that moved the ring (see `hold_off_kicks`).
                (st.guest_kicks != Some(false) || taken > 0).then(|| st.hold_off_kicks(&mem))
            } else {
                // With EVENT_IDX this writes nothing: not moving avail_event is enough
                // for the short while until the next empty poll.
                (st.guest_kicks != Some(false))
                    .then(|| st.queue.disable_notification(&*mem).map_err(|_| ()))
            };
            match held_off {
                Some(Err(())) => {
                    st.fault(QueueFault::RingInaccessible, &dev.tx_vring().counters, "tx");
                }
                Some(Ok(())) => st.guest_kicks = Some(false),
                None => {}
            }
        } else if st.serving() {
            // Guest-driven and idle. Drain first — also when kicks are on already: a kick
            // for chains an earlier look took would keep an idle worker's epoll awake —
            // then (re-)arm and look again: a kick that arrives after the look is for
            // chains the next receive will see, and chains that came before it are taken
            // now rather than waiting for a kick the guest, seeing kicks off, never sent.
            if let Some(kick) = &st.kick {
                let kicks = kick.read().unwrap_or(0);
                if kicks > 0 {
                    dev.tx_vring().counters.kick_drained();
                    dev.tx_vring().counters.kicks_received(kicks);
                }
            }
            if st.guest_kicks != Some(true) {
                match st.queue.enable_notification(&*mem) {
                    Ok(true) => {
                        // With EVENT_IDX the guest kicks when it passes the index just
                        // armed; taking chains beyond it would leave the guest past it
                        // for good. Arm again at the next empty look.
                        self.take_chains(&mut st, batch);
                        st.guest_kicks = Some(false);
                    }
                    Ok(false) => st.guest_kicks = Some(true),
                    Err(_) => {
                        st.fault(QueueFault::RingInaccessible, &dev.tx_vring().counters, "tx");
                    }
                }
            }
        }
        dev.tx_vring().counters.batch(batch.len() as u64);
    }

    fn frame(&self, handle: FrameHandle) -> &[u8] {
        match self.frames.get(handle.0 as usize) {
            Some(FrameLoc::Guest(ptr, len)) if self.mem.is_some() => {
                // SAFETY: `ptr..ptr + len` is one slice of a region of `self.mem`, found by
                // the bounds-checked memory map walk of this batch (`read_tx_chain`), so it
                // is mapped, readable and at most MAX_FRAME_LEN (< isize::MAX) long, and u8
                // needs no alignment. `self.mem` keeps the mapping alive and changes only in
                // `receive` and `finish`, which take `&mut self` and so cannot run while the
                // returned slice (borrowing `self`) lives.
                //
                // Accepted hazard: the guest owns this memory and may write it while the
                // switch reads it (a guest breaking the virtio rule that it must not touch
                // buffers it made available). Under Rust's model that is a data race on a
                // shared reference. Its consequences are confined to this frame's values:
                // the switch reads every header field once into its own flow key and takes
                // its decision from that snapshot, all indexing is bounds-checked against
                // lengths kept in our memory, and the bytes delivered may then differ from
                // those classified — as if the guest had sent another frame. A deployment
                // whose flow rules must hold against such a guest turns
                // `VhostPortConfig::lend_guest_memory` off, and every frame is copied first.
                unsafe { std::slice::from_raw_parts(ptr.0, *len) }
            }
            Some(FrameLoc::Bounce(start, len)) => self.bounce.get(*start, *len),
            _ => &[],
        }
    }

    fn finish(&mut self) {
        self.retire_batch();
        if self.pending.is_empty() {
            return;
        }
        let dev = Arc::clone(&self.dev);
        let locked = dev.tx_vring().try_lock();
        if let Some(mut st) = locked {
            self.complete_pending(&mut st, Instant::now());
        }
    }

    fn readiness_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.dev.readiness_fd())
    }

    /// True while switch-driven (the guest does not kick, so the readiness descriptor
    /// stays quiet) or while a notification toward the guest is held back (only a look at
    /// the port sends it).
    fn needs_polling(&self) -> bool {
        (self.ring_live && self.dispatch.driven() == Driven::Switch)
            || self.dev.rx_vring().notify_pending()
            || self.dev.tx_vring().notify_pending()
    }
}

#[cfg(test)]
mod tests;
