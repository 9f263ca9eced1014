//! A worker thread: see the crate documentation.
//!
//! Ownership: the thread owns its `SwitchRegistry` outright; other threads reach it only
//! through jobs sent over a channel (run between batches) and the wake-up eventfd that
//! interrupts an idle sleep. Counters are single-writer atomics.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use weft_switch::{SwitchRegistry, Timestamp};
use weft_sys::event::{ControlOperation, Epoll, EpollEvent, EventFd, EventSet};

use crate::clock;
use crate::idle::{IdleStrategy, Idler};

/// How a worker runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct WorkerConfig {
    /// The worker's number (used in its thread name and stats).
    pub index: usize,
    /// Pin the thread to this CPU.
    pub cpu: Option<usize>,
    /// What to do when idle.
    pub idle: IdleStrategy,
}

/// Why a job could not be run on a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WorkerGone {
    /// The worker thread has stopped (it panicked, or was shut down).
    #[error("the worker thread has stopped")]
    Stopped,
    /// The worker did not run the job within [`EXEC_TIMEOUT`]: it is stuck in a batch. The
    /// job may still run later.
    #[error("the worker did not answer within {} s", EXEC_TIMEOUT.as_secs())]
    Stuck,
}

/// How long [`WorkerHandle::exec`] waits for a worker, which runs jobs between batches (a
/// batch takes microseconds): only a stuck worker makes the control plane wait this long.
pub const EXEC_TIMEOUT: Duration = Duration::from_secs(10);

/// A worker's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Nanoseconds spent in passes that moved packets.
    pub busy_ns: u64,
    /// Nanoseconds since the worker started.
    pub total_ns: u64,
    /// Passes over the ports that moved at least one packet.
    pub busy_passes: u64,
    /// Packets received.
    pub packets: u64,
}

impl WorkerStats {
    /// Busy time over total time, 0 to 1.
    pub fn busy_fraction(&self) -> f64 {
        if self.total_ns == 0 {
            return 0.0;
        }
        #[allow(clippy::cast_precision_loss)]
        let f = self.busy_ns as f64 / self.total_ns as f64;
        f.clamp(0.0, 1.0)
    }
}

#[derive(Default)]
struct SharedStats {
    busy_ns: AtomicU64,
    busy_passes: AtomicU64,
    packets: AtomicU64,
}

type Job = Box<dyn FnOnce(&mut SwitchRegistry, Timestamp) + Send>;

enum Message {
    Run(Job),
    Stop,
}

/// The control plane's handle on a worker.
pub struct WorkerHandle {
    config: WorkerConfig,
    jobs: Sender<Message>,
    wake: EventFd,
    stats: Arc<SharedStats>,
    started: Instant,
    thread: Option<JoinHandle<SwitchRegistry>>,
}

impl std::fmt::Debug for WorkerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerHandle")
            .field("config", &self.config)
            .finish()
    }
}

/// Starts a worker thread with no switches.
pub fn spawn_worker(config: WorkerConfig) -> io::Result<WorkerHandle> {
    let wake = EventFd::new(true)?;
    let thread_wake = wake.try_clone()?;
    let (jobs, inbox) = mpsc::channel();
    let stats = Arc::new(SharedStats::default());
    let thread_stats = Arc::clone(&stats);
    let thread = std::thread::Builder::new()
        .name(format!("weft-worker-{}", config.index))
        .spawn(move || {
            if let Some(cpu) = config.cpu {
                // Pinning is best effort: the worker still runs where the kernel puts it.
                let _ = pin_to(cpu);
            }
            let mut worker = Worker {
                registry: SwitchRegistry::default(),
                inbox,
                wake: thread_wake,
                stats: thread_stats,
                idler: Idler::new(config.idle),
                epoll: None,
                registered: Vec::new(),
                fds: Vec::new(),
            };
            worker.run();
            worker.registry
        })?;
    Ok(WorkerHandle {
        config,
        jobs,
        wake,
        stats,
        started: Instant::now(),
        thread: Some(thread),
    })
}

impl WorkerHandle {
    /// Runs `f` on the worker between two batches and returns its result. The caller
    /// waits (it is the control plane), at most [`EXEC_TIMEOUT`]; the worker never waits for
    /// the caller.
    pub fn exec<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut SwitchRegistry, Timestamp) -> R + Send + 'static,
    ) -> Result<R, WorkerGone> {
        let (reply, answer) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |reg, now| {
            // The caller may have given up waiting: nothing to do then.
            let _ = reply.send(f(reg, now));
        });
        self.jobs
            .send(Message::Run(job))
            .map_err(|_| WorkerGone::Stopped)?;
        self.wake.write(1).map_err(|_| WorkerGone::Stopped)?;
        answer.recv_timeout(EXEC_TIMEOUT).map_err(|e| match e {
            mpsc::RecvTimeoutError::Timeout => WorkerGone::Stuck,
            mpsc::RecvTimeoutError::Disconnected => WorkerGone::Stopped,
        })
    }

    /// Runs `f` on the worker between two batches, then holds the worker there (no batch,
    /// no job) until the returned [`PausedWorker`] is resumed or dropped, or `max` passes (a
    /// control plane that died must not leave the data path stopped for good). Waits for
    /// the worker as [`exec`](Self::exec) does.
    pub fn pause_with<R: Send + 'static>(
        &self,
        max: Duration,
        f: impl FnOnce(&mut SwitchRegistry, Timestamp) -> R + Send + 'static,
    ) -> Result<(R, PausedWorker), WorkerGone> {
        let (resume, held) = mpsc::channel::<()>();
        let (reply, answer) = mpsc::sync_channel(1);
        // One job: `f` and the hold with no batch between them.
        let job: Job = Box::new(move |reg, now| {
            if reply.send(f(reg, now)).is_ok() {
                // Resumed by a message, by the sender's drop, or by the deadline.
                let _ = held.recv_timeout(max);
            }
        });
        self.jobs
            .send(Message::Run(job))
            .map_err(|_| WorkerGone::Stopped)?;
        self.wake.write(1).map_err(|_| WorkerGone::Stopped)?;
        let r = answer.recv_timeout(EXEC_TIMEOUT).map_err(|e| match e {
            mpsc::RecvTimeoutError::Timeout => WorkerGone::Stuck,
            mpsc::RecvTimeoutError::Disconnected => WorkerGone::Stopped,
        })?;
        Ok((r, PausedWorker { resume }))
    }

    /// The worker's counters.
    pub fn stats(&self) -> WorkerStats {
        WorkerStats {
            busy_ns: self.stats.busy_ns.load(Ordering::Relaxed),
            total_ns: u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX),
            busy_passes: self.stats.busy_passes.load(Ordering::Relaxed),
            packets: self.stats.packets.load(Ordering::Relaxed),
        }
    }

    /// The worker's number.
    pub fn index(&self) -> usize {
        self.config.index
    }

    /// The CPU it was asked to run on.
    pub fn cpu(&self) -> Option<usize> {
        self.config.cpu
    }

    /// Stops the thread and gives back its switches.
    pub fn shutdown(mut self) -> Result<SwitchRegistry, WorkerGone> {
        self.stop()
    }

    fn stop(&mut self) -> Result<SwitchRegistry, WorkerGone> {
        let _ = self.jobs.send(Message::Stop);
        let _ = self.wake.write(1);
        self.thread
            .take()
            .ok_or(WorkerGone::Stopped)?
            .join()
            .map_err(|_| WorkerGone::Stopped)
    }
}

impl Drop for WorkerHandle {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.stop();
        }
    }
}

/// A worker held between two batches by [`WorkerHandle::pause_with`]; it carries on when
/// this is resumed or dropped.
#[derive(Debug)]
pub struct PausedWorker {
    resume: Sender<()>,
}

impl PausedWorker {
    /// Lets the worker carry on.
    pub fn resume(self) {
        let _ = self.resume.send(());
    }
}

struct Worker {
    registry: SwitchRegistry,
    inbox: Receiver<Message>,
    wake: EventFd,
    stats: Arc<SharedStats>,
    idler: Idler,
    epoll: Option<Epoll>,
    /// Descriptors the epoll set holds, in registration order.
    registered: Vec<RawFd>,
    /// Scratch for the current descriptors.
    fds: Vec<RawFd>,
}

/// How often idle FDB entries are swept even without traffic.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

impl Worker {
    fn run(&mut self) {
        let mut last_sweep = Instant::now();
        loop {
            if !self.run_jobs() {
                return;
            }
            // Two clock reads per pass (they cost 30-140 ns each on these VMs): its start,
            // which is also the switch's timestamp, and its end.
            let pass = Instant::now();
            let now = clock::at(pass);
            let mut packets = 0usize;
            for switch in self.registry.iter_mut() {
                packets += switch.poll_all(now);
            }
            let end = Instant::now();
            let elapsed = end.saturating_duration_since(pass);
            if packets > 0 {
                add(
                    &self.stats.busy_ns,
                    u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX),
                );
                add(&self.stats.busy_passes, 1);
                add(&self.stats.packets, packets as u64);
                self.idler.busy();
            } else if let Some(sleep) = self.idler.idle(elapsed) {
                self.sleep(sleep);
            } else {
                std::hint::spin_loop();
            }
            if end.saturating_duration_since(last_sweep) >= SWEEP_EVERY {
                last_sweep = end;
                let now = clock::at(end);
                for switch in self.registry.iter_mut() {
                    switch.expire(now);
                    log_flap_episodes(switch);
                }
            }
        }
    }

    /// Runs waiting jobs; false when told to stop.
    fn run_jobs(&mut self) -> bool {
        loop {
            match self.inbox.try_recv() {
                Ok(Message::Run(job)) => job(&mut self.registry, clock::now()),
                Ok(Message::Stop) | Err(TryRecvError::Disconnected) => return false,
                Err(TryRecvError::Empty) => return true,
            }
        }
    }

    /// Sleeps up to `d`, waking early when a port becomes readable or a job arrives.
    fn sleep(&mut self, d: Duration) {
        if self.registry.iter().any(|s| s.needs_polling()) {
            // A port whose readiness descriptor would not wake us (VNET/P's immediate
            // yield: give the core away for a moment, then poll again).
            std::thread::yield_now();
            return;
        }
        // epoll's timeout is in milliseconds: shorter naps are plain sleeps.
        if d < Duration::from_millis(1) {
            std::thread::sleep(d);
            return;
        }
        self.fds.clear();
        self.fds.push(self.wake.as_raw_fd());
        for switch in self.registry.iter() {
            switch.readiness_fds(&mut self.fds);
        }
        if self.epoll.is_none() || self.fds != self.registered {
            match self.rebuild_epoll() {
                Ok(()) => {}
                Err(_) => {
                    std::thread::sleep(d);
                    return;
                }
            }
        }
        let Some(epoll) = &self.epoll else { return };
        let mut events = [EpollEvent::default(); 16];
        let timeout = i32::try_from(d.as_millis()).unwrap_or(i32::MAX);
        if let Ok(n) = epoll.wait(timeout, &mut events) {
            if events[..n].iter().any(|e| e.data() == 0) {
                // Drain the wake-up counter; the jobs run at the top of the loop.
                let _ = self.wake.read();
            }
        }
    }

    fn rebuild_epoll(&mut self) -> io::Result<()> {
        let epoll = Epoll::new()?;
        for (i, fd) in self.fds.iter().enumerate() {
            let event = EpollEvent::new(EventSet::IN, i as u64);
            epoll.ctl(ControlOperation::Add, *fd, event)?;
        }
        self.epoll = Some(epoll);
        self.registered.clone_from(&self.fds);
        Ok(())
    }
}

/// Adds to a counter only this thread writes.
fn add(counter: &AtomicU64, n: u64) {
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(n),
        Ordering::Relaxed,
    );
}

/// Pins the calling thread to `cpu` (also for tools that place their own threads).
pub fn pin_to(cpu: usize) -> io::Result<()> {
    weft_sys::affinity::pin_to(cpu)
}

#[cfg(test)]
mod tests;

/// Logs each MAC flap episode once, when its hold begins (the FDB keeps a few between
/// sweeps and counts the rest).
fn log_flap_episodes(switch: &mut weft_switch::Switch) {
    let (episodes, unlogged) = switch.take_flap_episodes();
    for (e, held_on, moving_to) in episodes {
        let hold = switch.config().fdb.mac_move_hold;
        tracing::warn!(
            "switch {}: MAC {} (VLAN {}) moved between ports more than {} times in a second; \
             held on port {held_on} for {hold:?}, frames from it on {moving_to} and other ports are dropped",
            switch.name(),
            e.mac,
            e.vlan,
            switch.config().fdb.mac_move_limit,
        );
    }
    if unlogged > 0 {
        tracing::warn!(
            "switch {}: {unlogged} more MAC flap episodes not logged",
            switch.name()
        );
    }
}
