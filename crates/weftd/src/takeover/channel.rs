//! One hand-over message at a time over a Unix stream socket: an 8-byte header (magic and
//! length) carrying the message's descriptors as `SCM_RIGHTS`, then the message as JSON.
//!
//! Both ends are weftd processes run by root, but a half-written message, a peer that dies
//! mid-way or a binary that frames differently must end the hand-over with an error, never
//! a hang, a panic or a leaked descriptor: lengths and descriptor counts are bounded, reads
//! time out, and descriptors that arrive where none belong are closed and refused.

use std::io::{IoSlice, IoSliceMut, Write};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// The largest message body (a whole FDB and state file fit with room to spare).
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;
/// The most descriptors one message carries (the kernel's `SCM_MAX_FD`).
pub const MAX_FDS_PER_MESSAGE: usize = 253;

const MAGIC: [u8; 4] = *b"WFTH";
const HEADER_LEN: usize = 8;

/// Why a message could not be sent or received.
#[derive(Debug, thiserror::Error)]
pub enum HandoverError {
    /// The socket failed (or the peer went away).
    #[error("hand-over socket: {0}")]
    Io(#[from] std::io::Error),
    /// The peer closed the connection before a whole message.
    #[error("the other weftd closed the hand-over connection mid-message")]
    Closed,
    /// A header that is not this protocol's.
    #[error("the other weftd does not frame hand-over messages as this one does (bad magic)")]
    BadMagic,
    /// A body beyond the bound.
    #[error("a hand-over message of {0} bytes is above the limit of {MAX_MESSAGE_BYTES}")]
    TooLarge(usize),
    /// More descriptors than one message may carry.
    #[error("{0} descriptors in one hand-over message: at most {MAX_FDS_PER_MESSAGE}")]
    TooManyFds(usize),
    /// Descriptors arrived with the body rather than the header, or were cut off.
    #[error("hand-over descriptors arrived out of place or cut off")]
    StrayFds,
    /// The body is not the message expected.
    #[error("a hand-over message could not be read: {0}")]
    Decode(#[from] serde_json::Error),
}

/// A hand-over connection. See the [module docs](self).
#[derive(Debug)]
pub struct HandoverChannel {
    stream: UnixStream,
}

impl HandoverChannel {
    /// A channel on `stream`, whose reads and writes give up after `timeout`.
    pub fn new(stream: UnixStream, timeout: Duration) -> Result<Self, HandoverError> {
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        Ok(HandoverChannel { stream })
    }

    /// Changes how long reads and writes wait.
    pub fn set_timeout(&mut self, timeout: Duration) -> Result<(), HandoverError> {
        self.stream.set_read_timeout(Some(timeout))?;
        self.stream.set_write_timeout(Some(timeout))?;
        Ok(())
    }

    /// Sends `message` with `fds` attached (the peer receives duplicates; these stay open).
    pub fn send<T: Serialize>(
        &mut self,
        message: &T,
        fds: &[BorrowedFd<'_>],
    ) -> Result<(), HandoverError> {
        if fds.len() > MAX_FDS_PER_MESSAGE {
            return Err(HandoverError::TooManyFds(fds.len()));
        }
        let body = serde_json::to_vec(message)?;
        let len = u32::try_from(body.len())
            .ok()
            .filter(|_| body.len() <= MAX_MESSAGE_BYTES)
            .ok_or(HandoverError::TooLarge(body.len()))?;
        let mut header = [0u8; HEADER_LEN];
        header[..4].copy_from_slice(&MAGIC);
        header[4..].copy_from_slice(&len.to_le_bytes());
        let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
        let cmsgs = [ControlMessage::ScmRights(&raw)];
        let cmsgs: &[ControlMessage<'_>] = if raw.is_empty() { &[] } else { &cmsgs };
        // The descriptors ride on the header's first byte; a short send means the rest of
        // the header still has to go, without them.
        let sent = sendmsg::<()>(
            self.stream.as_raw_fd(),
            &[IoSlice::new(&header)],
            cmsgs,
            MsgFlags::MSG_NOSIGNAL,
            None,
        )
        .map_err(std::io::Error::from)?;
        self.stream.write_all(header.get(sent..).unwrap_or(&[]))?;
        self.stream.write_all(&body)?;
        Ok(())
    }

    /// Receives one message and the descriptors that came with it.
    pub fn recv<T: DeserializeOwned>(&mut self) -> Result<(T, Vec<OwnedFd>), HandoverError> {
        let mut header = [0u8; HEADER_LEN];
        let mut fds = Vec::new();
        let mut got = 0;
        while got < HEADER_LEN {
            // Descriptors come with the header's first byte, and only then.
            let mut arrived = Vec::new();
            let (n, truncated) = self.recv_part(&mut header[got..], &mut arrived)?;
            if truncated || (got > 0 && !arrived.is_empty()) {
                return Err(HandoverError::StrayFds);
            }
            if n == 0 {
                return Err(HandoverError::Closed);
            }
            fds.extend(arrived);
            got += n;
        }
        if header[..4] != MAGIC {
            return Err(HandoverError::BadMagic);
        }
        let len = u32::from_le_bytes([header[4], header[5], header[6], header[7]]) as usize;
        if len > MAX_MESSAGE_BYTES {
            return Err(HandoverError::TooLarge(len));
        }
        let mut body = vec![0u8; len];
        let mut filled = 0;
        while filled < len {
            let mut stray = Vec::new();
            let (n, truncated) = self.recv_part(&mut body[filled..], &mut stray)?;
            if truncated || !stray.is_empty() {
                return Err(HandoverError::StrayFds);
            }
            if n == 0 {
                return Err(HandoverError::Closed);
            }
            filled += n;
        }
        Ok((serde_json::from_slice(&body)?, fds))
    }

    /// One `recvmsg` into `buf`, taking any descriptors into `fds` (owned at once, so an
    /// error path closes them). Returns the bytes read and whether descriptors were cut off.
    fn recv_part(
        &mut self,
        buf: &mut [u8],
        fds: &mut Vec<OwnedFd>,
    ) -> Result<(usize, bool), HandoverError> {
        let mut space = nix::cmsg_space!([RawFd; MAX_FDS_PER_MESSAGE]);
        let mut iov = [IoSliceMut::new(buf)];
        let msg = recvmsg::<()>(
            self.stream.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        )
        .map_err(std::io::Error::from)?;
        let truncated = msg.flags.contains(MsgFlags::MSG_CTRUNC);
        for cmsg in msg.cmsgs().map_err(std::io::Error::from)? {
            if let ControlMessageOwned::ScmRights(raw) = cmsg {
                for fd in raw {
                    // SAFETY: the kernel just installed `fd` in this process for this
                    // message; nothing else owns it.
                    fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
                }
            }
        }
        Ok((msg.bytes, truncated))
    }

    /// The raw stream, for tests that write what a broken peer would.
    #[cfg(test)]
    pub(crate) fn stream_mut(&mut self) -> &mut UnixStream {
        &mut self.stream
    }
}

#[cfg(test)]
mod tests;
