//! The descriptors passed with a snapshot: every index the snapshot names checked before
//! anything is done with them (in range, named once, none passed unnamed), then each
//! taken as the kind it must be. A descriptor not taken is closed with the table. Public:
//! other port kinds' hand-overs (memif) check their descriptors the same way.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};

use nix::sys::socket::{getsockopt, sockopt, SockType};
use nix::sys::stat::{fstat, SFlag};

use super::{HandoverError, PortSnapshot};
use crate::fds::{check_eventfd, FdError};

/// Every descriptor index `snapshot` names, with what it is to be.
pub(super) fn named(snapshot: &PortSnapshot) -> Vec<(usize, &'static str)> {
    let mut out = Vec::new();
    if let Some(l) = snapshot.listener {
        out.push((l, "listening socket"));
    }
    if let Some(c) = &snapshot.connection {
        out.push((c.socket, "connection"));
        for r in c.memory.iter().flatten() {
            out.push((r.fd, "memory region"));
        }
        for ring in &c.rings {
            if let Some(call) = ring.call {
                out.push((call, "call eventfd"));
            }
            if let Some(kick) = ring.kick {
                out.push((kick, "kick eventfd"));
            }
        }
    }
    out
}

/// The descriptors passed with a description, each taken at most once.
#[derive(Debug)]
pub struct HandoverFds {
    fds: Vec<Option<OwnedFd>>,
}

impl HandoverFds {
    /// Checks that `named` (each index a description names, with what it is to be) names
    /// each of `fds` exactly once, and no other index.
    pub fn check(
        named: Vec<(usize, &'static str)>,
        fds: Vec<OwnedFd>,
    ) -> Result<Self, HandoverError> {
        let count = fds.len();
        let mut seen = vec![false; count];
        for (index, what) in named {
            match seen.get_mut(index) {
                None => return Err(HandoverError::FdIndex { index, what, count }),
                Some(true) => return Err(HandoverError::FdReused { index, what }),
                Some(s) => *s = true,
            }
        }
        if let Some(unnamed) = seen.iter().position(|s| !s) {
            return Err(HandoverError::FdUnused(unnamed));
        }
        Ok(HandoverFds {
            fds: fds.into_iter().map(Some).collect(),
        })
    }

    /// Descriptor `index` (checked to be named once: taken once).
    fn take(&mut self, index: usize, what: &'static str) -> Result<OwnedFd, HandoverError> {
        let count = self.fds.len();
        self.fds
            .get_mut(index)
            .ok_or(HandoverError::FdIndex { index, what, count })?
            .take()
            .ok_or(HandoverError::FdReused { index, what })
    }

    /// Descriptor `index`, a stream socket: listening or connected as `listening` says.
    pub fn socket(
        &mut self,
        index: usize,
        what: &'static str,
        listening: bool,
    ) -> Result<OwnedFd, HandoverError> {
        self.socket_of_type(index, what, SockType::Stream, listening)
    }

    /// Descriptor `index`, a socket of type `ty`: listening or connected as `listening`
    /// says.
    pub fn socket_of_type(
        &mut self,
        index: usize,
        what: &'static str,
        ty: SockType,
        listening: bool,
    ) -> Result<OwnedFd, HandoverError> {
        let fd = self.take(index, what)?;
        let expected = match (ty, listening) {
            (SockType::SeqPacket, true) => "a listening seqpacket socket",
            (SockType::SeqPacket, false) => "a connected seqpacket socket",
            (_, true) => "a listening stream socket",
            (_, false) => "a connected stream socket",
        };
        let wrong = |found| HandoverError::FdKind {
            index,
            what,
            expected,
            found,
        };
        let found = kind(&fd);
        if found != "a socket" {
            return Err(wrong(found));
        }
        if getsockopt(&fd, sockopt::SockType).ok() != Some(ty) {
            return Err(wrong("a socket of another type"));
        }
        match getsockopt(&fd, sockopt::AcceptConn) {
            Ok(l) if l == listening => Ok(fd),
            Ok(true) => Err(wrong("a listening socket")),
            Ok(false) => Err(wrong("a socket that is not listening")),
            Err(_) => Err(wrong("a socket that cannot be inspected")),
        }
    }

    /// Descriptor `index`, an eventfd (made ready for use as the frontend's are, when the
    /// replayed request takes it).
    pub fn eventfd(&mut self, index: usize, what: &'static str) -> Result<File, HandoverError> {
        let file = File::from(self.take(index, what)?);
        match check_eventfd(&file) {
            Ok(()) => Ok(file),
            Err(FdError::NotEventFd) => Err(HandoverError::FdKind {
                index,
                what,
                expected: "an eventfd",
                found: kind(&file),
            }),
            Err(FdError::Io(source)) => Err(HandoverError::Io {
                what: "inspecting an eventfd",
                source,
            }),
        }
    }

    /// Descriptor `index` as a file (memory: admitted as `SET_MEM_TABLE` admits it).
    pub fn file(&mut self, index: usize, what: &'static str) -> Result<File, HandoverError> {
        self.take(index, what).map(File::from)
    }
}

/// What a descriptor is, in words.
fn kind(fd: &impl AsFd) -> &'static str {
    let Ok(st) = fstat(fd) else {
        return "a descriptor that cannot be inspected";
    };
    match SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) {
        SFlag::S_IFSOCK => "a socket",
        SFlag::S_IFREG => "a regular file",
        SFlag::S_IFDIR => "a directory",
        SFlag::S_IFIFO => "a pipe",
        SFlag::S_IFCHR | SFlag::S_IFBLK => "a device",
        _ => "another kind of descriptor",
    }
}
