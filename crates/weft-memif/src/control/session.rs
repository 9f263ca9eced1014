//! One peer on the control socket: its handshake, the descriptors it handed over, and
//! what is built from them once it completes.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Instant;

use weft_sys::event::EventFd;

use crate::config::{MemifConfig, Role};
use crate::connection::{Connection, RxRing, TxRing};
use crate::fds::{self, Interrupt, Received};
use crate::handover::AdoptedSession;
use crate::handshake::{
    Attach, ClientHandshake, ClientPlan, ClientStep, HandshakeError, Negotiated, Refusal,
    ServerHandshake, ServerLimits, ServerStep,
};
use crate::layout::ClientLayout;
use crate::memory::SharedMemory;
use crate::ring::{OwnBuffers, Producer, RingPlace};
use crate::wire::{AddRing, Direction, Message, Name, MSG_SIZE};

/// Messages read from one peer before the control thread looks at the others.
const MESSAGES_PER_WAKE: usize = 32;

/// Why a session ends.
#[derive(Debug)]
pub(super) enum End {
    /// Refused during its handshake (or broke the protocol after): counted by reason, told
    /// with a DISCONNECT.
    Refused(Refusal, String),
    /// The peer said DISCONNECT or closed the socket.
    PeerLeft(String),
}

/// The role of a session taken over, with what its handshake would have checked.
pub(super) enum AdoptedSide {
    Server(ServerLimits),
    Client(ClientPlan),
}

/// What a message led to.
#[derive(Debug)]
pub(super) enum Progress {
    /// Nothing the control loop must act on.
    Continue,
    /// INIT accepted (server): the loop decides whether the port is free.
    Identified,
    /// The handshake completed: the connection to install.
    Connected(Arc<Connection>),
}

/// The client's memory and rings, built after HELLO and announced one message at a time.
struct ClientBuild {
    memory: SharedMemory,
    file: File,
    layout: ClientLayout,
    rings: Vec<(Direction, u16, RingPlace, Interrupt)>,
}

enum Side {
    Server {
        handshake: ServerHandshake,
        regions: Vec<OwnedFd>,
        rings: Vec<(AddRing, OwnedFd)>,
    },
    Client {
        handshake: ClientHandshake,
        build: Option<ClientBuild>,
    },
}

/// A peer on the control socket.
pub(super) struct Session {
    pub(super) sock: OwnedFd,
    /// When the handshake must be done by; `None` once connected.
    pub(super) deadline: Option<Instant>,
    /// True once the peer named this port's interface (INIT accepted).
    pub(super) identified: bool,
    pub(super) connection: Option<Arc<Connection>>,
    pub(super) peer_name: String,
    pub(super) peer_interface: String,
    side: Side,
}

impl Session {
    pub(super) fn server(sock: OwnedFd, handshake: ServerHandshake, deadline: Instant) -> Self {
        Session {
            sock,
            deadline: Some(deadline),
            identified: false,
            connection: None,
            peer_name: String::new(),
            peer_interface: String::new(),
            side: Side::Server {
                handshake,
                regions: Vec::new(),
                rings: Vec::new(),
            },
        }
    }

    pub(super) fn client(sock: OwnedFd, handshake: ClientHandshake, deadline: Instant) -> Self {
        Session {
            sock,
            deadline: Some(deadline),
            identified: true,
            connection: None,
            peer_name: String::new(),
            peer_interface: String::new(),
            side: Side::Client {
                handshake,
                build: None,
            },
        }
    }

    /// A connected peer taken over from another process.
    pub(super) fn adopted(side: AdoptedSide, adopted: AdoptedSession) -> Self {
        Session {
            sock: adopted.socket,
            deadline: None,
            identified: true,
            connection: Some(adopted.connection),
            peer_name: adopted.peer_name,
            peer_interface: adopted.peer_interface,
            side: match side {
                AdoptedSide::Server(limits) => Side::Server {
                    handshake: ServerHandshake::connected(limits),
                    regions: Vec::new(),
                    rings: Vec::new(),
                },
                AdoptedSide::Client(plan) => Side::Client {
                    handshake: ClientHandshake::connected(plan),
                    build: None,
                },
            },
        }
    }

    /// Sends `msg` (with `fd`), or says why the peer cannot be told.
    pub(super) fn send(
        &self,
        msg: &Message,
        fd: Option<std::os::fd::BorrowedFd<'_>>,
    ) -> Result<(), End> {
        fds::send(self.sock.as_fd(), &msg.encode(), fd)
            .map_err(|e| End::PeerLeft(format!("control socket: {e}")))
    }

    /// Reads and handles the messages waiting, at most [`MESSAGES_PER_WAKE`] (a peer
    /// flooding the socket must not keep the thread from its other peers and deadlines:
    /// the socket stays readable and is read again on the next pass). Stops at the first
    /// message that changes what the control loop must do.
    pub(super) fn on_readable(
        &mut self,
        config: &MemifConfig,
        wake: &Arc<EventFd>,
    ) -> Result<Progress, End> {
        for _ in 0..MESSAGES_PER_WAKE {
            let received = fds::receive(self.sock.as_fd())
                .map_err(|e| End::PeerLeft(format!("control socket: {e}")))?;
            let (bytes, truncated, fds, fds_cut) = match received {
                Received::WouldBlock => return Ok(Progress::Continue),
                Received::Closed => return Err(End::PeerLeft("closed the control socket".into())),
                Received::Message {
                    bytes,
                    truncated,
                    fds,
                    fds_cut,
                } => (bytes, truncated, fds, fds_cut),
            };
            let decoded = if truncated {
                Err(HandshakeError::Decode(crate::wire::DecodeError::Size(
                    MSG_SIZE + 1,
                )))
            } else {
                Message::decode(&bytes).map_err(HandshakeError::from)
            };
            let count = fds.len() + usize::from(fds_cut);
            let progress = decoded
                .and_then(|msg| self.on_message(&msg, count, fds, config, wake))
                .map_err(|e| match e {
                    HandshakeError::PeerDisconnected(why) => End::PeerLeft(why),
                    other => End::Refused(other.refusal(), other.to_string()),
                })?;
            if !matches!(progress, Progress::Continue) {
                return Ok(progress);
            }
        }
        Ok(Progress::Continue)
    }

    fn on_message(
        &mut self,
        msg: &Message,
        count: usize,
        mut fds: Vec<OwnedFd>,
        config: &MemifConfig,
        wake: &Arc<EventFd>,
    ) -> Result<Progress, HandshakeError> {
        match &mut self.side {
            Side::Server {
                handshake,
                regions,
                rings,
            } => match handshake.on_message(msg, count)? {
                ServerStep::Nothing => Ok(Progress::Continue),
                ServerStep::Identified => {
                    self.identified = true;
                    self.peer_name = handshake.peer_name().printable();
                    Ok(Progress::Identified)
                }
                ServerStep::Ack => {
                    let fd = fds.pop().ok_or(HandshakeError::MissingFd(msg.kind()))?;
                    match msg {
                        Message::AddRing(r) => rings.push((*r, fd)),
                        _ => regions.push(fd),
                    }
                    send_or_fail(&self.sock, &Message::Ack)?;
                    Ok(Progress::Continue)
                }
                ServerStep::Connect { interface } => {
                    let sizes: Vec<u64> = handshake.regions().iter().map(|r| r.size).collect();
                    let conn = build_server(
                        sizes,
                        std::mem::take(regions),
                        std::mem::take(rings),
                        config,
                        wake,
                    )?;
                    self.peer_interface = interface.printable();
                    let name = Name::new(config.interface_name.as_bytes());
                    send_or_fail(&self.sock, &Message::Connected(name))?;
                    Ok(Progress::Connected(conn))
                }
            },
            Side::Client { handshake, build } => match handshake.on_message(msg, count)? {
                ClientStep::Negotiated(negotiated, layout) => {
                    self.peer_name = handshake.peer_name().printable();
                    *build = Some(build_client(negotiated, layout)?);
                    let first = handshake.next_outgoing();
                    send_outgoing(&self.sock, build.as_ref(), first)?;
                    Ok(Progress::Continue)
                }
                ClientStep::Send(out) => {
                    send_outgoing(&self.sock, build.as_ref(), Some(out))?;
                    Ok(Progress::Continue)
                }
                ClientStep::Connected { interface } => {
                    self.peer_interface = interface.printable();
                    let b = build.take().ok_or(HandshakeError::Unexpected {
                        message: "CONNECTED",
                        state: "without memory",
                    })?;
                    Ok(Progress::Connected(finish_client(b, config, wake)))
                }
            },
        }
    }

    /// The role this session plays.
    pub(super) fn role(&self) -> Role {
        match self.side {
            Side::Server { .. } => Role::Server,
            Side::Client { .. } => Role::Client,
        }
    }

    /// Acknowledges INIT (the server found the port free).
    pub(super) fn ack(&self) -> Result<(), End> {
        self.send(&Message::Ack, None)
    }
}

fn send_or_fail(sock: &OwnedFd, msg: &Message) -> Result<(), HandshakeError> {
    fds::send(sock.as_fd(), &msg.encode(), None)
        .map_err(|e| HandshakeError::PeerDisconnected(format!("control socket: {e}")))
}

fn memory_error(e: impl std::fmt::Display) -> HandshakeError {
    HandshakeError::Memory(e.to_string())
}

/// Maps the client's regions and checks its rings (server, on CONNECT).
fn build_server(
    sizes: Vec<u64>,
    regions: Vec<OwnedFd>,
    mut rings: Vec<(AddRing, OwnedFd)>,
    config: &MemifConfig,
    wake: &Arc<EventFd>,
) -> Result<Arc<Connection>, HandshakeError> {
    let memory =
        SharedMemory::map_peer(sizes.into_iter().zip(regions).collect()).map_err(memory_error)?;
    rings.sort_by_key(|(r, _)| (r.direction == Direction::ServerToClient, r.index));
    let mut rx = Vec::new();
    let mut tx = Vec::new();
    for (r, fd) in rings {
        let place = RingPlace::new(&memory, r.region, u64::from(r.offset), r.log2_ring_size)
            .ok_or_else(|| HandshakeError::RingBroken {
                index: r.index,
                why: "outside its region".into(),
            })?;
        place
            .check_and_reset(&memory)
            .map_err(|e| HandshakeError::RingBroken {
                index: r.index,
                why: e.to_string(),
            })?;
        let interrupt =
            Interrupt::from_peer(fd).map_err(|_| HandshakeError::NotEventFd(r.index))?;
        match r.direction {
            Direction::ClientToServer => rx.push(RxRing::new(place, interrupt, None)),
            Direction::ServerToClient => tx.push(TxRing {
                producer: Producer::new(place, Role::Server, None, config.buffer_size),
                interrupt,
            }),
        }
    }
    Ok(Arc::new(Connection::new(
        memory,
        Role::Server,
        config.buffer_size,
        rx,
        tx,
        Arc::clone(wake),
    )))
}

/// Allocates the client's region and rings for what HELLO allowed.
fn build_client(n: Negotiated, layout: ClientLayout) -> Result<ClientBuild, HandshakeError> {
    let (memory, file) = SharedMemory::create(layout.region_size()).map_err(memory_error)?;
    let mut rings = Vec::new();
    let all = (0..n.c2s)
        .map(|i| (Direction::ClientToServer, i))
        .chain((0..n.s2c).map(|i| (Direction::ServerToClient, i)));
    for (direction, index) in all {
        let place = RingPlace::new(
            &memory,
            0,
            layout.ring_offset(direction, index),
            n.log2_ring_size,
        )
        .ok_or(HandshakeError::RingSize(n.log2_ring_size))?;
        place.init(&memory).map_err(memory_error)?;
        let interrupt = Interrupt::new().map_err(memory_error)?;
        rings.push((direction, index, place, interrupt));
    }
    Ok(ClientBuild {
        memory,
        file,
        layout,
        rings,
    })
}

fn send_outgoing(
    sock: &OwnedFd,
    build: Option<&ClientBuild>,
    out: Option<crate::handshake::Outgoing>,
) -> Result<(), HandshakeError> {
    let Some(out) = out else {
        return Ok(());
    };
    let fd = match (out.attach, build) {
        (Attach::Nothing, _) => None,
        (Attach::Region(_), Some(b)) => Some(b.file.as_fd()),
        (Attach::Ring(d, i), Some(b)) => b
            .rings
            .iter()
            .find(|(rd, ri, _, _)| *rd == d && *ri == i)
            .map(|(_, _, _, irq)| irq.as_fd()),
        (_, None) => None,
    };
    fds::send(sock.as_fd(), &out.message.encode(), fd)
        .map_err(|e| HandshakeError::PeerDisconnected(format!("control socket: {e}")))
}

/// The client's connection once the server said CONNECTED.
fn finish_client(b: ClientBuild, config: &MemifConfig, wake: &Arc<EventFd>) -> Arc<Connection> {
    let mut rx = Vec::new();
    let mut tx = Vec::new();
    for (direction, index, place, interrupt) in b.rings {
        let own = Some(OwnBuffers {
            layout: b.layout,
            direction,
            index,
        });
        match direction {
            Direction::ServerToClient => rx.push(RxRing::new(place, interrupt, own)),
            Direction::ClientToServer => tx.push(TxRing {
                producer: Producer::new(place, Role::Client, own, config.buffer_size),
                interrupt,
            }),
        }
    }
    drop(b.file);
    Arc::new(Connection::new(
        b.memory,
        Role::Client,
        config.buffer_size,
        rx,
        tx,
        Arc::clone(wake),
    ))
}
