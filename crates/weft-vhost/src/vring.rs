//! One virtqueue as the control thread and the data path share it.
//!
//! Ownership and locking: the state sits behind a mutex. The data path takes it with
//! `try_lock`, once per `receive`, `finish` or `transmit` call, and skips its turn when the
//! control thread holds it — it never waits. The control thread takes it only to change the
//! ring (start, stop, new memory, new call descriptor), never across socket I/O. No
//! deadlock: a receive half holds no vring lock while the switch transmits; a transmit half
//! holds every receive queue it could `try_lock` for one burst (several queue pairs) but
//! never waits for one; the control thread waits for one lock at a time and holds no other.

use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::Instant;

use virtio_bindings::bindings::virtio_ring::VRING_AVAIL_F_NO_INTERRUPT;
use virtio_queue::{Queue, QueueT};
use vm_memory::{Address, Bytes, GuestAddress, GuestMemoryMmap};
use vmm_sys_util::eventfd::EventFd;

use crate::counters::{FrameDrop, LogLimiter, QueueCounters, QueueFault};
use crate::features::Features;
use crate::memory::{sigbus, GuardedMemory, RingLog};
use crate::modes::NotifyPolicy;
use crate::notify::{Decision, Notifier};
use crate::ring_access::{GuestView, SplitRing};

/// Queue index of the guest's first receive queue (the device writes it: the port's
/// transmit half). Pair `k`'s receive queue is `2k`.
pub const RX_QUEUE: usize = 0;
/// Queue index of the guest's first transmit queue (the device reads it: the port's receive
/// half). Pair `k`'s transmit queue is `2k + 1`.
pub const TX_QUEUE: usize = 1;
/// Queues of one queue pair.
pub const NUM_QUEUES: usize = 2;

/// True for a guest transmit queue (odd index: the port's receive half reads it).
pub(crate) const fn is_guest_tx(index: usize) -> bool {
    index % 2 == 1
}

/// Where a ring lies in guest memory and where it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingLayout {
    /// Number of descriptors (a power of two).
    pub size: u16,
    /// Guest physical address of the descriptor table.
    pub desc: GuestAddress,
    /// Guest physical address of the available ring.
    pub avail: GuestAddress,
    /// Guest physical address of the used ring.
    pub used: GuestAddress,
    /// The next available (and used) index.
    pub base: u16,
}

impl RingLayout {
    /// A ring of `size` entries laid out as drivers commonly do, from index 0: the
    /// descriptor table at `base`, the available ring right after it, the used ring after
    /// that on the next 4-byte boundary (the alignments of virtio 1.x §2.7).
    #[cfg(any(test, fuzzing))]
    pub(crate) fn contiguous(base: u64, size: u16) -> RingLayout {
        let n = u64::from(size);
        let avail = base + 16 * n;
        RingLayout {
            size,
            desc: GuestAddress(base),
            avail: GuestAddress(avail),
            used: GuestAddress((avail + 6 + 2 * n).next_multiple_of(4)),
            base: 0,
        }
    }
}

/// Where the used ring's index lies in it (after its flags).
const USED_IDX_OFFSET: u64 = 2;

/// Where used-ring entry `i` lies in the used ring (entry `size` is `avail_event`).
fn used_entry_offset(i: usize) -> u64 {
    4 + 8 * i as u64
}

/// Why a ring could not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    /// The size is zero, not a power of two, or above the port's limit.
    #[error("queue size {0} is not a power of two within the limit")]
    BadSize(u16),
    /// The descriptor table, available or used ring is misaligned.
    #[error("ring address misaligned")]
    Misaligned,
    /// A ring does not lie inside guest memory.
    #[error("ring outside guest memory")]
    OutsideMemory,
}

/// The state of one virtqueue.
pub(crate) struct VringState {
    pub(crate) queue: Queue,
    /// The memory the ring was started with (or updated to).
    pub(crate) mem: Option<Arc<GuardedMemory>>,
    pub(crate) running: bool,
    pub(crate) enabled: bool,
    pub(crate) fault: Option<QueueFault>,
    /// Bumped at every start and stop: chains taken under another epoch are not returned.
    pub(crate) epoch: u64,
    /// Chains taken from the available ring and not yet put in the used ring.
    pub(crate) in_flight: u16,
    pub(crate) kick: Option<EventFd>,
    pub(crate) call: Option<EventFd>,
    pub(crate) features: Features,
    /// Whether the guest is currently asked to kick (transmit queue only); `None` until
    /// the data path first writes it after a start.
    pub(crate) guest_kicks: Option<bool>,
    /// When to interrupt the guest (the port's notification policy).
    pub(crate) notifier: Notifier,
    /// The used index when the guest was last asked about a notification: with EVENT_IDX
    /// the next ask checks `used_event` against every entry added since.
    used_at_last_ask: u16,
    /// The available index the ring started at, until the guest moves it (`None` after).
    untouched_since: Option<u16>,
    /// [`sigbus::handled`] when the ring's memory was last found whole.
    sigbus_seen: u64,
    log: LogLimiter,
    /// While the frontend logs dirty pages (a live migration): the log and where this
    /// ring's used ring goes in it. Set by the control thread between two data-path calls.
    pub(crate) dirty: Option<RingLog>,
}

impl VringState {
    fn new(max_size: u16) -> Result<Self, RingError> {
        Ok(VringState {
            queue: Queue::new(max_size).map_err(|_| RingError::BadSize(max_size))?,
            mem: None,
            running: false,
            enabled: false,
            fault: None,
            epoch: 0,
            in_flight: 0,
            kick: None,
            call: None,
            features: Features::default(),
            guest_kicks: None,
            notifier: Notifier::new(NotifyPolicy::Immediate),
            used_at_last_ask: 0,
            untouched_since: None,
            sigbus_seen: 0,
            log: LogLimiter::new(),
            dirty: None,
        })
    }

    /// True when the data path may use the ring.
    pub(crate) fn serving(&self) -> bool {
        self.running && self.enabled && self.fault.is_none() && self.mem.is_some()
    }

    /// True once the guest has made a buffer available since the ring started. A Linux
    /// guest using fewer queue pairs than offered never fills the other receive queues; QEMU
    /// disables those pairs, but a frontend that does not (or whose disable came too early
    /// to be taken: see `control.rs` on enables before SET_FEATURES) would have flows hashed
    /// onto a queue that never gets a buffer. So a receive queue beyond the first is used
    /// only once this holds.
    pub(crate) fn guest_has_given_buffers(&mut self, mem: &GuestMemoryMmap) -> bool {
        let Some(start) = self.untouched_since else {
            return true;
        };
        match self.queue.avail_idx(mem, Ordering::Acquire) {
            Ok(idx) if idx.0 != start => {
                self.untouched_since = None;
                true
            }
            _ => false,
        }
    }

    /// Starts the ring at `layout` over `mem`.
    pub(crate) fn start(
        &mut self,
        mem: Arc<GuardedMemory>,
        layout: &RingLayout,
        features: Features,
        max_size: u16,
    ) -> Result<(), RingError> {
        let mut q = Queue::new(max_size).map_err(|_| RingError::BadSize(layout.size))?;
        q.try_set_size(layout.size)
            .map_err(|_| RingError::BadSize(layout.size))?;
        q.try_set_desc_table_address(layout.desc)
            .map_err(|_| RingError::Misaligned)?;
        q.try_set_avail_ring_address(layout.avail)
            .map_err(|_| RingError::Misaligned)?;
        q.try_set_used_ring_address(layout.used)
            .map_err(|_| RingError::Misaligned)?;
        q.set_event_idx(features.event_idx());
        q.set_next_avail(layout.base);
        q.set_next_used(layout.base);
        self.used_at_last_ask = layout.base;
        self.untouched_since = Some(layout.base);
        q.set_ready(true);
        if !q.is_valid(&*mem) {
            return Err(RingError::OutsideMemory);
        }
        self.queue = q;
        self.mem = Some(mem);
        self.running = true;
        self.fault = None;
        // Memory that lost pages before this start is found at the first check.
        self.sigbus_seen = 0;
        self.epoch = self.epoch.wrapping_add(1);
        self.in_flight = 0;
        self.features = features;
        self.guest_kicks = None;
        // A new ring starts with nothing held back.
        self.notifier.asked();
        Ok(())
    }

    /// Stops the ring; returns the index the next start must resume from. Chains in
    /// flight are given back to the available ring (the next start reads them again).
    pub(crate) fn stop(&mut self, counters: &QueueCounters) -> u16 {
        let base = if self.running {
            self.queue.next_avail().wrapping_sub(self.in_flight)
        } else {
            self.queue.next_avail()
        };
        if self.running && self.in_flight > 0 {
            counters.discarded_in_flight(u64::from(self.in_flight));
        }
        self.running = false;
        self.epoch = self.epoch.wrapping_add(1);
        self.in_flight = 0;
        self.mem = None;
        self.queue.set_next_avail(base);
        self.queue.set_next_used(base);
        self.used_at_last_ask = base;
        base
    }

    /// Puts `entries` (head, bytes written) in the used ring, then makes them all visible
    /// with one store of the used index. A guest must never see a mergeable frame's head
    /// before its other buffers: Linux drops such a frame ("N buffers out of M missing").
    /// Returns how many were published; an entry naming no descriptor, or a ring outside
    /// memory, ends the run there (the caller faults the queue).
    pub(crate) fn publish_used(
        &mut self,
        mem: &GuestMemoryMmap,
        entries: impl IntoIterator<Item = (u16, u32)>,
    ) -> Result<usize, usize> {
        let view = GuestView::new(mem);
        let Some(ring) = SplitRing::new(&view, &self.queue) else {
            return Err(0);
        };
        let size = self.queue.size();
        let mut next = self.queue.next_used();
        let mut written = 0usize;
        let mut failed = false;
        for (head, len) in entries {
            if head >= size || !ring.write_used(next, head, len) {
                failed = true;
                break;
            }
            next = next.wrapping_add(1);
            written += 1;
        }
        if written > 0 {
            if !ring.store_used_idx(next) {
                return Err(0);
            }
            let first = self.queue.next_used();
            self.queue.set_next_used(next);
            self.log_used_entries(first, written);
        }
        if failed {
            Err(written)
        } else {
            Ok(written)
        }
    }

    /// While logging: marks the used ring's `count` entries from index `first` and its
    /// index dirty (the entries may wrap round the ring: two runs then).
    fn log_used_entries(&self, first: u16, count: usize) {
        let Some(log) = &self.dirty else {
            return;
        };
        let size = usize::from(self.queue.size()).max(1);
        let start = usize::from(first) % size;
        let count = count.min(size);
        let till_end = count.min(size - start);
        log.used_written(used_entry_offset(start), 8 * till_end as u64);
        if count > till_end {
            log.used_written(used_entry_offset(0), 8 * (count - till_end) as u64);
        }
        log.used_written(USED_IDX_OFFSET, 2);
    }

    /// While logging: marks what enabling or disabling guest kicks writes in the used ring
    /// (its flags, or `avail_event` after the entries) dirty.
    pub(crate) fn log_kick_state(&self) {
        if let Some(log) = &self.dirty {
            log.used_written(0, 2);
            log.used_written(used_entry_offset(usize::from(self.queue.size())), 2);
        }
    }

    /// Breaks the ring if the frontend shrank its memory under it (a SIGBUS in that memory
    /// was caught: `memory/sigbus.rs`). The data path calls this once per batch; it costs
    /// one atomic load unless such a fault happened anywhere since the last call.
    pub(crate) fn check_memory(&mut self, counters: &QueueCounters, queue: &str) {
        let handled = sigbus::handled();
        if handled == self.sigbus_seen {
            return;
        }
        self.sigbus_seen = handled;
        if self.fault.is_none() && self.mem.as_deref().is_some_and(GuardedMemory::tripped) {
            self.fault(QueueFault::MemoryTruncated, counters, queue);
        }
    }

    /// Marks the ring broken: counted, logged (rate-limited), not served until restarted.
    /// A fault in memory the frontend shrank is named for that (what the ring read there
    /// was zeros, not the frontend's doing).
    pub(crate) fn fault(&mut self, fault: QueueFault, counters: &QueueCounters, queue: &str) {
        let fault = if self.mem.as_deref().is_some_and(GuardedMemory::tripped) {
            QueueFault::MemoryTruncated
        } else {
            fault
        };
        counters.faulted(fault);
        if self.fault.is_none() {
            self.fault = Some(fault);
        }
        if let Some(held_back) = self.log.allow() {
            tracing::warn!(queue, %fault, held_back, "virtqueue broken until the frontend resets it");
        }
    }

    /// Logs a dropped frame (already counted) at a limited rate.
    pub(crate) fn log_drop(&mut self, reason: FrameDrop, queue: &str) {
        if let Some(held_back) = self.log.allow() {
            tracing::debug!(queue, %reason, held_back, "frame dropped");
        }
    }

    /// Whether a switch-driven look that took `taken` chains must (re)write what holds the
    /// guest's kicks off: while they may be on, and with EVENT_IDX whenever the ring moved
    /// (`avail_event` must follow it). The NO_NOTIFY flag, once set, is not stored again:
    /// its word shares a line with the used index the guest polls, and each store takes
    /// that line back from the guest's core.
    pub(crate) fn hold_off_due(&self, taken: usize) -> bool {
        self.guest_kicks != Some(false) || (taken > 0 && self.queue.event_idx_enabled())
    }

    /// Asks the guest not to kick while the worker polls (switch-driven): the used ring's
    /// NO_NOTIFY flag, or with EVENT_IDX `avail_event` set just behind the next index to
    /// take — an index the guest has already passed, so it does not kick again until it
    /// wraps all the way round, which rewriting at every batch prevents.
    pub(crate) fn hold_off_kicks(&mut self, mem: &GuestMemoryMmap) -> Result<(), ()> {
        if !self.queue.event_idx_enabled() {
            let stored = self.queue.disable_notification(mem).map_err(|_| ());
            self.log_kick_state();
            return stored;
        }
        let offset = 4 + 8 * u64::from(self.queue.size());
        let at = self.queue.used_ring().checked_add(offset).ok_or(())?;
        let behind = self.queue.next_avail().wrapping_sub(1);
        let stored = mem
            .store(behind.to_le(), GuestAddress(at), Ordering::Relaxed)
            .map_err(|_| ());
        self.log_kick_state();
        stored
    }

    /// After chains were added to the used ring: notifies the guest unless it asked not to
    /// be (`used_event` with EVENT_IDX over every entry added since the last ask, the
    /// NO_INTERRUPT flag otherwise). True when the guest was interrupted.
    pub(crate) fn notify_guest(&mut self, counters: &QueueCounters) -> bool {
        self.notifier.asked();
        let Some(mem) = self.mem.as_deref() else {
            return false;
        };
        let needed = if self.queue.event_idx_enabled() {
            // Order the used index store before reading used_event; then notify when
            // used_event lies among the entries added since the last ask (Linux's
            // vring_need_event).
            fence(Ordering::SeqCst);
            let next = self.queue.next_used();
            let old = std::mem::replace(&mut self.used_at_last_ask, next);
            let at = 4 + 2 * u64::from(self.queue.size());
            GuestAddress(self.queue.avail_ring())
                .checked_add(at)
                .and_then(|at| mem.load::<u16>(at, Ordering::Relaxed).ok())
                .map(u16::from_le)
                .is_none_or(|event| {
                    next.wrapping_sub(event).wrapping_sub(1) < next.wrapping_sub(old)
                })
        } else {
            // Order the used index store before reading the guest's flags (as
            // needs_notification does).
            fence(Ordering::SeqCst);
            mem.load::<u16>(GuestAddress(self.queue.avail_ring()), Ordering::Relaxed)
                .map(u16::from_le)
                .map_or(true, |flags| {
                    u32::from(flags) & VRING_AVAIL_F_NO_INTERRUPT == 0
                })
        };
        if needed {
            if let Some(call) = &self.call {
                // A full counter means the guest has an interrupt pending anyway.
                let _ = call.write(1);
            }
        }
        counters.notified(needed);
        needed
    }

    /// Does what the notification policy decided.
    fn apply(&mut self, decision: Decision, counters: &QueueCounters) {
        match decision {
            Decision::Ask => {
                self.notify_guest(counters);
            }
            Decision::Hold => counters.notification_held(),
            Decision::Nothing => {}
        }
    }
}

/// A virtqueue: its state and its counters.
pub(crate) struct Vring {
    state: Mutex<VringState>,
    pub(crate) counters: QueueCounters,
    pub(crate) name: &'static str,
    /// Mirrors `notifier.pending()`, so that checking for held-back notifications takes no
    /// lock.
    notify_pending: AtomicBool,
}

impl Vring {
    pub(crate) fn new(name: &'static str, max_size: u16) -> Result<Self, RingError> {
        Ok(Vring {
            state: Mutex::new(VringState::new(max_size)?),
            counters: QueueCounters::default(),
            name,
            notify_pending: AtomicBool::new(false),
        })
    }

    /// Puts the port's notification policy in force (each half sets the queue it fills).
    pub(crate) fn set_notify_policy(&self, policy: NotifyPolicy) {
        self.lock().notifier = Notifier::new(policy);
    }

    /// The first frames of a burst are in the used ring: the early ask of the optimistic
    /// policy (nothing for the others).
    pub(crate) fn first_visible(&self, st: &mut VringState, now: Instant) {
        if st.notifier.early() {
            let sent = st.notify_guest(&self.counters);
            st.notifier.early_done(now, sent);
            self.sync_pending(st);
        }
    }

    /// A burst added `frames` frames (`bytes` bytes) to the used ring after any early ask.
    pub(crate) fn burst_done(&self, st: &mut VringState, now: Instant, frames: u64, bytes: u64) {
        let decision = st.notifier.burst_done(now, frames, bytes);
        st.apply(decision, &self.counters);
        self.sync_pending(st);
    }

    /// The worker's look between bursts, with the ring locked: sends what the policy held
    /// back once its time has come.
    pub(crate) fn tick_locked(&self, st: &mut VringState, now: Instant) {
        if !self.notify_pending() {
            return;
        }
        if !st.serving() {
            // Nothing to tell a stopped ring; its next start begins afresh.
            st.notifier.asked();
        } else {
            let decision = st.notifier.tick(now);
            st.apply(decision, &self.counters);
        }
        self.sync_pending(st);
    }

    /// As [`Vring::tick_locked`], taking the lock if it is free (the next look retries).
    pub(crate) fn tick(&self, now: Instant) {
        if self.notify_pending() {
            if let Some(mut st) = self.try_lock() {
                self.tick_locked(&mut st, now);
            }
        }
    }

    /// True while a notification is held back: the worker must keep looking at the port.
    pub(crate) fn notify_pending(&self) -> bool {
        self.notify_pending.load(Ordering::Relaxed)
    }

    fn sync_pending(&self, st: &VringState) {
        self.notify_pending
            .store(st.notifier.pending(), Ordering::Relaxed);
    }

    /// The data path's access: `None` while the control thread holds the state.
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, VringState>> {
        match self.state.try_lock() {
            Ok(g) => Some(g),
            // A panic elsewhere cannot leave the ring memory-unsafe; keep serving.
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// A lane sharing another lane's receive queue (`tx.rs`): waits for the lock while the
    /// holder (that lane's burst, or the control thread for a moment) finishes — spinning
    /// first, then yielding the CPU in case the holder was preempted — but never longer
    /// than [`SHARED_LOCK_WAIT`]; `None` if it stays held that long.
    pub(crate) fn lock_briefly(&self) -> Option<MutexGuard<'_, VringState>> {
        for _ in 0..LOCK_SPINS {
            if let Some(st) = self.try_lock() {
                return Some(st);
            }
            std::hint::spin_loop();
        }
        let deadline = std::time::Instant::now() + SHARED_LOCK_WAIT;
        loop {
            std::thread::yield_now();
            if let Some(st) = self.try_lock() {
                return Some(st);
            }
            if std::time::Instant::now() >= deadline {
                return None;
            }
        }
    }

    /// The control thread's access (waits for the data path to finish its call).
    pub(crate) fn lock(&self) -> MutexGuard<'_, VringState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Spinning tries of [`Vring::lock_briefly`] before it yields: about one 64-frame burst.
const LOCK_SPINS: usize = 20_000;

/// The longest [`Vring::lock_briefly`] waits: a few scheduler ticks, for a holder that was
/// preempted; a burst that waited this long is dropped and counted instead.
const SHARED_LOCK_WAIT: std::time::Duration = std::time::Duration::from_millis(20);
