//! The new process's side: a [`MemifHandover`] checked as a peer's messages are (it is
//! untrusted: another binary wrote it) and its descriptors by index, kind and use, then
//! the listener and the connection rebuilt from them.

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixListener;
use std::sync::Arc;

use nix::sys::socket::SockType;
use weft_sys::event::EventFd;
use weft_vhost::{FileId, HandoverFds, SocketDir};

use super::{io, ConnectionHandover, MemifHandover, MemifHandoverError, RingHandover};
use crate::config::{MemifConfig, Role, MAX_LOG2_RING_SIZE, MAX_REGIONS};
use crate::connection::{Connection, RxRing, TxRing};
use crate::fds::Interrupt;
use crate::layout::ClientLayout;
use crate::memory::SharedMemory;
use crate::ring::{OwnBuffers, Producer, RingPlace};
use crate::wire::Direction;

/// What a hand-over gives the port to run with.
pub(crate) struct Adopted {
    /// Server: the listener, and the socket file it is bound to (when that is still
    /// there, to remove when the port closes).
    pub(crate) listener: Option<(UnixListener, Option<FileId>)>,
    /// The connected peer.
    pub(crate) session: Option<AdoptedSession>,
}

/// A connected peer taken over.
pub(crate) struct AdoptedSession {
    pub(crate) socket: OwnedFd,
    pub(crate) connection: Arc<Connection>,
    pub(crate) peer_name: String,
    pub(crate) peer_interface: String,
}

fn invalid(why: impl Into<String>) -> MemifHandoverError {
    MemifHandoverError::Invalid(why.into())
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Server => "a server",
        Role::Client => "a client",
    }
}

/// Every descriptor index `h` names, with what it is to be.
fn named(h: &MemifHandover) -> Vec<(usize, &'static str)> {
    let mut out = Vec::new();
    if let Some(l) = h.listener {
        out.push((l, "listening socket"));
    }
    if let Some(c) = &h.connection {
        out.push((c.socket, "connection"));
        out.extend(c.regions.iter().map(|r| (r.fd, "memory region")));
        out.extend(c.rx.iter().chain(&c.tx).map(|r| (r.interrupt, "interrupt")));
    }
    out
}

/// Checks `h` against the port's `config` and rebuilds what it describes.
pub(crate) fn adopt(
    dir: &SocketDir,
    name: &OsStr,
    config: &MemifConfig,
    h: MemifHandover,
    fds: Vec<OwnedFd>,
    wake: &Arc<EventFd>,
) -> Result<Adopted, MemifHandoverError> {
    if h.version != super::HANDOVER_VERSION {
        return Err(MemifHandoverError::Version {
            found: h.version,
            expected: super::HANDOVER_VERSION,
        });
    }
    let mismatch =
        |expected: String, found: String| MemifHandoverError::Mismatch { expected, found };
    if (h.role, h.id) != (config.role, config.id) {
        return Err(mismatch(
            format!("{} with id {}", role_name(config.role), config.id),
            format!("{} with id {}", role_name(h.role), h.id),
        ));
    }
    if h.listener.is_some() != (config.role == Role::Server) {
        return Err(invalid(
            "a server comes with its listener, a client without one",
        ));
    }
    let mut fds = HandoverFds::check(named(&h), fds)?;
    let listener = match h.listener {
        Some(index) => {
            let fd = fds.socket_of_type(index, "listening socket", SockType::SeqPacket, true)?;
            let listener = UnixListener::from(fd);
            listener
                .set_nonblocking(true)
                .map_err(io("setting up the listening socket"))?;
            // The socket file, removed when the port closes as though bound here. One
            // that is gone does not stop the hand-over: the listener still works.
            Some((listener, dir.socket_id(name).ok()))
        }
        None => None,
    };
    let session = match h.connection {
        Some(c) => Some(adopt_connection(config, c, &mut fds, wake)?),
        None => None,
    };
    Ok(Adopted { listener, session })
}

fn adopt_connection(
    config: &MemifConfig,
    c: ConnectionHandover,
    fds: &mut HandoverFds,
    wake: &Arc<EventFd>,
) -> Result<AdoptedSession, MemifHandoverError> {
    if c.buffer_size != config.buffer_size {
        return Err(MemifHandoverError::Mismatch {
            expected: format!("buffers of {} bytes", config.buffer_size),
            found: format!("buffers of {} bytes", c.buffer_size),
        });
    }
    let pairs = 1..=usize::from(config.queue_pairs);
    if !pairs.contains(&c.rx.len()) || !pairs.contains(&c.tx.len()) {
        return Err(invalid(format!(
            "{} receive and {} transmit rings, the port has {} queue pairs",
            c.rx.len(),
            c.tx.len(),
            config.queue_pairs
        )));
    }
    if c.regions.is_empty() || c.regions.len() > usize::from(MAX_REGIONS) {
        return Err(invalid(format!("{} regions", c.regions.len())));
    }
    let total = c
        .regions
        .iter()
        .try_fold(0u64, |t, r| t.checked_add(r.size));
    if total.is_none_or(|t| t > config.max_region_bytes) {
        return Err(invalid(format!(
            "regions over the port's limit of {} bytes",
            config.max_region_bytes
        )));
    }
    let socket = fds.socket_of_type(c.socket, "connection", SockType::SeqPacket, false)?;
    weft_sys::socket::set_nonblocking(&socket).map_err(io("setting up the connection"))?;
    let mut regions = Vec::with_capacity(c.regions.len());
    for r in &c.regions {
        regions.push((r.size, OwnedFd::from(fds.file(r.fd, "memory region")?)));
    }
    let memory = SharedMemory::map_peer(regions)?;
    let layout = check_layout(config, &c)?;
    let place = |r: &RingHandover, direction: Direction, index: usize| {
        if r.log2 > MAX_LOG2_RING_SIZE {
            return Err(invalid(format!("a ring of 2^{} slots", r.log2)));
        }
        let place = RingPlace::new(&memory, r.region, r.offset, r.log2)
            .ok_or_else(|| invalid(format!("ring {index} lies outside its region")))?;
        place
            .check_cookie(&memory)
            .map_err(|e| invalid(format!("ring {index}: {e}")))?;
        let own = match layout {
            Some(layout) => {
                let index = u16::try_from(index).map_err(|_| invalid("too many rings"))?;
                let expected = (0, layout.ring_offset(direction, index), layout.log2);
                if (r.region, r.offset, r.log2) != expected {
                    return Err(invalid(format!(
                        "ring {index} is not where the client's layout puts it"
                    )));
                }
                Some(OwnBuffers {
                    layout,
                    direction,
                    index,
                })
            }
            None => None,
        };
        Ok((place, own))
    };
    let (rx_dir, tx_dir) = match config.role {
        Role::Server => (Direction::ClientToServer, Direction::ServerToClient),
        Role::Client => (Direction::ServerToClient, Direction::ClientToServer),
    };
    let mut rx = Vec::with_capacity(c.rx.len());
    for (i, r) in c.rx.iter().enumerate() {
        let (place, own) = place(r, rx_dir, i)?;
        let offered = match (own, r.offered) {
            (Some(_), Some(o)) => o,
            (None, None) => 0,
            _ => {
                return Err(invalid(
                    "only a client's receive rings say what was offered",
                ))
            }
        };
        rx.push(RxRing::new(place, interrupt(fds, r.interrupt)?, own).resumed(r.position, offered));
    }
    let mut tx = Vec::with_capacity(c.tx.len());
    for (i, r) in c.tx.iter().enumerate() {
        let (place, own) = place(r, tx_dir, i)?;
        if r.offered.is_some() {
            return Err(invalid("a transmit ring says what was offered"));
        }
        let mut producer = Producer::new(place, config.role, own, c.buffer_size);
        producer.resume_at(r.position);
        tx.push(TxRing {
            producer,
            interrupt: interrupt(fds, r.interrupt)?,
        });
    }
    let connection = Arc::new(Connection::new(
        memory,
        config.role,
        c.buffer_size,
        rx,
        tx,
        Arc::clone(wake),
    ));
    Ok(AdoptedSession {
        socket,
        connection,
        peer_name: c.peer_name,
        peer_interface: c.peer_interface,
    })
}

/// A client's layout: one region it fits in, as many rings as the layout has, buffers
/// of the port's size. A server has none.
fn check_layout(
    config: &MemifConfig,
    c: &ConnectionHandover,
) -> Result<Option<ClientLayout>, MemifHandoverError> {
    match (config.role, c.layout) {
        (Role::Server, None) => Ok(None),
        (Role::Client, Some(l)) => {
            let fits = c.regions.len() == 1
                && l.buffer_size == c.buffer_size
                && usize::from(l.c2s) == c.tx.len()
                && usize::from(l.s2c) == c.rx.len()
                && l.log2 <= MAX_LOG2_RING_SIZE
                && c.regions.first().is_some_and(|r| l.region_size() <= r.size);
            if fits {
                Ok(Some(l))
            } else {
                Err(invalid(
                    "the client's layout does not match its region and rings",
                ))
            }
        }
        (Role::Server, Some(_)) => Err(invalid("a server's connection has a client layout")),
        (Role::Client, None) => Err(invalid("a client's connection has no layout")),
    }
}

fn interrupt(fds: &mut HandoverFds, index: usize) -> Result<Interrupt, MemifHandoverError> {
    let file = fds.eventfd(index, "interrupt")?;
    Interrupt::from_peer(OwnedFd::from(file))
        .map_err(|e| invalid(format!("interrupt {index}: {e}")))
}
