//! The one epoll and eventfd family weft uses: vmm-sys-util's, with the [`EventFd`] a
//! borrowable descriptor (`AsFd`), so that it can be polled beside sockets.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};

pub use vmm_sys_util::epoll::{ControlOperation, Epoll, EpollEvent, EventSet};

/// An eventfd counter (`vmm_sys_util::eventfd::EventFd`) that lends its descriptor.
#[derive(Debug)]
pub struct EventFd(vmm_sys_util::eventfd::EventFd);

impl EventFd {
    /// A counter at zero; `nonblocking` makes a read of zero fail with `WouldBlock`
    /// instead of waiting. Always close-on-exec.
    pub fn new(nonblocking: bool) -> io::Result<Self> {
        let flags = if nonblocking { libc::EFD_NONBLOCK } else { 0 };
        vmm_sys_util::eventfd::EventFd::new(flags | libc::EFD_CLOEXEC).map(EventFd)
    }

    /// Adds `v` to the counter (wakes whoever polls it).
    pub fn write(&self, v: u64) -> io::Result<()> {
        self.0.write(v)
    }

    /// Reads the counter and resets it.
    pub fn read(&self) -> io::Result<u64> {
        self.0.read()
    }

    /// A second descriptor for the same counter (for another thread).
    pub fn try_clone(&self) -> io::Result<Self> {
        self.0.try_clone().map(EventFd)
    }

    /// The vmm-sys-util counter inside (for APIs that take one).
    pub fn inner(&self) -> &vmm_sys_util::eventfd::EventFd {
        &self.0
    }
}

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the descriptor is open for as long as `self.0` lives (it closes it on
        // drop), which the borrow of `self` outlasts.
        unsafe { BorrowedFd::borrow_raw(self.0.as_raw_fd()) }
    }
}

/// Adds `fd` to `epoll`, watched for `events`, reporting `data`.
pub fn epoll_add(epoll: &Epoll, fd: impl AsFd, events: EventSet, data: u64) -> io::Result<()> {
    epoll.ctl(
        ControlOperation::Add,
        fd.as_fd().as_raw_fd(),
        EpollEvent::new(events, data),
    )
}

/// Removes `fd` from `epoll`.
pub fn epoll_delete(epoll: &Epoll, fd: impl AsFd) -> io::Result<()> {
    epoll.ctl(
        ControlOperation::Delete,
        fd.as_fd().as_raw_fd(),
        EpollEvent::default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_eventfd_wakes_its_epoll() {
        let kick = EventFd::new(true).unwrap();
        let epoll = Epoll::new().unwrap();
        epoll_add(&epoll, &kick, EventSet::IN, 7).unwrap();
        let mut events = [EpollEvent::default(); 2];
        assert_eq!(epoll.wait(0, &mut events).unwrap(), 0);
        kick.write(3).unwrap();
        assert_eq!(epoll.wait(100, &mut events).unwrap(), 1);
        assert_eq!(events[0].data(), 7);
        assert_eq!(kick.read().unwrap(), 3);
        epoll_delete(&epoll, &kick).unwrap();
        kick.write(1).unwrap();
        assert_eq!(epoll.wait(0, &mut events).unwrap(), 0);
    }

    #[test]
    fn an_empty_nonblocking_eventfd_would_block() {
        let kick = EventFd::new(true).unwrap();
        assert_eq!(kick.read().unwrap_err().kind(), io::ErrorKind::WouldBlock);
    }
}
