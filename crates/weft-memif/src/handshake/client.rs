//! The client side of the handshake: negotiate down to the server's HELLO, then announce
//! weft's region and rings one message per ACK, then await CONNECTED.

use super::HandshakeError;
use crate::layout::ClientLayout;
use crate::wire::{
    AddRegion, AddRing, Direction, Hello, Init, Message, Name, MODE_ETHERNET, SECRET_LEN, VERSION,
};

/// What a client port asks for.
#[derive(Debug, Clone)]
pub struct ClientPlan {
    /// The interface id asked for.
    pub id: u32,
    /// The secret, zero padded.
    pub secret: [u8; SECRET_LEN],
    /// Queue pairs wanted.
    pub queue_pairs: u16,
    /// Ring size wanted (log2).
    pub log2_ring_size: u8,
    /// Bytes per buffer.
    pub buffer_size: u32,
    /// Application name (INIT).
    pub name: Name,
    /// Interface name (CONNECT).
    pub interface_name: Name,
}

/// What both sides settled on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    /// Client-to-server rings.
    pub c2s: u16,
    /// Server-to-client rings.
    pub s2c: u16,
    /// Ring size (log2).
    pub log2_ring_size: u8,
}

/// Which descriptor goes with an outgoing message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attach {
    /// None.
    Nothing,
    /// The file of region `0`.
    Region(u16),
    /// The interrupt eventfd of a ring.
    Ring(Direction, u16),
}

/// A message for the client to send, with its descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// The message.
    pub message: Message,
    /// The descriptor to pass with it.
    pub attach: Attach,
}

#[derive(Debug)]
enum ClientState {
    AwaitHello,
    Sending { queue: Vec<Outgoing>, next: usize },
    AwaitConnected,
    Connected,
}

/// The client side of a handshake.
#[derive(Debug)]
pub struct ClientHandshake {
    plan: ClientPlan,
    state: ClientState,
    peer_name: Name,
}

/// What the client does after a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientStep {
    /// HELLO accepted: build the region and rings for this, then send
    /// [`ClientHandshake::next_outgoing`].
    Negotiated(Negotiated, ClientLayout),
    /// Send this.
    Send(Outgoing),
    /// CONNECTED: the data path may start.
    Connected {
        /// The server's interface name.
        interface: Name,
    },
}

impl ClientHandshake {
    /// A handshake awaiting the server's HELLO.
    pub fn new(plan: ClientPlan) -> Self {
        ClientHandshake {
            plan,
            state: ClientState::AwaitHello,
            peer_name: Name::default(),
        }
    }

    /// A handshake that completed in another process (a port taken over).
    pub fn connected(plan: ClientPlan) -> Self {
        ClientHandshake {
            plan,
            state: ClientState::Connected,
            peer_name: Name::default(),
        }
    }

    /// The server's application name (from HELLO).
    pub fn peer_name(&self) -> &Name {
        &self.peer_name
    }

    /// Takes one message and the number of descriptors that came with it (the server
    /// sends none).
    pub fn on_message(&mut self, msg: &Message, fds: usize) -> Result<ClientStep, HandshakeError> {
        if fds > 0 {
            return Err(HandshakeError::ExtraFds {
                message: msg.kind(),
                count: fds,
            });
        }
        match (&mut self.state, msg) {
            (_, Message::Disconnect(d)) => {
                Err(HandshakeError::PeerDisconnected(d.reason.printable()))
            }
            (ClientState::AwaitHello, Message::Hello(h)) => {
                let (negotiated, layout) = self.negotiate(h)?;
                self.peer_name = h.name.clone();
                self.state = ClientState::Sending {
                    queue: self.messages(negotiated, &layout),
                    next: 0,
                };
                Ok(ClientStep::Negotiated(negotiated, layout))
            }
            (ClientState::Sending { .. }, Message::Ack) => self
                .next_outgoing()
                .map(ClientStep::Send)
                .ok_or(HandshakeError::Unexpected {
                    message: "ACK",
                    state: "awaiting CONNECTED",
                }),
            (ClientState::AwaitConnected, Message::Connected(name)) => {
                self.state = ClientState::Connected;
                Ok(ClientStep::Connected {
                    interface: name.clone(),
                })
            }
            (state, m) => Err(HandshakeError::Unexpected {
                message: m.kind(),
                state: match state {
                    ClientState::AwaitHello => "awaiting HELLO",
                    ClientState::Sending { .. } => "awaiting ACK",
                    ClientState::AwaitConnected => "awaiting CONNECTED",
                    ClientState::Connected => "connected",
                },
            }),
        }
    }

    /// The next message to send, once per ACK (the first right after
    /// [`ClientStep::Negotiated`]); after CONNECT, none.
    pub fn next_outgoing(&mut self) -> Option<Outgoing> {
        let ClientState::Sending { queue, next } = &mut self.state else {
            return None;
        };
        let out = queue.get(*next).cloned()?;
        *next += 1;
        if *next == queue.len() {
            self.state = ClientState::AwaitConnected;
        }
        Some(out)
    }

    fn negotiate(&self, h: &Hello) -> Result<(Negotiated, ClientLayout), HandshakeError> {
        if h.min_version > VERSION || h.max_version < VERSION {
            return Err(HandshakeError::VersionRange {
                min: h.min_version,
                max: h.max_version,
            });
        }
        let log2 = self.plan.log2_ring_size.min(h.max_log2_ring_size);
        if log2 == 0 {
            return Err(HandshakeError::RingSize(0));
        }
        let want = self.plan.queue_pairs;
        let negotiated = Negotiated {
            c2s: want.min(h.max_c2s_ring.saturating_add(1)),
            s2c: want.min(h.max_s2c_ring.saturating_add(1)),
            log2_ring_size: log2,
        };
        let layout = ClientLayout {
            c2s: negotiated.c2s,
            s2c: negotiated.s2c,
            log2,
            buffer_size: self.plan.buffer_size,
        };
        Ok((negotiated, layout))
    }

    fn messages(&self, n: Negotiated, layout: &ClientLayout) -> Vec<Outgoing> {
        let mut out = vec![
            Outgoing {
                message: Message::Init(Init {
                    version: VERSION,
                    id: self.plan.id,
                    mode: MODE_ETHERNET,
                    secret: self.plan.secret,
                    name: self.plan.name.clone(),
                }),
                attach: Attach::Nothing,
            },
            Outgoing {
                message: Message::AddRegion(AddRegion {
                    index: 0,
                    size: layout.region_size(),
                }),
                attach: Attach::Region(0),
            },
        ];
        let rings = (0..n.c2s)
            .map(|i| (Direction::ClientToServer, i))
            .chain((0..n.s2c).map(|i| (Direction::ServerToClient, i)));
        for (direction, index) in rings {
            out.push(Outgoing {
                message: Message::AddRing(AddRing {
                    direction,
                    index,
                    region: 0,
                    // The layout fits in 4 GiB (`MemifConfig::validate`).
                    offset: u32::try_from(layout.ring_offset(direction, index)).unwrap_or(u32::MAX),
                    log2_ring_size: n.log2_ring_size,
                    private_hdr_size: 0,
                }),
                attach: Attach::Ring(direction, index),
            });
        }
        out.push(Outgoing {
            message: Message::Connect(self.plan.interface_name.clone()),
            attach: Attach::Nothing,
        });
        out
    }
}
