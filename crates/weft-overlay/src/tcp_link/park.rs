//! Pausing a TCP link's thread for a hand-over: at a point where the connection it watches
//! is the one both halves use and nothing of it is half done (not inside `publish`, not
//! flushing), the thread waits until the hand-over is abandoned ([`LinkPark::resume`]) or the
//! port stops. A port stopped after its state was handed over closes its descriptors
//! without shutting the connection down: the new process holds the same connection.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::handover::HandoverError;

#[derive(Debug, Default)]
struct State {
    /// The link thread is waiting at a park point.
    parked: bool,
    /// The state was handed over: the connection belongs to another process now.
    handed_over: bool,
}

/// The link thread's park (in [`super::conn::Shared`]).
#[derive(Debug)]
pub(crate) struct LinkPark {
    requested: AtomicBool,
    state: Mutex<State>,
    changed: Condvar,
    /// How long a hand-over waits for the thread at most (a connection attempt and a
    /// handshake finish first).
    timeout: Duration,
}

/// How often a parked thread looks at the stop flag even without a wake-up.
const RECHECK: Duration = Duration::from_millis(100);

impl LinkPark {
    pub(crate) fn new(timeout: Duration) -> LinkPark {
        LinkPark {
            requested: AtomicBool::new(false),
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            timeout,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Called by the link thread where it may stop: waits while a hand-over holds it.
    /// True when the thread must end at once without touching the connection (the port
    /// stopped after handing it over).
    pub(crate) fn point(&self, stopping: impl Fn() -> bool) -> bool {
        if !self.requested.load(Ordering::Acquire) {
            return false;
        }
        let mut state = self.state();
        state.parked = true;
        self.changed.notify_all();
        while self.requested.load(Ordering::Acquire) && !stopping() {
            state = self
                .changed
                .wait_timeout(state, RECHECK)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        state.parked = false;
        self.changed.notify_all();
        state.handed_over
    }

    /// Asks the link thread to park and waits until it has (`wake` gets it out of a
    /// wait). The thread stays parked until [`Self::resume`].
    pub(crate) fn request(&self, wake: impl Fn()) -> Result<(), HandoverError> {
        self.requested.store(true, Ordering::Release);
        wake();
        let deadline = Instant::now() + self.timeout;
        let mut state = self.state();
        while !state.parked {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                drop(state);
                self.resume();
                return Err(HandoverError::LinkThreadBusy(self.timeout));
            }
            state = self
                .changed
                .wait_timeout(state, left.min(RECHECK))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            if !state.parked {
                // The thread may have been inside a poll when asked: ask again.
                wake();
            }
        }
        Ok(())
    }

    /// Records that the state was handed over (the thread is parked).
    pub(crate) fn handed_over(&self) {
        self.state().handed_over = true;
    }

    /// Lets the thread go on (the hand-over was abandoned, or failed).
    pub(crate) fn resume(&self) {
        let mut state = self.state();
        state.handed_over = false;
        self.requested.store(false, Ordering::Release);
        self.changed.notify_all();
    }

    /// Wakes a parked thread so it sees a stop.
    pub(crate) fn notify(&self) {
        let _guard = self.state();
        self.changed.notify_all();
    }
}
