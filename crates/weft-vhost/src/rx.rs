//! The port's receive half: frames the guest transmits (its transmit queues, one per queue
//! pair), lent to the switch for one batch and returned to the guest in `finish`.
//!
//! Several queue pairs (`VIRTIO_NET_F_MQ`): one batch is shared among the transmit queues,
//! each looked at in turn (the first one rotating from batch to batch) and allowed an equal
//! share of the room still left. Each queue keeps its own chains, completions, epoch,
//! dispatch mode and fault: a broken or stopped queue stops only itself.
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
//! policy held back (`notify.rs`), on every queue.

use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use virtio_queue::QueueT;
use vm_memory::VolatileSlice;
use vmm_sys_util::epoll::Epoll;
use weft_packet::OffloadInfo;
use weft_switch::port::MAX_BATCH;
use weft_switch::{FrameHandle, PortRx, RxBatch, RxFrame, SharedTail};

use crate::bounce::Bounce;
use crate::chain::{FrameLoc, GuestPtr};
use crate::config::MAX_QUEUE_PAIRS;
use crate::counters::QueueFault;
use crate::device::{DeviceShared, LaneShare};
use crate::dispatch::{Dispatch, Driven};
use crate::error::VhostError;
use crate::fds::drain;
use crate::vring::Vring;

#[cfg(any(test, fuzzing))]
pub(crate) use budget::quantum as receive_quantum;
use budget::Credit;
pub(crate) use queue::SNAPSHOT_LEN;
use queue::{guest_slice, BatchFrames, RxQueue};

/// The receive half of a vhost-user port (see the module documentation).
pub struct VhostPortRx {
    dev: Arc<DeviceShared>,
    /// One per queue pair this half serves (all, or its lane's share): the guest's
    /// transmit queues.
    queues: Vec<RxQueue>,
    /// Readable when one of those queues is kicked.
    readiness: Epoll,
    batch: BatchFrames,
    /// The queue the next `receive` looks at first (round robin, so that no queue always
    /// gets the room the others left).
    next_first: usize,
}

impl std::fmt::Debug for VhostPortRx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VhostPortRx")
            .field("queue_pairs", &self.queues.len())
            .field("in_batch", &self.batch.frames.len())
            .finish()
    }
}

impl VhostPortRx {
    pub(crate) fn new(dev: Arc<DeviceShared>, lane: LaneShare) -> Result<Self, VhostError> {
        let batch = BatchFrames {
            frames: Vec::with_capacity(MAX_BATCH),
            snapshots: BatchFrames::snapshot_room(),
            bounce: Bounce::new(dev.config.effective_bounce_limit()),
            lend: dev.config.lend_guest_memory,
            per_queue: [0; MAX_QUEUE_PAIRS as usize],
            credit: Credit::default(),
        };
        let queues = (0..dev.queue_pairs())
            .filter(|pair| lane.owns(*pair))
            .map(|pair| {
                if let Some(v) = dev.tx_vring_of(pair) {
                    v.set_notify_policy(dev.config.notify);
                }
                RxQueue {
                    pair,
                    mem: None,
                    heads: Vec::with_capacity(MAX_BATCH),
                    epoch: 0,
                    pending: Vec::with_capacity(2 * MAX_BATCH),
                    pending_epoch: 0,
                    dispatch: Dispatch::new(dev.config.dispatch),
                    ring_live: false,
                }
            })
            .collect();
        Ok(VhostPortRx {
            readiness: dev.lane_readiness(lane)?,
            dev,
            queues,
            batch,
            next_first: 0,
        })
    }

    /// Puts the announcement of a guest that moved here (`SEND_RARP`) first in the batch, as
    /// though the guest had sent it: the switch learns its MAC on this port at once and
    /// floods the broadcast on, across the overlay too, so every switch moves it.
    fn push_announcement(&mut self, batch: &mut RxBatch, mac: [u8; 6]) {
        let mut frame = weft_packet::arp::rarp_announcement(weft_packet::MacAddr(mac));
        let start = self.batch.bounce.used();
        let loc = FrameLoc::Bounce(start, frame.len());
        let pushed = self
            .batch
            .bounce
            .append(&VolatileSlice::from(&mut frame[..]))
            .is_ok()
            && self.batch.push(batch, loc, OffloadInfo::default(), 0);
        if pushed {
            self.dev.announcements.fetch_add(1, Ordering::Relaxed);
        } else {
            self.batch.bounce.truncate(start);
        }
    }

    /// The batch is over: its frames are forgotten and its chains wait to be returned
    /// (those of an older epoch are forgotten too).
    fn retire_batch(&mut self) {
        self.batch.frames.clear();
        self.batch.bounce.reset();
        for q in &mut self.queues {
            q.retire_batch();
        }
    }

    /// Looks at pair `index`'s transmit queue: completions, held-back notifications, up to
    /// `limit` chains into the batch, and kicks as its dispatch mode says. True when the
    /// queue took its whole share (it may have more).
    fn receive_queue(
        &mut self,
        dev: &DeviceShared,
        index: usize,
        batch: &mut RxBatch,
        limit: usize,
        now: Instant,
    ) -> bool {
        let Some(q) = self.queues.get_mut(index) else {
            return false;
        };
        let (Some(vring), Some(rx_vring)) = (dev.tx_vring_of(q.pair), dev.rx_vring_of(q.pair))
        else {
            return false;
        };
        // The worker's look at the port: notifications held back toward the guest.
        rx_vring.tick(now);
        let Some(mut st) = vring.try_lock() else {
            return false;
        };
        st.check_memory(&vring.counters, vring.name);
        q.complete_pending(vring, &mut st, now);
        vring.tick_locked(&mut st, now);
        if !st.serving() {
            q.mem = None;
            // Nothing to poll until the frontend starts the ring again (which wakes the
            // worker through the kick descriptor); adaptive dispatch starts over.
            q.ring_live = false;
            q.dispatch.restart();
            if st.fault.is_some() && st.kick.is_some() {
                // A broken ring is not read again until restarted: stop watching its kicks,
                // or a guest kicking it would keep waking the worker.
                dev.replace_kick(2 * q.pair + 1, &mut st, None);
            } else if let Some(kick) = &st.kick {
                // Started but disabled: a pending kick would keep an idle worker awake.
                drain(kick);
            }
            return false;
        }
        if limit == 0 {
            // The batch is full: this queue's turn comes first next time.
            return false;
        }
        if self.batch.credit.exhausted() {
            // The port's descriptor budget is spent (or in debt): its chains wait for a
            // later poll, which must come without a kick.
            self.batch.credit.mark_cut();
            return false;
        }
        match (&q.mem, &st.mem) {
            (Some(mine), Some(cur)) if Arc::ptr_eq(mine, cur) => {}
            (_, cur) => q.mem = cur.clone(),
        }
        q.epoch = st.epoch;
        q.ring_live = true;
        let before = batch.len();
        let taken = q.take_chains(vring, &mut st, &mut self.batch, batch, index, limit);
        let Some(mem) = q.mem.clone() else {
            return false;
        };
        let (driven, changed) = q.dispatch.observe(now, taken);
        if changed {
            vring.counters.dispatch_changed();
        }
        if driven == Driven::Switch || taken > 0 {
            // Switch-driven: never ask for kicks. Guest-driven: not while chains keep
            // coming (the worker is here anyway).
            let held_off = if driven == Driven::Switch {
                st.hold_off_due(taken).then(|| st.hold_off_kicks(&mem))
            } else {
                // With EVENT_IDX this writes nothing: not moving avail_event is enough
                // for the short while until the next empty poll.
                (st.guest_kicks != Some(false)).then(|| {
                    let stored = st.queue.disable_notification(&*mem).map_err(|_| ());
                    st.log_kick_state();
                    stored
                })
            };
            match held_off {
                Some(Err(())) => {
                    st.fault(QueueFault::RingInaccessible, &vring.counters, vring.name);
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
                    vring.counters.kick_drained();
                    vring.counters.kicks_received(kicks);
                }
            }
            if st.guest_kicks != Some(true) {
                let enabled = st.queue.enable_notification(&*mem);
                st.log_kick_state();
                match enabled {
                    Ok(true) => {
                        // With EVENT_IDX the guest kicks when it passes the index just
                        // armed; taking chains beyond it would leave the guest past it
                        // for good (kicks off, in effect). Arm again at the next empty
                        // look. Without it, the flag just cleared leaves kicks on.
                        q.take_chains(vring, &mut st, &mut self.batch, batch, index, limit);
                        st.guest_kicks = Some(!st.queue.event_idx_enabled());
                    }
                    Ok(false) => st.guest_kicks = Some(true),
                    Err(_) => {
                        st.fault(QueueFault::RingInaccessible, &vring.counters, vring.name);
                    }
                }
            }
        }
        if let Some(n) = self.batch.per_queue.get_mut(index) {
            *n = batch.len() - before;
        }
        taken >= limit
    }

    /// Gives pair `index`'s transmit queue, busy at its first look this batch, up to `limit`
    /// more chains of the room the others left.
    fn top_up(&mut self, dev: &DeviceShared, index: usize, batch: &mut RxBatch, limit: usize) {
        let Some(q) = self.queues.get_mut(index) else {
            return;
        };
        let Some(vring) = dev.tx_vring_of(q.pair) else {
            return;
        };
        let Some(mut st) = vring.try_lock() else {
            return;
        };
        let same_mem = match (&q.mem, &st.mem) {
            (Some(mine), Some(cur)) => Arc::ptr_eq(mine, cur),
            _ => false,
        };
        if st.serving() && st.epoch == q.epoch && same_mem {
            let before = batch.len();
            q.take_chains(vring, &mut st, &mut self.batch, batch, index, limit);
            if let Some(n) = self.batch.per_queue.get_mut(index) {
                *n += batch.len() - before;
            }
        }
    }
}

impl Drop for VhostPortRx {
    /// Gives the guest back the chains of an unfinished batch, so that removing the port
    /// from a switch does not leak the guest's transmit buffers. Waits for each ring's lock
    /// (held by the control thread for a moment at most).
    fn drop(&mut self) {
        self.retire_batch();
        let dev = Arc::clone(&self.dev);
        let now = Instant::now();
        for q in &mut self.queues {
            if q.pending.is_empty() {
                continue;
            }
            if let Some(vring) = dev.tx_vring_of(q.pair) {
                let mut st = vring.lock();
                q.complete_pending(vring, &mut st, now);
            }
        }
    }
}

/// Chains the queue looked at `step`-th of `queues` may take when `room` is left: an equal
/// share of what is left, so that room an idle queue leaves goes to the ones after it.
fn share(room: usize, queues: usize, step: usize) -> usize {
    let left = queues.saturating_sub(step).max(1);
    room.div_ceil(left)
}

impl PortRx for VhostPortRx {
    fn receive(&mut self, batch: &mut RxBatch) {
        if self.queues.iter().any(|q| !q.heads.is_empty()) {
            // The caller skipped `finish`: return the last batch before lending more.
            self.finish();
        }
        let dev = Arc::clone(&self.dev);
        if let Some(mac) = dev.take_announce() {
            self.push_announcement(batch, mac);
        }
        let now = Instant::now();
        let n = self.queues.len();
        let first = self.next_first;
        self.next_first = if first + 1 >= n { 0 } else { first + 1 };
        self.batch.per_queue = [0; MAX_QUEUE_PAIRS as usize];
        self.batch.credit.refill(batch.room());
        let mut busy = [false; MAX_QUEUE_PAIRS as usize];
        for step in 0..n {
            let index = (first + step) % n;
            let limit = share(batch.room(), n, step);
            let filled = self.receive_queue(&dev, index, batch, limit, now);
            if let Some(b) = busy.get_mut(index) {
                *b = filled;
            }
        }
        // Room idle queues left goes to the busy ones, shared the same way.
        let busy_count = busy.iter().filter(|b| **b).count();
        let mut step = 0;
        for index in (0..n).map(|s| (first + s) % n) {
            if batch.room() == 0 {
                break;
            }
            if busy.get(index).copied().unwrap_or(false) {
                let limit = share(batch.room(), busy_count, step);
                self.top_up(&dev, index, batch, limit);
                step += 1;
            }
        }
        for (q, frames) in self.queues.iter().zip(self.batch.per_queue) {
            if let Some(vring) = dev.tx_vring_of(q.pair) {
                vring.counters.batch(frames as u64);
            }
        }
    }

    fn frame(&self, handle: FrameHandle) -> RxFrame<'_> {
        let h = handle.0 as usize;
        match self.batch.frames.get(h) {
            // The usual short frame: its snapshot is all of it.
            Some((FrameLoc::Guest(_, len), _)) if *len <= SNAPSHOT_LEN => {
                let at = h * SNAPSHOT_LEN;
                RxFrame::local(self.batch.snapshots.get(at..at + len).unwrap_or(&[]))
            }
            Some((FrameLoc::Guest(ptr, len), queue))
                if self.queues.get(*queue).is_some_and(|q| q.mem.is_some()) =>
            {
                let at = h * SNAPSHOT_LEN;
                let head = self
                    .batch
                    .snapshots
                    .get(at..at + SNAPSHOT_LEN)
                    .unwrap_or(&[]);
                // SAFETY: `ptr..ptr + len` is one slice of a region of the memory of the
                // queue the frame came from (`q.mem`), found by the bounds-checked memory
                // map walk of this batch, so `ptr + SNAPSHOT_LEN..ptr + len` is too. `q.mem`
                // keeps the mapping alive and changes only in `receive` and `finish`, which
                // take `&mut self` and so cannot run while the returned frame (borrowing
                // `self`) lives. The guest may write these bytes meanwhile: they are only
                // ever copied (volatile access, or an iovec the kernel copies from), never
                // read to decide — the switch decides on the snapshot (`head`), which holds
                // every header it reads (`BatchFrames::lend`).
                let tail = unsafe {
                    guest_slice(
                        GuestPtr(ptr.0.wrapping_add(SNAPSHOT_LEN)),
                        len - SNAPSHOT_LEN,
                    )
                };
                RxFrame::split(head, SharedTail::new(tail))
            }
            Some((FrameLoc::Bounce(start, len), _)) => {
                RxFrame::local(self.batch.bounce.get(*start, *len))
            }
            _ => RxFrame::default(),
        }
    }

    fn finish(&mut self) {
        self.retire_batch();
        let dev = Arc::clone(&self.dev);
        let now = Instant::now();
        for q in &mut self.queues {
            if q.pending.is_empty() {
                continue;
            }
            let Some(vring) = dev.tx_vring_of(q.pair) else {
                continue;
            };
            if let Some(mut st) = vring.try_lock() {
                q.complete_pending(vring, &mut st, now);
            }
        }
    }

    fn readiness_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.readiness.as_raw_fd())
    }

    /// True while switch-driven (the guest does not kick, so the readiness descriptor
    /// stays quiet), while a notification toward the guest is held back (only a look at
    /// the port sends it), or while the descriptor budget is spent (chains may be left
    /// that no kick will announce: `rx/budget.rs`).
    fn needs_polling(&self) -> bool {
        self.batch.credit.cut()
            || self.queues.iter().any(|q| {
                (q.ring_live && q.dispatch.driven() == Driven::Switch)
                    || [self.dev.rx_vring_of(q.pair), self.dev.tx_vring_of(q.pair)]
                        .into_iter()
                        .flatten()
                        .any(Vring::notify_pending)
            })
    }
}

mod budget;
mod plain_group;
mod queue;
#[cfg(test)]
mod tests;
