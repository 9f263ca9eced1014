//! The two eventfds of a queue: the kick we write, the call we sleep on.

use std::os::fd::AsRawFd;
use std::time::Duration;

use vmm_sys_util::epoll::{ControlOperation, Epoll, EpollEvent, EventSet};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

use crate::error::ClientError;

/// A queue's notifications.
#[derive(Debug)]
pub(crate) struct Notifier {
    pub(crate) kick: EventFd,
    pub(crate) call: EventFd,
    epoll: Epoll,
}

impl Notifier {
    pub(crate) fn new() -> Result<Notifier, ClientError> {
        let kick = EventFd::new(EFD_NONBLOCK).map_err(ClientError::EventFd)?;
        let call = EventFd::new(EFD_NONBLOCK).map_err(ClientError::EventFd)?;
        let epoll = Epoll::new().map_err(ClientError::EventFd)?;
        epoll
            .ctl(
                ControlOperation::Add,
                call.as_raw_fd(),
                EpollEvent::new(EventSet::IN, 0),
            )
            .map_err(ClientError::EventFd)?;
        Ok(Notifier { kick, call, epoll })
    }

    /// Tells the backend there is something new.
    pub(crate) fn kick(&self) -> Result<(), ClientError> {
        self.kick.write(1).map_err(ClientError::EventFd)
    }

    /// Sleeps until the backend calls or `timeout` passes (rounded up to whole
    /// milliseconds); then clears the call. True when it called.
    pub(crate) fn wait_call(&self, timeout: Duration) -> Result<bool, ClientError> {
        let ms = timeout.as_micros().div_ceil(1000);
        let ms = i32::try_from(ms).unwrap_or(i32::MAX);
        let mut events = [EpollEvent::default()];
        let n = loop {
            match self.epoll.wait(ms, &mut events) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(ClientError::EventFd(e)),
            }
        };
        // Non-blocking: an empty counter is fine.
        let _ = self.call.read();
        Ok(n > 0)
    }

    /// The call eventfd, for callers that wait on several things in their own epoll set.
    pub(crate) fn call_fd(&self) -> std::os::fd::RawFd {
        self.call.as_raw_fd()
    }
}
