//! Handing a live TCP link to another weftd (a zero-gap upgrade), connection and all: the
//! peer sees nothing — no reconnection, no new handshake, no frame lost or doubled.
//!
//! What the link's state is: the listening socket (listening end), the connection when one
//! is up, the bytes the receive half read but did not deliver yet (a frame half received,
//! or whole frames a batch had no room for), and the bytes the transmit half queued that
//! the socket has not taken yet. With a key, authentication happens once, when the
//! connection starts ([`super::auth`]): frames carry no per-frame tag, counter or session
//! key, so an authenticated connection is carried as it is (the key is in both
//! configurations) and no handshake runs again. Not carried: counters (they start again
//! from zero) and, on a listening end, connections still in their handshake (their peer
//! times out and connects again, to the new process).
//!
//! Descriptor order (each named by its index in the description, every one exactly once):
//! the listening socket when listening, then the connection when one is up.
//!
//! How weftd calls it: take a [`TcpLinkHandoverSource`] when the link opens
//! ([`TcpLinkPort::handover_source`], before splitting it). At hand-over time, pause the
//! workers at a batch boundary, then call [`TcpLinkHandoverSource::handover`] (any thread):
//! it parks the link thread at a consistent point (waiting up to a connection attempt and a
//! handshake, [`HandoverError::LinkThreadBusy`] past that), reads the state and duplicates
//! the descriptors. The link thread stays parked — nothing flushes, accepts or reconnects —
//! until either the process exits, or the port is dropped (its descriptors are closed
//! without shutting the connection down), or [`TcpLinkHandoverSource::resume`] is called
//! because the hand-over was abandoned: then resume the workers too and the link goes on
//! exactly where it was.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use serde::{Deserialize, Serialize};

use super::conn::{self, lock, Dial, Shared};
use super::framing::Reassembler;
use super::{LinkGuard, TcpLinkConfig, TcpLinkMode, TcpLinkPort};
use crate::error::OverlayError;
use crate::handover::{
    check_socket, dup, hex_bytes, FdTable, HandoverError, SocketKind, HANDOVER_VERSION,
};

/// The description of a TCP link handed over, sent as JSON beside its descriptors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpLinkHandover {
    /// [`HANDOVER_VERSION`].
    pub version: u32,
    /// The link id (both configurations must agree).
    pub link_id: u32,
    /// The listening socket's descriptor (index into the descriptors passed), when the
    /// link listens.
    pub listener_fd: Option<usize>,
    /// The connection, when one is up.
    pub connection: Option<TcpConnectionHandover>,
}

/// A live connection of a link handed over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpConnectionHandover {
    /// Its descriptor's index.
    pub fd: usize,
    /// It passed the key's handshake (the link has a key).
    pub authenticated: bool,
    /// Bytes read from the peer and not delivered yet: frames, and the start of one.
    #[serde(with = "hex_bytes")]
    pub received: Vec<u8>,
    /// Bytes queued for the peer that the socket has not taken yet.
    #[serde(with = "hex_bytes")]
    pub unsent: Vec<u8>,
}

/// A connection carried into [`TcpLinkPort::start`].
pub(crate) struct Carried<'a> {
    pub(crate) stream: TcpStream,
    pub(crate) rx: &'a [u8],
    pub(crate) tx: &'a [u8],
}

/// What weftd keeps of a TCP link to hand it over later (see the [module docs](self)). It
/// holds nothing open: once the port is closed, [`Self::handover`] says so.
#[derive(Debug, Clone)]
pub struct TcpLinkHandoverSource {
    guard: Weak<LinkGuard>,
}

impl TcpLinkPort {
    /// What weftd keeps to hand this link over later (take it before
    /// [`TcpLinkPort::split`]).
    pub fn handover_source(&self) -> TcpLinkHandoverSource {
        TcpLinkHandoverSource {
            guard: Arc::downgrade(&self.rx.guard),
        }
    }

    /// Takes over a link another process handed over: `handover` and `fds` as
    /// [`TcpLinkHandoverSource::handover`] gave them, `config` the link's configuration.
    /// The descriptors are checked (TCP sockets, listening or connected where `config`
    /// says) and the link starts where the other process left it, its connection up; what
    /// does not hold is refused, and every descriptor passed is closed.
    pub fn adopt(
        config: &TcpLinkConfig,
        handover: TcpLinkHandover,
        fds: Vec<OwnedFd>,
    ) -> Result<TcpLinkPort, OverlayError> {
        crate::handover::check_version(handover.version)?;
        config.validate()?;
        if handover.link_id != config.link_id {
            return Err(HandoverError::Mismatch(format!(
                "link {} handed over, link {} configured",
                handover.link_id, config.link_id
            ))
            .into());
        }
        let mut table = FdTable::new(fds);
        let (dial, listening_port) = adopt_dial(config, &handover, &mut table)?;
        let carried = match &handover.connection {
            Some(c) => Some(adopt_connection(config, c, listening_port, &mut table)?),
            None => None,
        };
        table.finish()?;
        TcpLinkPort::start(config, dial, carried)
    }
}

impl TcpLinkHandoverSource {
    /// Parks the link thread, reads the link's state and duplicates its descriptors. Call
    /// it with the workers paused at a batch boundary (else
    /// [`HandoverError::WorkersRunning`], or bytes read or queued afterwards are missing).
    /// The link thread stays parked until [`Self::resume`] (on success; on an error it
    /// goes on at once).
    pub fn handover(&self) -> Result<(TcpLinkHandover, Vec<OwnedFd>), OverlayError> {
        let guard = self.guard.upgrade().ok_or(HandoverError::PortClosed)?;
        let shared = &guard.shared;
        shared.park.request(|| shared.wake())?;
        match describe(shared) {
            Ok(taken) => {
                shared.park.handed_over();
                Ok(taken)
            }
            Err(e) => {
                shared.park.resume();
                Err(e.into())
            }
        }
    }

    /// A listening link's listener alone, described as a hand-over with no connection:
    /// what outlives a crash of the process (weftd keeps it in systemd's file descriptor
    /// store), so that the other end's reconnection waits in its queue until a restarted
    /// weftd accepts it. `None` for a link that connects. It parks and changes nothing.
    pub fn listener_record(&self) -> Result<Option<(TcpLinkHandover, Vec<OwnedFd>)>, OverlayError> {
        let guard = self.guard.upgrade().ok_or(HandoverError::PortClosed)?;
        let shared = &guard.shared;
        let Some(listener) = &shared.listener else {
            return Ok(None);
        };
        let description = TcpLinkHandover {
            version: HANDOVER_VERSION,
            link_id: shared.link_id,
            listener_fd: Some(0),
            connection: None,
        };
        Ok(Some((
            description,
            vec![dup(listener, "listening socket")?],
        )))
    }

    /// The hand-over was abandoned: the link thread goes on (resume the workers too).
    pub fn resume(&self) {
        if let Some(guard) = self.guard.upgrade() {
            guard.shared.park.resume();
        }
    }
}

/// The state of a link whose thread is parked, and its descriptors.
fn describe(shared: &Shared) -> Result<(TcpLinkHandover, Vec<OwnedFd>), HandoverError> {
    let generation = shared.generation.load(Ordering::Acquire);
    let current = lock(&shared.current).clone();
    let unsent = lock(&shared.out).pending().to_vec();
    // Bytes of an older connection (the half has not followed the current one yet) would
    // be forgotten at its next batch: they are not carried.
    let received = shared
        .rx_parking
        .inspect(|p| (p.generation == generation).then(|| p.reasm.pending_bytes().to_vec()))?
        .flatten()
        .unwrap_or_default();
    let mut fds = Vec::new();
    let listener_fd = match &shared.listener {
        Some(l) => {
            fds.push(dup(l, "listening socket")?);
            Some(fds.len() - 1)
        }
        None => None,
    };
    let connection = match current {
        Some(stream) => {
            fds.push(dup(&*stream, "connection")?);
            Some(TcpConnectionHandover {
                fd: fds.len() - 1,
                authenticated: shared.keyed,
                received,
                unsent,
            })
        }
        None => None,
    };
    let description = TcpLinkHandover {
        version: HANDOVER_VERSION,
        link_id: shared.link_id,
        listener_fd,
        connection,
    };
    Ok((description, fds))
}

fn stream_kind(addr: &SocketAddr, listening: bool) -> SocketKind {
    SocketKind {
        family: SocketKind::family_of(addr),
        ty: libc::SOCK_STREAM,
        protocol: libc::IPPROTO_TCP,
        listening,
    }
}

fn wrong_address(
    role: &'static str,
    expected: impl ToString,
    found: impl ToString,
) -> HandoverError {
    HandoverError::WrongAddress {
        role,
        expected: expected.to_string(),
        found: found.to_string(),
    }
}

/// The listener (listening) or the peer's address (connecting), checked against the
/// configuration; and the listening port.
fn adopt_dial(
    config: &TcpLinkConfig,
    h: &TcpLinkHandover,
    table: &mut FdTable,
) -> Result<(Dial, Option<u16>), OverlayError> {
    match (config.mode, h.listener_fd) {
        (TcpLinkMode::Listen(addr), Some(i)) => {
            let role = "listening socket";
            let fd = table.take(i)?;
            check_socket(&fd, role, stream_kind(&addr, true))?;
            let listener = TcpListener::from(fd);
            let at = listener
                .local_addr()
                .map_err(|e| HandoverError::WrongSocket {
                    role,
                    found: format!("no local address: {e}"),
                })?;
            if at.ip() != addr.ip() || (addr.port() != 0 && at.port() != addr.port()) {
                return Err(wrong_address(role, addr, at).into());
            }
            listener
                .set_nonblocking(true)
                .map_err(|source| OverlayError::Socket {
                    call: "O_NONBLOCK",
                    source,
                })?;
            Ok((Dial::Listen(listener), Some(at.port())))
        }
        (TcpLinkMode::Connect(addr), None) => Ok((Dial::Connect(addr, config.netns.clone()), None)),
        (TcpLinkMode::Listen(_), None) => Err(HandoverError::Mismatch(
            "the link listens, but no listening socket was handed over".into(),
        )
        .into()),
        (TcpLinkMode::Connect(_), Some(_)) => Err(HandoverError::Mismatch(
            "the link connects, but a listening socket was handed over".into(),
        )
        .into()),
    }
}

/// The connection, checked against the configuration.
fn adopt_connection<'a>(
    config: &TcpLinkConfig,
    c: &'a TcpConnectionHandover,
    listening_port: Option<u16>,
    table: &mut FdTable,
) -> Result<Carried<'a>, OverlayError> {
    let role = "connection";
    let rx_capacity = config.rx_buffer.max(Reassembler::MIN_CAPACITY);
    if c.received.len() > rx_capacity || c.unsent.len() > config.out_buffer {
        return Err(HandoverError::BadState(format!(
            "{} bytes received and {} unsent; the buffers hold {rx_capacity} and {}",
            c.received.len(),
            c.unsent.len(),
            config.out_buffer
        ))
        .into());
    }
    if c.authenticated != config.key.is_some() {
        return Err(HandoverError::Mismatch(if c.authenticated {
            "an authenticated connection, but the link has no key".into()
        } else {
            "an unauthenticated connection, but the link has a key".into()
        })
        .into());
    }
    let (TcpLinkMode::Listen(addr) | TcpLinkMode::Connect(addr)) = config.mode;
    let fd = table.take(c.fd)?;
    check_socket(&fd, role, stream_kind(&addr, false))?;
    let stream = TcpStream::from(fd);
    let peer = stream.peer_addr().map_err(|e| HandoverError::WrongSocket {
        role,
        found: format!("not connected: {e}"),
    })?;
    match (config.mode, listening_port) {
        (TcpLinkMode::Connect(to), _) if peer != to => {
            return Err(wrong_address("connection's peer", to, peer).into());
        }
        (TcpLinkMode::Listen(_), Some(port)) => {
            let local = stream
                .local_addr()
                .map_err(|e| HandoverError::WrongSocket {
                    role,
                    found: format!("no local address: {e}"),
                })?;
            if local.port() != port {
                return Err(wrong_address(role, format!("port {port}"), local).into());
            }
        }
        _ => {}
    }
    conn::tune(&stream, config).map_err(|source| OverlayError::Socket {
        call: "tune the connection",
        source,
    })?;
    Ok(Carried {
        stream,
        rx: &c.received,
        tx: &c.unsent,
    })
}
