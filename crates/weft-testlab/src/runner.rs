//! A minimal worker for tests and benchmarks: one thread owns a `Switch` and polls its
//! ports, spinning a little after traffic and then sleeping on the ports' readiness
//! descriptors (epoll, short timeout). Stoppable; gives the switch back when stopped.
//! (The daemon's shared worker runtime replaces this.)

use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use vmm_sys_util::epoll::{ControlOperation, Epoll, EpollEvent, EventSet};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};
use weft_switch::{PortId, PortRx, Switch, Timestamp};

/// How the worker waits when idle.
#[derive(Debug, Clone, Copy)]
pub struct IdlePolicy {
    /// How long to keep polling after the last frame before sleeping, in microseconds.
    /// Sleeping is cheap for the CPU but waking costs a cross-CPU interrupt (tens of
    /// microseconds on these VMs): a worker that owns its CPU spins longer.
    pub spin_us: u64,
    /// Longest sleep, in milliseconds.
    pub sleep_ms: i32,
}

impl Default for IdlePolicy {
    fn default() -> Self {
        IdlePolicy {
            spin_us: 200,
            sleep_ms: 20,
        }
    }
}

/// The worker thread. Dropping it stops it.
pub struct SwitchThread {
    stop: Arc<AtomicBool>,
    wake: Arc<EventFd>,
    thread: Option<JoinHandle<Switch>>,
}

const STOP_TOKEN: u64 = u64::MAX;

impl SwitchThread {
    /// Starts polling `switch`, plus receive halves the switch does not hold (further
    /// queues of a multi-queue port), each fed to `Switch::process` as its port.
    pub fn spawn(
        mut switch: Switch,
        mut extra: Vec<(PortId, Box<dyn PortRx>)>,
        idle: IdlePolicy,
    ) -> SwitchThread {
        let stop = Arc::new(AtomicBool::new(false));
        let wake = Arc::new(EventFd::new(EFD_NONBLOCK).expect("eventfd"));
        let (stop2, wake2) = (Arc::clone(&stop), Arc::clone(&wake));
        let thread = std::thread::Builder::new()
            .name("weft-switch".into())
            .spawn(move || {
                let epoll = Epoll::new().expect("epoll");
                let add = |fd: RawFd, token: u64| {
                    epoll
                        .ctl(
                            ControlOperation::Add,
                            fd,
                            EpollEvent::new(EventSet::IN, token),
                        )
                        .expect("epoll_ctl");
                };
                add(wake2.as_raw_fd(), STOP_TOKEN);
                let mut fds = Vec::new();
                switch.readiness_fds(&mut fds);
                fds.extend(extra.iter().filter_map(|(_, rx)| rx.readiness_fd()));
                for (i, fd) in fds.iter().enumerate() {
                    add(*fd, i as u64);
                }
                let start = Instant::now();
                let mut events = vec![EpollEvent::default(); 16];
                let spin = std::time::Duration::from_micros(idle.spin_us);
                let mut last_busy = Instant::now();
                while !stop2.load(Ordering::Relaxed) {
                    let now =
                        Timestamp(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX));
                    let mut n = switch.poll_all(now);
                    for (port, rx) in extra.iter_mut() {
                        n += switch.process(*port, rx.as_mut(), now);
                    }
                    if n > 0 {
                        last_busy = Instant::now();
                        continue;
                    }
                    if last_busy.elapsed() < spin {
                        continue;
                    }
                    let _ = epoll.wait(idle.sleep_ms, &mut events);
                    last_busy = Instant::now();
                }
                switch
            })
            .expect("spawn the switch thread");
        SwitchThread {
            stop,
            wake,
            thread: Some(thread),
        }
    }

    /// Stops the worker and gives the switch back (with every port still attached).
    pub fn stop(mut self) -> Switch {
        self.halt().expect("the switch thread panicked")
    }

    fn halt(&mut self) -> Option<Switch> {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.wake.write(1);
        self.thread.take().and_then(|t| t.join().ok())
    }
}

impl Drop for SwitchThread {
    fn drop(&mut self) {
        let _ = self.halt();
    }
}
