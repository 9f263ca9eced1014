//! memif control messages as they travel on the socket: 128 bytes each, a `u16` type and
//! then one packed body (`memif.h`, version 2.0). Decoding checks every field a body has
//! and bounds every string; encoding writes zeros everywhere else. No I/O here.
//!
//! Directions: "client" is memif's slave (it allocates the memory), "server" its master.
//! C2S rings carry frames client to server (S2M), S2C rings server to client (M2S).

/// Every message is this long (one `SOCK_SEQPACKET` datagram).
pub const MSG_SIZE: usize = 128;
/// memif 2.0, the only version spoken (DPDK and libmemif speak only it too).
pub const VERSION: u16 = 0x0200;
/// Bytes of a name field.
pub const NAME_LEN: usize = 32;
/// Bytes of INIT's secret field.
pub const SECRET_LEN: usize = 24;
/// Bytes of DISCONNECT's reason.
pub const REASON_LEN: usize = 96;
/// `ADD_RING` flag: the ring carries frames client to server.
pub const ADD_RING_FLAG_C2S: u16 = 1;
/// Interface mode Ethernet, the only one spoken.
pub const MODE_ETHERNET: u8 = 0;

mod msg_type {
    pub(super) const ACK: u16 = 1;
    pub(super) const HELLO: u16 = 2;
    pub(super) const INIT: u16 = 3;
    pub(super) const ADD_REGION: u16 = 4;
    pub(super) const ADD_RING: u16 = 5;
    pub(super) const CONNECT: u16 = 6;
    pub(super) const CONNECTED: u16 = 7;
    pub(super) const DISCONNECT: u16 = 8;
}

/// Which way a ring carries frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Client to server (memif's S2M): the client produces, the server consumes.
    ClientToServer,
    /// Server to client (M2S): the server produces into buffers the client offers.
    ServerToClient,
}

/// A NUL-padded text field as received: the bytes before the first NUL, at most `N`.
#[derive(Clone, PartialEq, Eq)]
pub struct Text<const N: usize> {
    bytes: [u8; N],
    len: u8,
}

impl<const N: usize> Default for Text<N> {
    fn default() -> Self {
        Text {
            bytes: [0; N],
            len: 0,
        }
    }
}

impl<const N: usize> Text<N> {
    /// `s` cut to the field (at most `N - 1` bytes, so that a C reader finds its NUL) and
    /// at its first NUL.
    pub fn new(s: &[u8]) -> Self {
        let s = s.split(|b| *b == 0).next().unwrap_or_default();
        let n = s.len().min(N.saturating_sub(1)).min(usize::from(u8::MAX));
        let mut bytes = [0; N];
        bytes[..n].copy_from_slice(&s[..n]);
        Text {
            bytes,
            len: u8::try_from(n).unwrap_or(0),
        }
    }

    /// Decodes a field: the bytes up to the first NUL (all `N` when there is none).
    fn decode(field: &[u8]) -> Self {
        let end = field.iter().position(|b| *b == 0).unwrap_or(field.len());
        let n = end.min(N).min(usize::from(u8::MAX));
        let mut bytes = [0; N];
        bytes[..n].copy_from_slice(&field[..n]);
        Text {
            bytes,
            len: u8::try_from(n).unwrap_or(0),
        }
    }

    /// The text's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// The field as sent: the bytes, zero padded.
    pub fn field(&self) -> &[u8; N] {
        &self.bytes
    }

    /// Printable form: bytes outside printable ASCII become `?` (a peer's name ends up in
    /// logs and `port show`).
    pub fn printable(&self) -> String {
        self.as_bytes()
            .iter()
            .map(|b| {
                if b.is_ascii_graphic() || *b == b' ' {
                    char::from(*b)
                } else {
                    '?'
                }
            })
            .collect()
    }
}

impl<const N: usize> std::fmt::Debug for Text<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.printable())
    }
}

/// A name field (application or interface name).
pub type Name = Text<NAME_LEN>;
/// A DISCONNECT reason.
pub type Reason = Text<REASON_LEN>;

/// HELLO (server to client): what the server takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// The server application's name.
    pub name: Name,
    /// Lowest version spoken.
    pub min_version: u16,
    /// Highest version spoken.
    pub max_version: u16,
    /// Highest region index taken (count - 1).
    pub max_region: u16,
    /// Highest server-to-client ring index taken (count - 1).
    pub max_s2c_ring: u16,
    /// Highest client-to-server ring index taken (count - 1).
    pub max_c2s_ring: u16,
    /// Largest ring, as log2 of its slots.
    pub max_log2_ring_size: u8,
}

/// INIT (client to server): which interface the client wants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Init {
    /// Version the client speaks.
    pub version: u16,
    /// Interface id.
    pub id: u32,
    /// Interface mode ([`MODE_ETHERNET`]).
    pub mode: u8,
    /// The secret, zero padded (all zeros: none).
    pub secret: [u8; SECRET_LEN],
    /// The client application's name.
    pub name: Name,
}

/// ADD_REGION (client to server): a shared memory region; its file travels beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddRegion {
    /// Region index.
    pub index: u16,
    /// Size in bytes.
    pub size: u64,
}

/// ADD_RING (client to server): a ring in a region; its interrupt eventfd travels beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddRing {
    /// Which way it carries frames.
    pub direction: Direction,
    /// Ring index within its direction.
    pub index: u16,
    /// Region holding the ring.
    pub region: u16,
    /// Offset of the ring's header in the region.
    pub offset: u32,
    /// Slots, as log2.
    pub log2_ring_size: u8,
    /// Private header bytes before the ring (not supported: must be 0).
    pub private_hdr_size: u16,
}

/// DISCONNECT (either way): why the sender closes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disconnect {
    /// An error code (0 in every implementation known).
    pub code: u32,
    /// Why, in words.
    pub reason: Reason,
}

/// A control message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// Acknowledges INIT, ADD_REGION or ADD_RING.
    Ack,
    /// Server's first message.
    Hello(Hello),
    /// Client's first message.
    Init(Init),
    /// A memory region.
    AddRegion(AddRegion),
    /// A ring.
    AddRing(AddRing),
    /// Client: set-up done (its interface name).
    Connect(Name),
    /// Server: connected (its interface name).
    Connected(Name),
    /// Either side closes.
    Disconnect(Disconnect),
}

/// Why a message could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Not [`MSG_SIZE`] bytes.
    #[error("a control message of {0} bytes (memif's are 128)")]
    Size(usize),
    /// The type is none memif knows.
    #[error("unknown message type {0}")]
    UnknownType(u16),
    /// ADD_RING with flags other than the direction bit.
    #[error("ring flags {0:#x} carry unknown bits")]
    RingFlags(u16),
}

impl Message {
    /// The message's name, for logs and errors.
    pub fn kind(&self) -> &'static str {
        match self {
            Message::Ack => "ACK",
            Message::Hello(_) => "HELLO",
            Message::Init(_) => "INIT",
            Message::AddRegion(_) => "ADD_REGION",
            Message::AddRing(_) => "ADD_RING",
            Message::Connect(_) => "CONNECT",
            Message::Connected(_) => "CONNECTED",
            Message::Disconnect(_) => "DISCONNECT",
        }
    }

    /// A DISCONNECT giving `reason`.
    pub fn disconnect(reason: &str) -> Message {
        Message::Disconnect(Disconnect {
            code: 0,
            reason: Reason::new(reason.as_bytes()),
        })
    }

    /// Decodes one received message.
    pub fn decode(buf: &[u8]) -> Result<Message, DecodeError> {
        let b: &[u8; MSG_SIZE] = buf.try_into().map_err(|_| DecodeError::Size(buf.len()))?;
        let body = &b[2..];
        Ok(match u16_at(b, 0) {
            msg_type::ACK => Message::Ack,
            msg_type::HELLO => Message::Hello(Hello {
                name: Name::decode(&body[..NAME_LEN]),
                min_version: u16_at(body, 32),
                max_version: u16_at(body, 34),
                max_region: u16_at(body, 36),
                max_s2c_ring: u16_at(body, 38),
                max_c2s_ring: u16_at(body, 40),
                max_log2_ring_size: body[42],
            }),
            msg_type::INIT => {
                let mut secret = [0; SECRET_LEN];
                secret.copy_from_slice(&body[7..7 + SECRET_LEN]);
                Message::Init(Init {
                    version: u16_at(body, 0),
                    id: u32_at(body, 2),
                    mode: body[6],
                    secret,
                    name: Name::decode(&body[31..31 + NAME_LEN]),
                })
            }
            msg_type::ADD_REGION => Message::AddRegion(AddRegion {
                index: u16_at(body, 0),
                size: u64_at(body, 2),
            }),
            msg_type::ADD_RING => {
                let flags = u16_at(body, 0);
                if flags & !ADD_RING_FLAG_C2S != 0 {
                    return Err(DecodeError::RingFlags(flags));
                }
                Message::AddRing(AddRing {
                    direction: if flags & ADD_RING_FLAG_C2S != 0 {
                        Direction::ClientToServer
                    } else {
                        Direction::ServerToClient
                    },
                    index: u16_at(body, 2),
                    region: u16_at(body, 4),
                    offset: u32_at(body, 6),
                    log2_ring_size: body[10],
                    private_hdr_size: u16_at(body, 11),
                })
            }
            msg_type::CONNECT => Message::Connect(Name::decode(&body[..NAME_LEN])),
            msg_type::CONNECTED => Message::Connected(Name::decode(&body[..NAME_LEN])),
            msg_type::DISCONNECT => Message::Disconnect(Disconnect {
                code: u32_at(body, 0),
                reason: Reason::decode(&body[4..4 + REASON_LEN]),
            }),
            other => return Err(DecodeError::UnknownType(other)),
        })
    }

    /// The message's 128 bytes.
    pub fn encode(&self) -> [u8; MSG_SIZE] {
        let mut b = [0u8; MSG_SIZE];
        let (kind, body) = b.split_at_mut(2);
        let t = match self {
            Message::Ack => msg_type::ACK,
            Message::Hello(h) => {
                body[..NAME_LEN].copy_from_slice(h.name.field());
                put(body, 32, &h.min_version.to_ne_bytes());
                put(body, 34, &h.max_version.to_ne_bytes());
                put(body, 36, &h.max_region.to_ne_bytes());
                put(body, 38, &h.max_s2c_ring.to_ne_bytes());
                put(body, 40, &h.max_c2s_ring.to_ne_bytes());
                body[42] = h.max_log2_ring_size;
                msg_type::HELLO
            }
            Message::Init(i) => {
                put(body, 0, &i.version.to_ne_bytes());
                put(body, 2, &i.id.to_ne_bytes());
                body[6] = i.mode;
                put(body, 7, &i.secret);
                put(body, 31, i.name.field());
                msg_type::INIT
            }
            Message::AddRegion(r) => {
                put(body, 0, &r.index.to_ne_bytes());
                put(body, 2, &r.size.to_ne_bytes());
                msg_type::ADD_REGION
            }
            Message::AddRing(r) => {
                let flags = match r.direction {
                    Direction::ClientToServer => ADD_RING_FLAG_C2S,
                    Direction::ServerToClient => 0,
                };
                put(body, 0, &flags.to_ne_bytes());
                put(body, 2, &r.index.to_ne_bytes());
                put(body, 4, &r.region.to_ne_bytes());
                put(body, 6, &r.offset.to_ne_bytes());
                body[10] = r.log2_ring_size;
                put(body, 11, &r.private_hdr_size.to_ne_bytes());
                msg_type::ADD_RING
            }
            Message::Connect(n) => {
                put(body, 0, n.field());
                msg_type::CONNECT
            }
            Message::Connected(n) => {
                put(body, 0, n.field());
                msg_type::CONNECTED
            }
            Message::Disconnect(d) => {
                put(body, 0, &d.code.to_ne_bytes());
                put(body, 4, d.reason.field());
                msg_type::DISCONNECT
            }
        };
        kind.copy_from_slice(&t.to_ne_bytes());
        b
    }
}

fn put(body: &mut [u8], at: usize, bytes: &[u8]) {
    body[at..at + bytes.len()].copy_from_slice(bytes);
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut v = [0; 8];
    v.copy_from_slice(&b[at..at + 8]);
    u64::from_ne_bytes(v)
}

#[cfg(test)]
mod tests;
