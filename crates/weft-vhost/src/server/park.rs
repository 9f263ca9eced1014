//! How the port tells its control thread to stop, or to park (a hand-over to another
//! process, `handover.rs`), and to carry on after parking.
//!
//! One eventfd is the doorbell the thread's every wait polls (`serve.rs`, `source.rs`);
//! what it means is the [`Phase`] under the mutex, so a suspend that timed out and was
//! called off, a stop after it, and a doorbell rung twice all read the same. The thread
//! only looks at the doorbell between two messages of its frontend, or while it waits for
//! one: it parks at a message boundary, its connection and device untouched, and the
//! snapshot is taken from that parked state.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

/// What the port asks of its control thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Serve (or wait for) frontends.
    Serving,
    /// Park at the next message boundary.
    SuspendAsked,
    /// Parked: nothing read from the frontend until resumed or stopped.
    Suspended,
    /// End the thread (the port is being dropped).
    Stopping,
}

/// Why a suspend did not happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SuspendRefused {
    /// The port is suspended already.
    AlreadySuspended,
    /// The thread did not reach a message boundary in time (it was called off).
    Timeout,
    /// The port is stopping.
    Stopping,
}

/// The doorbell and the phase behind it, shared by the port and its control thread.
#[derive(Debug)]
pub(crate) struct Signals {
    doorbell: EventFd,
    phase: Mutex<Phase>,
    changed: Condvar,
}

impl Signals {
    pub(crate) fn new() -> io::Result<Self> {
        Ok(Signals {
            doorbell: EventFd::new(EFD_NONBLOCK)?,
            phase: Mutex::new(Phase::Serving),
            changed: Condvar::new(),
        })
    }

    /// The descriptor the control thread polls.
    pub(crate) fn fd(&self) -> RawFd {
        self.doorbell.as_raw_fd()
    }

    fn phase(&self) -> MutexGuard<'_, Phase> {
        self.phase.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn ring(&self) {
        // A full counter is still readable: nothing lost.
        let _ = self.doorbell.write(1);
    }

    /// Ends the control thread (parked or not) as soon as it looks.
    pub(crate) fn stop(&self) {
        *self.phase() = Phase::Stopping;
        self.changed.notify_all();
        self.ring();
    }

    /// Asks the thread to park and waits until it has, at most `timeout`. On a timeout the
    /// request is called off under the lock, so the thread either parked before (and this
    /// reports success) or never will for this request.
    pub(crate) fn suspend(&self, timeout: Duration) -> Result<(), SuspendRefused> {
        let deadline = Instant::now() + timeout;
        let mut phase = self.phase();
        match *phase {
            Phase::Serving => {}
            Phase::Stopping => return Err(SuspendRefused::Stopping),
            Phase::SuspendAsked | Phase::Suspended => return Err(SuspendRefused::AlreadySuspended),
        }
        *phase = Phase::SuspendAsked;
        self.ring();
        while *phase == Phase::SuspendAsked {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                *phase = Phase::Serving;
                return Err(SuspendRefused::Timeout);
            }
            phase = self
                .changed
                .wait_timeout(phase, left)
                .map_or_else(|p| p.into_inner().0, |(g, _)| g);
        }
        match *phase {
            Phase::Suspended => Ok(()),
            _ => Err(SuspendRefused::Stopping),
        }
    }

    /// Lets a parked thread carry on where it stopped.
    pub(crate) fn resume(&self) {
        let mut phase = self.phase();
        if *phase == Phase::Suspended {
            *phase = Phase::Serving;
            self.changed.notify_all();
        }
    }

    /// The control thread found the doorbell rung: parks here while suspended; true when
    /// the thread must end.
    pub(crate) fn answer(&self) -> bool {
        // Emptied first: a ring after this is seen by the next poll.
        let _ = self.doorbell.read();
        let mut phase = self.phase();
        loop {
            match *phase {
                Phase::Stopping => return true,
                Phase::Serving => return false,
                Phase::SuspendAsked => {
                    *phase = Phase::Suspended;
                    self.changed.notify_all();
                    tracing::debug!("vhost-user control thread parked");
                }
                Phase::Suspended => {
                    phase = self.changed.wait(phase).unwrap_or_else(|p| p.into_inner());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_suspend_nobody_answers_is_called_off_and_later_doorbells_are_ignored() {
        let s = Signals::new().unwrap();
        assert_eq!(
            s.suspend(Duration::from_millis(20)),
            Err(SuspendRefused::Timeout)
        );
        // The thread looks late: the request is gone, it carries on.
        assert!(!s.answer());
    }

    #[test]
    fn a_parked_thread_resumes_or_stops_when_told() {
        let s = Arc::new(Signals::new().unwrap());
        let thread = {
            let s = Arc::clone(&s);
            std::thread::spawn(move || {
                let mut answers = Vec::new();
                loop {
                    let stop = s.answer();
                    answers.push(stop);
                    if stop {
                        return answers;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            })
        };
        s.suspend(Duration::from_secs(5)).unwrap();
        assert_eq!(
            s.suspend(Duration::from_millis(1)),
            Err(SuspendRefused::AlreadySuspended)
        );
        s.resume();
        s.suspend(Duration::from_secs(5)).unwrap();
        // Stopping a parked thread ends it.
        s.stop();
        let answers = thread.join().unwrap();
        assert_eq!(answers.last(), Some(&true));
        assert_eq!(
            s.suspend(Duration::from_millis(1)),
            Err(SuspendRefused::Stopping)
        );
    }
}
