//! The control channel's handshake, one state machine per role. Messages go in (with the
//! number of descriptors that came with them); what to answer, or why the peer is
//! refused, comes out. No I/O: the control thread (`control.rs`) moves the bytes and the
//! descriptors, maps what the server side admitted, and builds what the client side
//! announces.
//!
//! The order is DPDK's (`memif_socket.c`): the server greets (HELLO); the client answers
//! INIT, then ADD_REGION for each region, ADD_RING for each ring (C2S first), CONNECT —
//! one at a time, each sent when the server has acknowledged the one before (DPDK's
//! client sends its next message only on an ACK); the server answers CONNECT with
//! CONNECTED.

use crate::layout::{ring_bytes, RING_ALIGN};
use crate::wire::{
    AddRegion, AddRing, Direction, Hello, Init, Message, Name, MODE_ETHERNET, SECRET_LEN, VERSION,
};

mod client;
mod refusal;
pub use client::{Attach, ClientHandshake, ClientPlan, ClientStep, Negotiated, Outgoing};
pub use refusal::{HandshakeError, Refusal};

/// What a server port accepts from its client.
#[derive(Debug, Clone)]
pub struct ServerLimits {
    /// The interface id served.
    pub id: u32,
    /// The secret a client must give, zero padded; `None`: none asked.
    pub secret: Option<[u8; SECRET_LEN]>,
    /// Most rings per direction.
    pub max_rings: u16,
    /// Most regions.
    pub max_regions: u16,
    /// Largest ring (log2).
    pub max_log2_ring_size: u8,
    /// Most bytes in all regions.
    pub max_region_bytes: u64,
    /// The name sent in HELLO.
    pub name: Name,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ServerState {
    AwaitInit,
    Setup,
    Connected,
}

/// The server side of one peer's handshake.
#[derive(Debug)]
pub struct ServerHandshake {
    limits: ServerLimits,
    state: ServerState,
    regions: Vec<AddRegion>,
    region_bytes: u64,
    c2s: Vec<AddRing>,
    s2c: Vec<AddRing>,
    peer_name: Name,
}

/// What the server does after a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerStep {
    /// The peer named the interface (INIT accepted): the caller checks that the port is
    /// free and acknowledges.
    Identified,
    /// Acknowledge (a region or ring recorded).
    Ack,
    /// CONNECT: map the regions, check the rings, then answer CONNECTED.
    Connect {
        /// The client's interface name.
        interface: Name,
    },
    /// Nothing to do (an ACK from the client, which DPDK also ignores).
    Nothing,
}

impl ServerHandshake {
    /// A handshake about to greet a new peer.
    pub fn new(limits: ServerLimits) -> Self {
        ServerHandshake {
            limits,
            state: ServerState::AwaitInit,
            regions: Vec::new(),
            region_bytes: 0,
            c2s: Vec::new(),
            s2c: Vec::new(),
            peer_name: Name::default(),
        }
    }

    /// A handshake that completed in another process (a port taken over).
    pub fn connected(limits: ServerLimits) -> Self {
        ServerHandshake {
            state: ServerState::Connected,
            ..ServerHandshake::new(limits)
        }
    }

    /// The HELLO that opens the handshake. Maxima are indexes (count - 1), as DPDK's
    /// client reads them.
    pub fn hello(&self) -> Message {
        Message::Hello(Hello {
            name: self.limits.name.clone(),
            min_version: VERSION,
            max_version: VERSION,
            max_region: self.limits.max_regions.saturating_sub(1),
            max_s2c_ring: self.limits.max_rings.saturating_sub(1),
            max_c2s_ring: self.limits.max_rings.saturating_sub(1),
            max_log2_ring_size: self.limits.max_log2_ring_size,
        })
    }

    /// Takes one message and the number of descriptors that came with it.
    pub fn on_message(&mut self, msg: &Message, fds: usize) -> Result<ServerStep, HandshakeError> {
        let expect_fds = match msg {
            Message::AddRegion(_) | Message::AddRing(_) => 1,
            _ => 0,
        };
        if fds < expect_fds {
            return Err(HandshakeError::MissingFd(msg.kind()));
        }
        if fds > expect_fds {
            return Err(HandshakeError::ExtraFds {
                message: msg.kind(),
                count: fds,
            });
        }
        match (self.state, msg) {
            (_, Message::Disconnect(d)) => {
                Err(HandshakeError::PeerDisconnected(d.reason.printable()))
            }
            (_, Message::Ack) => Ok(ServerStep::Nothing),
            (ServerState::AwaitInit, Message::Init(init)) => {
                self.check_init(init)?;
                self.peer_name = init.name.clone();
                self.state = ServerState::Setup;
                Ok(ServerStep::Identified)
            }
            (ServerState::Setup, Message::Init(_)) => Err(HandshakeError::Duplicate("INIT")),
            (ServerState::Setup, Message::AddRegion(r)) => {
                self.add_region(*r)?;
                Ok(ServerStep::Ack)
            }
            (ServerState::Setup, Message::AddRing(r)) => {
                self.add_ring(*r)?;
                Ok(ServerStep::Ack)
            }
            (ServerState::Setup, Message::Connect(name)) => {
                self.check_complete()?;
                self.state = ServerState::Connected;
                Ok(ServerStep::Connect {
                    interface: name.clone(),
                })
            }
            (state, m) => Err(HandshakeError::Unexpected {
                message: m.kind(),
                state: match state {
                    ServerState::AwaitInit => "awaiting INIT",
                    ServerState::Setup => "setting up",
                    ServerState::Connected => "connected",
                },
            }),
        }
    }

    fn check_init(&self, init: &Init) -> Result<(), HandshakeError> {
        if init.version != VERSION {
            return Err(HandshakeError::Version(init.version));
        }
        if init.id != self.limits.id {
            return Err(HandshakeError::WrongId(init.id));
        }
        if init.mode != MODE_ETHERNET {
            return Err(HandshakeError::Mode(init.mode));
        }
        if let Some(want) = &self.limits.secret {
            let got = canonical_secret(&init.secret);
            if got[0] == 0 {
                return Err(HandshakeError::SecretRequired);
            }
            if !constant_time_eq(&got, want) {
                return Err(HandshakeError::WrongSecret);
            }
        }
        Ok(())
    }

    fn add_region(&mut self, r: AddRegion) -> Result<(), HandshakeError> {
        if usize::from(r.index) != self.regions.len() {
            // DPDK's order: regions come 0, 1, 2 ... and never twice.
            return Err(HandshakeError::RegionIndex {
                index: r.index,
                expected: self.regions.len(),
            });
        }
        if r.index >= self.limits.max_regions {
            return Err(HandshakeError::TooManyRegions(self.limits.max_regions));
        }
        let total = self.region_bytes.saturating_add(r.size);
        if r.size == 0 || total > self.limits.max_region_bytes {
            return Err(HandshakeError::RegionSize {
                index: r.index,
                size: r.size,
                limit: self.limits.max_region_bytes,
            });
        }
        self.region_bytes = total;
        self.regions.push(r);
        Ok(())
    }

    fn add_ring(&mut self, r: AddRing) -> Result<(), HandshakeError> {
        if r.index >= self.limits.max_rings {
            return Err(HandshakeError::RingIndex(r.index));
        }
        let ring_list = match r.direction {
            Direction::ClientToServer => &self.c2s,
            Direction::ServerToClient => &self.s2c,
        };
        if ring_list.iter().any(|x| x.index == r.index) {
            return Err(HandshakeError::Duplicate("ADD_RING"));
        }
        let region = self
            .regions
            .get(usize::from(r.region))
            .ok_or(HandshakeError::RingRegion(r.region))?;
        if !(1..=self.limits.max_log2_ring_size).contains(&r.log2_ring_size) {
            return Err(HandshakeError::RingSize(r.log2_ring_size));
        }
        if r.private_hdr_size != 0 {
            return Err(HandshakeError::PrivateHeader(r.private_hdr_size));
        }
        if u64::from(r.offset) % RING_ALIGN != 0 {
            return Err(HandshakeError::RingAlign(r.offset));
        }
        let end = u64::from(r.offset) + ring_bytes(r.log2_ring_size);
        if end > region.size {
            return Err(HandshakeError::RingOutside {
                offset: r.offset,
                end,
                region_size: region.size,
            });
        }
        match r.direction {
            Direction::ClientToServer => self.c2s.push(r),
            Direction::ServerToClient => self.s2c.push(r),
        }
        Ok(())
    }

    /// CONNECT needs a ring each way, numbered from 0 without gaps.
    fn check_complete(&self) -> Result<(), HandshakeError> {
        for rings in [&self.c2s, &self.s2c] {
            let n = rings.len();
            if n == 0 || rings.iter().any(|r| usize::from(r.index) >= n) {
                return Err(HandshakeError::MissingRings);
            }
        }
        Ok(())
    }

    /// The regions announced, by index.
    pub fn regions(&self) -> &[AddRegion] {
        &self.regions
    }

    /// The rings announced in `direction`, by index.
    pub fn rings(&self, direction: Direction) -> Vec<AddRing> {
        let mut rings = match direction {
            Direction::ClientToServer => self.c2s.clone(),
            Direction::ServerToClient => self.s2c.clone(),
        };
        rings.sort_by_key(|r| r.index);
        rings
    }

    /// The client's application name (from INIT).
    pub fn peer_name(&self) -> &Name {
        &self.peer_name
    }
}

/// The secret with everything after its first NUL zeroed (DPDK compares with `strncmp`).
fn canonical_secret(s: &[u8; SECRET_LEN]) -> [u8; SECRET_LEN] {
    let mut out = [0; SECRET_LEN];
    for (o, b) in out.iter_mut().zip(s.iter().take_while(|b| **b != 0)) {
        *o = *b;
    }
    out
}

/// Compares without an early exit, so the time taken tells nothing of where they differ.
fn constant_time_eq(a: &[u8; SECRET_LEN], b: &[u8; SECRET_LEN]) -> bool {
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests;
