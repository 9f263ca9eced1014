//! What both port kinds need to hand live ports to another weftd (a zero-gap upgrade): the
//! errors of a refused hand-over, the descriptor table a description indexes, the checks a
//! received descriptor passes before it is trusted, bytes written as hex in the JSON
//! description, and the receive half's parking spot.
//!
//! The parking spot (`RxParking`) is how state that lives in a receive half — owned by a
//! worker thread, behind a `Box<dyn PortRx>` weftd cannot reach — is read at a batch
//! boundary: when a batch ends with bytes still buffered in user space (a half-received TCP
//! frame, GRO datagrams not drained yet), `finish` moves the buffer into the spot (a pointer
//! move under an uncontended lock) and the next `receive` takes it back. A hand-over taken
//! while the workers are paused reads the spot; nothing else on the data path changes.

use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use weft_sys::sockopt::{self, SockOpt};

/// The version of the hand-over descriptions this build writes and reads.
pub const HANDOVER_VERSION: u32 = 1;

/// Refuses a hand-over written in another version of the description.
pub(crate) fn check_version(found: u32) -> Result<(), HandoverError> {
    if found == HANDOVER_VERSION {
        Ok(())
    } else {
        Err(HandoverError::Version {
            found,
            expected: HANDOVER_VERSION,
        })
    }
}

/// Why a hand-over could not be taken, or a received one was refused.
#[derive(Debug, thiserror::Error)]
pub enum HandoverError {
    /// A description of another version.
    #[error("hand-over description version {found}: this weftd reads version {expected}")]
    Version {
        /// The description's version.
        found: u32,
        /// The one this build reads.
        expected: u32,
    },
    /// The description names a descriptor that was not passed.
    #[error("hand-over descriptor {index} named, but {count} were passed")]
    FdIndex {
        /// The index named.
        index: usize,
        /// Descriptors passed.
        count: usize,
    },
    /// The description names a descriptor twice.
    #[error("hand-over descriptor {0} named twice")]
    FdReused(usize),
    /// Descriptors were passed that the description does not name.
    #[error("{unused} of {count} hand-over descriptors are not named by the description")]
    FdUnused {
        /// Descriptors nobody named.
        unused: usize,
        /// Descriptors passed.
        count: usize,
    },
    /// A descriptor that is not a socket (a file, a pipe...).
    #[error("hand-over descriptor for the {role} is not a socket: {source}")]
    NotASocket {
        /// What the descriptor was to be.
        role: &'static str,
        /// What the kernel said.
        #[source]
        source: std::io::Error,
    },
    /// A socket of another family, type or protocol than its role needs.
    #[error("hand-over descriptor for the {role} is the wrong kind of socket: {found}")]
    WrongSocket {
        /// What the descriptor was to be.
        role: &'static str,
        /// What it is.
        found: String,
    },
    /// A socket bound (or connected) elsewhere than the configuration says.
    #[error("hand-over socket for the {role} is at {found}, the configuration says {expected}")]
    WrongAddress {
        /// What the descriptor was to be.
        role: &'static str,
        /// What the configuration says.
        expected: String,
        /// Where the socket is.
        found: String,
    },
    /// The description does not fit the configuration it is adopted with.
    #[error("hand-over does not fit the configuration: {0}")]
    Mismatch(String),
    /// The description's state does not hold (lengths, offsets, counts out of range).
    #[error("hand-over state out of range: {0}")]
    BadState(String),
    /// A worker is inside a batch: the hand-over was taken while workers run.
    #[error("the port's receive half is inside a batch: pause the workers first")]
    WorkersRunning,
    /// The link thread did not stop at a consistent point in time.
    #[error("the link thread did not pause within {0:?}")]
    LinkThreadBusy(std::time::Duration),
    /// The port was closed: nothing left to hand over.
    #[error("the port is closed")]
    PortClosed,
    /// Duplicating a descriptor failed.
    #[error("duplicating the {role} descriptor: {source}")]
    Dup {
        /// What the descriptor is.
        role: &'static str,
        /// What the kernel said.
        #[source]
        source: std::io::Error,
    },
}

/// Duplicates a descriptor for the hand-over (the port keeps its own).
pub(crate) fn dup(fd: impl AsFd, role: &'static str) -> Result<OwnedFd, HandoverError> {
    fd.as_fd()
        .try_clone_to_owned()
        .map_err(|source| HandoverError::Dup { role, source })
}

/// The descriptors passed with a description, each taken once by the index it names; the
/// ones nobody took are an error ([`FdTable::finish`]).
#[derive(Debug)]
pub(crate) struct FdTable {
    fds: Vec<Option<OwnedFd>>,
}

impl FdTable {
    pub(crate) fn new(fds: Vec<OwnedFd>) -> FdTable {
        FdTable {
            fds: fds.into_iter().map(Some).collect(),
        }
    }

    /// The descriptor at `index`.
    pub(crate) fn take(&mut self, index: usize) -> Result<OwnedFd, HandoverError> {
        let count = self.fds.len();
        self.fds
            .get_mut(index)
            .ok_or(HandoverError::FdIndex { index, count })?
            .take()
            .ok_or(HandoverError::FdReused(index))
    }

    /// Every descriptor was named.
    pub(crate) fn finish(self) -> Result<(), HandoverError> {
        let unused = self.fds.iter().filter(|f| f.is_some()).count();
        if unused > 0 {
            return Err(HandoverError::FdUnused {
                unused,
                count: self.fds.len(),
            });
        }
        Ok(())
    }
}

/// What a received descriptor must be.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SocketKind {
    /// `AF_INET` or `AF_INET6`.
    pub(crate) family: i32,
    /// `SOCK_DGRAM`, `SOCK_STREAM`, `SOCK_RAW`.
    pub(crate) ty: i32,
    /// `IPPROTO_UDP`, `IPPROTO_TCP`.
    pub(crate) protocol: i32,
    /// A listening socket (`SO_ACCEPTCONN`); checked for stream sockets only.
    pub(crate) listening: bool,
}

impl SocketKind {
    /// The family of an address.
    pub(crate) fn family_of(addr: &SocketAddr) -> i32 {
        if addr.is_ipv4() {
            libc::AF_INET
        } else {
            libc::AF_INET6
        }
    }
}

fn get_int(fd: &OwnedFd, name: i32) -> std::io::Result<i32> {
    sockopt::get(fd, SockOpt::<libc::c_int>::new(libc::SOL_SOCKET, name))
}

/// Checks that `fd` is a socket of `kind`.
pub(crate) fn check_socket(
    fd: &OwnedFd,
    role: &'static str,
    kind: SocketKind,
) -> Result<(), HandoverError> {
    let ty =
        get_int(fd, libc::SO_TYPE).map_err(|source| HandoverError::NotASocket { role, source })?;
    let wrong = |found: String| HandoverError::WrongSocket { role, found };
    let family = get_int(fd, libc::SO_DOMAIN).map_err(|e| wrong(e.to_string()))?;
    let protocol = get_int(fd, libc::SO_PROTOCOL).map_err(|e| wrong(e.to_string()))?;
    if (family, ty, protocol) != (kind.family, kind.ty, kind.protocol) {
        return Err(wrong(format!(
            "family {family}, type {ty}, protocol {protocol}; wanted family {}, type {}, \
             protocol {}",
            kind.family, kind.ty, kind.protocol
        )));
    }
    if ty == libc::SOCK_STREAM {
        let listening = get_int(fd, libc::SO_ACCEPTCONN).map_err(|e| wrong(e.to_string()))? != 0;
        if listening != kind.listening {
            return Err(wrong(if listening {
                "a listening socket".into()
            } else {
                "a socket that does not listen".into()
            }));
        }
    }
    Ok(())
}

/// Bytes as a hex string in the JSON description (half the size of a list of numbers).
pub(crate) mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    const DIGITS: &[u8; 16] = b"0123456789abcdef";

    pub(crate) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        let mut out = String::with_capacity(bytes.len() * 2);
        for b in bytes {
            out.push(char::from(DIGITS[usize::from(b >> 4)]));
            out.push(char::from(DIGITS[usize::from(b & 15)]));
        }
        s.serialize_str(&out)
    }

    fn nibble(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        let s = s.as_bytes();
        if s.len() % 2 != 0 {
            return Err(serde::de::Error::custom("odd number of hex digits"));
        }
        s.chunks_exact(2)
            .map(|p| match (nibble(p[0]), nibble(p[1])) {
                (Some(h), Some(l)) => Ok(h << 4 | l),
                _ => Err(serde::de::Error::custom("not a hex digit")),
            })
            .collect()
    }
}

const IDLE: u8 = 0;
const BUSY: u8 = 1;
const PARKED: u8 = 2;

/// A receive half's parking spot (see the [module docs](self)).
#[derive(Debug)]
pub(crate) struct RxParking<T> {
    state: AtomicU8,
    slot: Mutex<Option<T>>,
}

impl<T> Default for RxParking<T> {
    fn default() -> Self {
        RxParking {
            state: AtomicU8::new(IDLE),
            slot: Mutex::new(None),
        }
    }
}

impl<T> RxParking<T> {
    fn slot(&self) -> MutexGuard<'_, Option<T>> {
        // The slot holds a value or none: a panic elsewhere cannot leave it half written.
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// At the start of a batch: what the last one parked, if anything.
    pub(crate) fn unpark(&self) -> Option<T> {
        let parked = self.state.swap(BUSY, Ordering::AcqRel) == PARKED;
        if parked {
            self.slot().take()
        } else {
            None
        }
    }

    /// At the end of a batch: `value` waits here until the next.
    pub(crate) fn park(&self, value: T) {
        *self.slot() = Some(value);
        self.state.store(PARKED, Ordering::Release);
    }

    /// At the end of a batch that left nothing buffered.
    pub(crate) fn idle(&self) {
        self.state.store(IDLE, Ordering::Release);
    }

    /// Reads what is parked (`None`: the half holds nothing), at a batch boundary.
    pub(crate) fn inspect<R>(&self, f: impl FnOnce(&T) -> R) -> Result<Option<R>, HandoverError> {
        let slot = self.slot();
        match self.state.load(Ordering::Acquire) {
            BUSY => Err(HandoverError::WorkersRunning),
            PARKED => Ok(slot.as_ref().map(f)),
            _ => Ok(None),
        }
    }
}
