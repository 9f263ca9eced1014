//! The two ways a port gets a frontend's stream: accepting on its own socket (server mode)
//! or connecting to the frontend's (client mode), retrying forever with a capped
//! exponential backoff. Every wait is on the port's doorbell (`park.rs`), so dropping the
//! port never waits for a backoff to run out, and a suspended port parks here too.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::park::Signals;
use super::serve::{wait, Ready};
use crate::counters::LogLimiter;
use crate::socket_dir::SocketDir;

/// First wait after a failed connection attempt.
pub(super) const BACKOFF_INITIAL: Duration = Duration::from_millis(50);
/// Longest wait between connection attempts.
pub(super) const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// A connection that lasted this long was a real one: the next attempt starts at once and
/// the backoff starts over. A shorter one (a frontend that accepts and closes) backs off.
const STABLE_CONNECTION: Duration = Duration::from_secs(1);

/// Exponential backoff: `initial`, doubling, capped at `max`.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    initial: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub(super) fn new(initial: Duration, max: Duration) -> Self {
        Backoff {
            initial,
            max,
            next: initial,
        }
    }

    /// The wait before the next attempt (and doubles the one after).
    pub(super) fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        delay
    }

    /// Starts over from the initial wait.
    pub(super) fn reset(&mut self) {
        self.next = self.initial;
    }
}

/// Where the control thread gets its next frontend from.
pub(crate) enum StreamSource {
    /// Server mode: frontends connect to our (non-blocking) listener.
    Accept(UnixListener),
    /// Client mode: we connect to the frontend's socket, `name` in the held `dir`.
    Connect {
        /// The frontend's socket's directory.
        dir: Arc<SocketDir>,
        /// Its name there.
        name: OsString,
        backoff: Backoff,
        /// When the last connection was made, if one was.
        connected_at: Option<Instant>,
    },
}

impl StreamSource {
    pub(crate) fn connect(dir: Arc<SocketDir>, name: OsString) -> Self {
        StreamSource::Connect {
            dir,
            name,
            backoff: Backoff::new(BACKOFF_INITIAL, BACKOFF_MAX),
            connected_at: None,
        }
    }

    /// The next frontend's stream; `None` once the port stops (or cannot wait any more).
    pub(super) fn next_stream(
        &mut self,
        stop: &Signals,
        log: &mut LogLimiter,
    ) -> Option<UnixStream> {
        match self {
            StreamSource::Accept(listener) => accept(listener, stop, log),
            StreamSource::Connect {
                dir,
                name,
                backoff,
                connected_at,
            } => {
                // Back off before reconnecting after a connection that did not last.
                if let Some(at) = connected_at.take() {
                    if at.elapsed() >= STABLE_CONNECTION {
                        backoff.reset();
                    } else if !pause(stop, backoff.next_delay())? {
                        return None;
                    }
                }
                let stream = connect(dir, name, backoff, stop, log)?;
                *connected_at = Some(Instant::now());
                Some(stream)
            }
        }
    }
}

/// Waits `delay` unless the port stops first: `Some(true)` when the delay passed.
fn pause(stop: &Signals, delay: Duration) -> Option<bool> {
    match wait(None, stop, Some(delay)) {
        Ok(Ready::Timeout | Ready::Socket) => Some(true),
        Ok(Ready::Stop) => None,
        Err(e) => {
            tracing::error!(error = %e, "vhost-user control thread cannot poll");
            None
        }
    }
}

fn accept(listener: &UnixListener, stop: &Signals, log: &mut LogLimiter) -> Option<UnixStream> {
    loop {
        match wait(Some(listener.as_raw_fd()), stop, None) {
            Ok(Ready::Stop) => return None,
            Ok(_) => {}
            Err(e) => {
                tracing::error!(error = %e, "vhost-user control thread cannot poll");
                return None;
            }
        }
        match listener.accept() {
            Ok((s, _)) => return Some(s),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => {
                if let Some(held_back) = log.allow() {
                    tracing::warn!(error = %e, held_back, "vhost-user accept failed");
                }
                pause(stop, BACKOFF_INITIAL)?;
            }
        }
    }
}

/// Connects to socket `name` in `dir`, retrying with `backoff` while it is missing or
/// refuses (or is not a socket: a frontend may be about to create it). Never blocks: a
/// blocking connect to a listener whose backlog is full would wait until it accepts, and
/// the port could not be dropped meanwhile.
fn connect(
    dir: &SocketDir,
    name: &OsStr,
    backoff: &mut Backoff,
    stop: &Signals,
    log: &mut LogLimiter,
) -> Option<UnixStream> {
    loop {
        match dir.connect(name) {
            Ok(s) => return Some(s),
            // The frontend is not (or no longer) there: the usual case while it starts. Or
            // its backlog is full (it is not accepting, e.g. busy with another client).
            Err(e) if e.is_absent() => {
                tracing::trace!(path = %dir.display_path(name).display(), "vhost-user frontend not listening yet");
            }
            Err(e) => {
                if let Some(held_back) = log.allow() {
                    tracing::warn!(error = %e, held_back,
                        "cannot connect to the vhost-user frontend; retrying");
                }
            }
        }
        pause(stop, backoff.next_delay())?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_50ms_and_is_capped_at_1s() {
        let mut b = Backoff::new(BACKOFF_INITIAL, BACKOFF_MAX);
        let delays: Vec<u128> = (0..8).map(|_| b.next_delay().as_millis()).collect();
        assert_eq!(delays, [50, 100, 200, 400, 800, 1000, 1000, 1000]);
        b.reset();
        assert_eq!(b.next_delay(), BACKOFF_INITIAL);
    }

    #[test]
    fn a_stop_ends_a_pause_at_once() {
        let stop = Signals::new().unwrap();
        stop.stop();
        let started = Instant::now();
        assert_eq!(pause(&stop, Duration::from_secs(10)), None);
        assert!(started.elapsed() < Duration::from_secs(1));
    }
}
