//! File descriptors from the frontend: kick and call descriptors must be eventfds, and are
//! made non-blocking so that the data path never waits on them.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};
use std::path::Path;

use vmm_sys_util::eventfd::EventFd;

/// Why a descriptor was refused.
#[derive(Debug, thiserror::Error)]
pub enum FdError {
    /// The descriptor is not an eventfd (a pipe or a file could block the data path or
    /// wake it forever).
    #[error("not an eventfd")]
    NotEventFd,
    /// It could not be inspected or configured.
    #[error("cannot use descriptor: {0}")]
    Io(#[from] io::Error),
}

/// Takes ownership of `file` if it is an eventfd, made non-blocking.
///
/// Needs `/proc/self/fd` to tell an eventfd from other anonymous inodes.
pub(crate) fn eventfd_from_file(file: File) -> Result<EventFd, FdError> {
    check_eventfd(&file)?;
    weft_sys::socket::set_nonblocking(&file)?;
    // SAFETY: `into_raw_fd` hands over the only owner of the descriptor, so the EventFd
    // becomes its sole owner and closes it once.
    Ok(unsafe { EventFd::from_raw_fd(file.into_raw_fd()) })
}

/// Checks that `file` is an eventfd (needs `/proc/self/fd`, as [`eventfd_from_file`]).
pub(crate) fn check_eventfd(file: &File) -> Result<(), FdError> {
    let link = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
    if link != Path::new("anon_inode:[eventfd]") {
        return Err(FdError::NotEventFd);
    }
    Ok(())
}

/// Empties an eventfd's counter without blocking; true when it held something.
pub(crate) fn drain(fd: &EventFd) -> bool {
    fd.read().is_ok_and(|n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_of(fd: EventFd) -> File {
        // SAFETY: the EventFd gives up its descriptor, which the File then owns alone.
        unsafe { File::from_raw_fd(fd.into_raw_fd()) }
    }

    #[test]
    fn eventfd_is_accepted_and_made_non_blocking() {
        // A blocking eventfd: reading it empty would hang unless made non-blocking.
        let fd = eventfd_from_file(file_of(EventFd::new(0).unwrap())).unwrap();
        assert!(!drain(&fd));
        fd.write(3).unwrap();
        assert!(drain(&fd));
        assert!(!drain(&fd));
    }

    #[test]
    fn pipes_files_and_sockets_are_refused() {
        let mut fds = [0; 2];
        // SAFETY: pipe writes two descriptors into the array it is given.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: both descriptors were just created and are owned here only.
        let (r, w) = unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) };
        assert!(matches!(eventfd_from_file(r), Err(FdError::NotEventFd)));
        assert!(matches!(eventfd_from_file(w), Err(FdError::NotEventFd)));
        let file = File::open("/proc/self/status").unwrap();
        assert!(matches!(eventfd_from_file(file), Err(FdError::NotEventFd)));
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        // SAFETY: the stream gives up its descriptor to the File.
        let sock = unsafe { File::from_raw_fd(a.into_raw_fd()) };
        assert!(matches!(eventfd_from_file(sock), Err(FdError::NotEventFd)));
        // An epoll descriptor is an anonymous inode too, but not an eventfd.
        let ep = vmm_sys_util::epoll::Epoll::new().unwrap();
        // SAFETY: dup gives a new descriptor the File owns alone.
        let dup = unsafe { File::from_raw_fd(libc::dup(ep.as_raw_fd())) };
        assert!(matches!(eventfd_from_file(dup), Err(FdError::NotEventFd)));
    }
}
