//! The service manager's notification socket (`sd_notify(3)`): state lines, and
//! descriptors for its file descriptor store.

use std::ffi::OsString;
use std::io::IoSlice;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::os::unix::ffi::OsStrExt;

use nix::sys::socket::{
    sendmsg, setsockopt, socket, sockopt, AddressFamily, ControlMessage, MsgFlags, SockFlag,
    SockType, UnixAddr,
};
use nix::sys::time::TimeVal;

/// How long a notification may wait for room in the manager's queue.
const SEND_TIMEOUT_SECS: i64 = 5;

/// Why a notification was not sent.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    /// `$NOTIFY_SOCKET` names no usable address.
    #[error("NOTIFY_SOCKET {0:?} is not a socket path or an abstract name (@name)")]
    Address(OsString),
    /// The socket call failed.
    #[error("{call}: {source}")]
    Socket {
        /// Which call.
        call: &'static str,
        /// The error.
        source: nix::Error,
    },
}

/// The address systemd listens on for this service (`$NOTIFY_SOCKET`), and one datagram
/// socket to send there (made once: a record of the file descriptor store is several
/// notifications).
#[derive(Debug, Clone)]
pub struct NotifySocket {
    addr: UnixAddr,
    socket: std::sync::Arc<std::os::fd::OwnedFd>,
}

impl NotifySocket {
    /// The socket `$NOTIFY_SOCKET` names, when the service manager set one.
    pub fn from_env() -> Option<Result<NotifySocket, NotifyError>> {
        std::env::var_os("NOTIFY_SOCKET").map(|path| NotifySocket::at(&path))
    }

    /// The socket at `path` (a file, or `@name` in the abstract namespace).
    pub fn at(path: &std::ffi::OsStr) -> Result<NotifySocket, NotifyError> {
        let bytes = path.as_bytes();
        let addr = match bytes.strip_prefix(b"@") {
            Some(name) => UnixAddr::new_abstract(name),
            None if bytes.starts_with(b"/") => UnixAddr::new(path),
            None => return Err(NotifyError::Address(path.to_os_string())),
        }
        .map_err(|_| NotifyError::Address(path.to_os_string()))?;
        let socket = socket(
            AddressFamily::Unix,
            SockType::Datagram,
            SockFlag::SOCK_CLOEXEC,
            None,
        )
        .map_err(|source| NotifyError::Socket {
            call: "socket",
            source,
        })?;
        // A manager that stops reading must not hold weftd (a full queue blocks a send).
        setsockopt(
            &socket,
            sockopt::SendTimeout,
            &TimeVal::new(SEND_TIMEOUT_SECS, 0),
        )
        .map_err(|source| NotifyError::Socket {
            call: "SO_SNDTIMEO",
            source,
        })?;
        Ok(NotifySocket {
            addr,
            socket: std::sync::Arc::new(socket),
        })
    }

    /// Sends `state` (newline-separated `KEY=VALUE` lines) with `fds` attached.
    pub fn send(&self, state: &str, fds: &[BorrowedFd<'_>]) -> Result<(), NotifyError> {
        let raw: Vec<RawFd> = fds.iter().map(|fd| fd.as_raw_fd()).collect();
        let rights = [ControlMessage::ScmRights(&raw)];
        let control: &[ControlMessage<'_>] = if raw.is_empty() { &[] } else { &rights };
        sendmsg(
            self.socket.as_raw_fd(),
            &[IoSlice::new(state.as_bytes())],
            control,
            MsgFlags::MSG_NOSIGNAL,
            Some(&self.addr),
        )
        .map_err(|source| NotifyError::Socket {
            call: "sendmsg",
            source,
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixDatagram;

    #[test]
    fn relative_paths_are_refused() {
        assert!(matches!(
            NotifySocket::at(std::ffi::OsStr::new("notify.sock")),
            Err(NotifyError::Address(_))
        ));
    }

    #[test]
    fn state_and_descriptors_arrive_together() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let receiver = UnixDatagram::bind(&path).unwrap();
        let socket = NotifySocket::at(path.as_os_str()).unwrap();
        let file = tempfile::tempfile().unwrap();
        socket.send("FDSTORE=1\nFDNAME=x", &[file.as_fd()]).unwrap();
        let mut buf = [0u8; 64];
        let mut space = nix::cmsg_space!([RawFd; 4]);
        let mut iov = [std::io::IoSliceMut::new(&mut buf)];
        let msg = nix::sys::socket::recvmsg::<()>(
            receiver.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::empty(),
        )
        .unwrap();
        let fds: Vec<RawFd> = msg
            .cmsgs()
            .unwrap()
            .flat_map(|c| match c {
                nix::sys::socket::ControlMessageOwned::ScmRights(fds) => fds,
                _ => Vec::new(),
            })
            .collect();
        let len = msg.bytes;
        assert_eq!(&buf[..len], b"FDSTORE=1\nFDNAME=x");
        assert_eq!(fds.len(), 1);
        for fd in fds {
            let _ = nix::unistd::close(fd);
        }
    }
}
