//! The control socket's messages and the descriptors that travel with them
//! (`SCM_RIGHTS`), and the interrupt eventfds of the rings.

use std::fs::File;
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::Path;

use nix::errno::Errno;
use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};

use crate::wire::MSG_SIZE;

/// Most descriptors read with one message: memif sends at most one; more are counted as
/// extra (and closed), not left to truncate silently.
const MAX_FDS: usize = 4;

/// One message received.
#[derive(Debug)]
pub(crate) enum Received {
    /// A message (its bytes, which may be of the wrong size) and its descriptors.
    Message {
        /// The bytes received (at most 128 are kept).
        bytes: Vec<u8>,
        /// True when the datagram was longer than 128 bytes.
        truncated: bool,
        /// The descriptors that came with it.
        fds: Vec<OwnedFd>,
        /// True when more descriptors came than were read (the rest are closed).
        fds_cut: bool,
    },
    /// The peer closed the connection.
    Closed,
    /// Nothing to read now.
    WouldBlock,
}

/// Reads one message from the non-blocking `SOCK_SEQPACKET` socket `sock`.
pub(crate) fn receive(sock: BorrowedFd<'_>) -> io::Result<Received> {
    let mut buf = [0u8; MSG_SIZE];
    let mut cmsg = nix::cmsg_space!([RawFd; MAX_FDS]);
    let mut iov = [IoSliceMut::new(&mut buf)];
    let msg = match recvmsg::<()>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut cmsg),
        MsgFlags::MSG_CMSG_CLOEXEC | MsgFlags::MSG_DONTWAIT,
    ) {
        Ok(m) => m,
        Err(Errno::EAGAIN) => return Ok(Received::WouldBlock),
        Err(Errno::EINTR) => return Ok(Received::WouldBlock),
        Err(e) => return Err(e.into()),
    };
    let mut fds = Vec::new();
    for c in msg.cmsgs().map_err(io::Error::from)? {
        if let ControlMessageOwned::ScmRights(raw) = c {
            fds.extend(raw.into_iter().map(own));
        }
    }
    let bytes = msg.bytes;
    let truncated = msg.flags.contains(MsgFlags::MSG_TRUNC);
    let fds_cut = msg.flags.contains(MsgFlags::MSG_CTRUNC);

    if bytes == 0 && fds.is_empty() && !truncated {
        return Ok(Received::Closed);
    }
    Ok(Received::Message {
        bytes: buf[..bytes.min(MSG_SIZE)].to_vec(),
        truncated,
        // More descriptors than room: the kernel closed the rest.
        fds_cut,
        fds,
    })
}

/// Takes ownership of a descriptor the kernel just installed for us.
#[allow(unsafe_code)]
fn own(fd: RawFd) -> OwnedFd {
    use std::os::fd::FromRawFd;
    // SAFETY: `fd` was installed in this process by recvmsg's SCM_RIGHTS a moment ago; no
    // other owner exists, so the OwnedFd is its only owner and closes it once.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// Sends one message, with `fd` passed beside it when given.
pub(crate) fn send(
    sock: BorrowedFd<'_>,
    bytes: &[u8; MSG_SIZE],
    fd: Option<BorrowedFd<'_>>,
) -> io::Result<()> {
    let iov = [IoSlice::new(bytes)];
    let raw = fd.map(|f| [f.as_raw_fd()]);
    let cmsgs: Vec<ControlMessage<'_>> = raw.iter().map(|r| ControlMessage::ScmRights(r)).collect();
    let n = sendmsg::<()>(
        sock.as_raw_fd(),
        &iov,
        &cmsgs,
        MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
        None,
    )?;
    if n != MSG_SIZE {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            "short control message",
        ));
    }
    Ok(())
}

/// A ring's interrupt: an eventfd, non-blocking, written by the producer after it
/// published frames and read by the consumer.
#[derive(Debug)]
pub(crate) struct Interrupt(File);

/// Why a descriptor is no interrupt.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InterruptError {
    /// Not an eventfd (a pipe or file could block or wake forever).
    #[error("the ring's interrupt descriptor is not an eventfd")]
    NotEventFd,
    /// It could not be inspected or made non-blocking.
    #[error("cannot use the interrupt descriptor: {0}")]
    Io(#[from] io::Error),
}

impl Interrupt {
    /// A new eventfd (the client's, for a ring it announces).
    pub(crate) fn new() -> io::Result<Interrupt> {
        let fd = nix::sys::eventfd::EventFd::from_flags(
            nix::sys::eventfd::EfdFlags::EFD_NONBLOCK | nix::sys::eventfd::EfdFlags::EFD_CLOEXEC,
        )?;
        Ok(Interrupt(File::from(OwnedFd::from(fd))))
    }

    /// The peer's descriptor, if it is an eventfd; made non-blocking.
    pub(crate) fn from_peer(fd: OwnedFd) -> Result<Interrupt, InterruptError> {
        let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
        if link != Path::new("anon_inode:[eventfd]") {
            return Err(InterruptError::NotEventFd);
        }
        let file = File::from(fd);
        weft_sys::socket::set_nonblocking(&file)?;
        Ok(Interrupt(file))
    }

    /// Signals the consumer.
    pub(crate) fn signal(&self) -> bool {
        (&self.0).write(&1u64.to_ne_bytes()).is_ok()
    }

    /// Empties the counter; true when it held something.
    pub(crate) fn drain(&self) -> bool {
        let mut b = [0u8; 8];
        (&self.0).read(&mut b).is_ok_and(|n| n == 8)
    }
}

impl AsFd for Interrupt {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}
