//! Pre-shared-key mutual authentication of a TCP link, at connection start.
//!
//! When both ends have a key, each connection opens with a handshake before any frame:
//!
//! ```text
//! hello (44 bytes, each end sends one at once):
//!  0      3   4      5          8          12                                    44
//! +------+---+------+----------+----------+--------------------------------------+
//! | "WFA"| v | role | reserved | link id  | nonce (32 random bytes)              |
//! +------+---+------+----------+----------+--------------------------------------+
//! proof (32 bytes, each end sends one once it has the other's hello):
//!   HMAC-SHA256(key, "weft tcp-link auth v1" | prover's role | link id
//!                    | listener's nonce | connector's nonce)
//! ```
//!
//! - magic `WFA` (not the frames' `WFT`): a peer without a key, which starts straight with
//!   frames, is told apart from a hello both ways, and each end cuts the other off;
//! - version [`HELLO_VERSION`], role 1 (listener) or 2 (connector), reserved bytes zero, link
//!   id big-endian: anything else is not a hello;
//! - the proof covers both fresh nonces (an old proof replayed on a new connection fails),
//!   the link id, and the prover's role: an end's own proof reflected back to it fails, since
//!   it checks the peer's proof under the peer's role. Proofs are compared in constant time
//!   (`hmac`'s `verify_slice`).
//!
//! Only the start is authenticated: frames are neither encrypted nor signed, so someone on
//! the path can still read them or take over an established connection. Run the link over
//! WireGuard or IPsec where that matters.

use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::stats::TcpLinkDrop;

/// The magic bytes that open a hello.
pub const HELLO_MAGIC: [u8; 3] = *b"WFA";
/// The handshake's version.
pub const HELLO_VERSION: u8 = 1;
/// Length of a hello.
pub const HELLO_LEN: usize = 12 + NONCE_LEN;
/// Length of a nonce.
pub const NONCE_LEN: usize = 32;
/// Length of a proof (an HMAC-SHA256 tag).
pub const PROOF_LEN: usize = 32;
/// Shortest key file.
pub const MIN_KEY_LEN: usize = 32;
/// Longest key file (a larger one is most likely the wrong file).
pub const MAX_KEY_LEN: usize = 4096;

/// What every proof's message starts with (keeps it apart from any other use of the key).
const CONTEXT: &[u8] = b"weft tcp-link auth v1";

mod field {
    use std::ops::Range;
    pub(super) const MAGIC: Range<usize> = 0..3;
    pub(super) const VERSION: usize = 3;
    pub(super) const ROLE: usize = 4;
    pub(super) const RESERVED: Range<usize> = 5..8;
    pub(super) const LINK_ID: Range<usize> = 8..12;
    pub(super) const NONCE: Range<usize> = 12..44;
}

/// The pre-shared key of a link (kept as the HMAC state it keys). Its `Debug` does not show
/// it.
#[derive(Clone)]
pub struct LinkKey(Hmac<Sha256>);

impl std::fmt::Debug for LinkKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LinkKey(..)")
    }
}

/// Why a key file was refused.
#[derive(Debug, thiserror::Error)]
#[error(
    "key file {p}: {problem}; make one with `head -c 32 /dev/urandom > {p}; chmod 600 {p}` and \
     give the same file to both ends",
    p = .path.display()
)]
pub struct KeyFileError {
    /// The file.
    pub path: PathBuf,
    /// What was wrong with it.
    pub problem: String,
}

impl LinkKey {
    /// A key of these bytes (at least [`MIN_KEY_LEN`], at most [`MAX_KEY_LEN`]).
    pub fn new(bytes: Vec<u8>) -> Result<LinkKey, String> {
        if bytes.len() < MIN_KEY_LEN {
            return Err(format!(
                "{} bytes is too short for a key: use at least {MIN_KEY_LEN}",
                bytes.len()
            ));
        }
        if bytes.len() > MAX_KEY_LEN {
            return Err(format!(
                "more than {MAX_KEY_LEN} bytes: is this the key file?"
            ));
        }
        <Hmac<Sha256> as Mac>::new_from_slice(&bytes)
            .map(LinkKey)
            .map_err(|_| "HMAC refused the key".to_string())
    }

    /// Reads a key file: its bytes are the key, raw, whatever they are (at least 32). Only
    /// a regular file, read without following a symlink or blocking
    /// ([`read_key_file`](super::key_file::read_key_file)).
    pub fn from_file(path: &Path) -> Result<LinkKey, KeyFileError> {
        let file = super::key_file::read_key_file(path)?;
        LinkKey::new(file.bytes).map_err(|problem| KeyFileError {
            path: path.to_path_buf(),
            problem,
        })
    }

    fn mac(&self) -> Hmac<Sha256> {
        self.0.clone()
    }
}

/// Which end of the connection an end is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The end that accepted the connection.
    Listener = 1,
    /// The end that made it.
    Connector = 2,
}

impl Role {
    /// The other end's role.
    pub fn peer(self) -> Role {
        match self {
            Role::Listener => Role::Connector,
            Role::Connector => Role::Listener,
        }
    }
}

/// Why a handshake failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    /// The peer's first bytes are not a hello.
    #[error("the peer sent no hello (first bytes {0:02x?}): it has no key, or is not weft")]
    NotAHello([u8; 4]),
    /// A hello whose fields do not hold.
    #[error("malformed hello: {0}")]
    Malformed(&'static str),
    /// The peer is configured with another link id.
    #[error("the peer is link {theirs}, this end link {ours}: give both ends the same link id")]
    WrongLinkId {
        /// The peer's link id.
        theirs: u32,
        /// This end's.
        ours: u32,
    },
    /// The peer claims this end's own role, or its nonce: a reflection of this end's hello.
    #[error("the peer's hello mirrors this end's own (a reflection)")]
    Reflected,
    /// The peer's proof does not verify: another key (or a forgery or a replay).
    #[error("the peer's proof does not verify: the ends have different keys")]
    BadProof,
    /// The peer closed the connection before its hello came.
    #[error("the peer closed the connection without a hello (it has no key, or is not weft)")]
    ClosedBeforeHello,
    /// The peer closed the connection after its hello: it refused this end's proof.
    #[error("the peer closed the connection during the handshake: the ends have different keys")]
    Closed,
    /// Reading or writing failed.
    #[error("the connection failed during the handshake: {0}")]
    Io(std::io::ErrorKind),
    /// The peer did not finish in time.
    #[error("the peer did not finish the handshake in time")]
    TimedOut,
}

impl HandshakeError {
    /// The counter it is counted under.
    pub fn drop_reason(&self) -> TcpLinkDrop {
        match self {
            HandshakeError::NotAHello(_)
            | HandshakeError::Malformed(_)
            | HandshakeError::ClosedBeforeHello
            | HandshakeError::Io(_) => TcpLinkDrop::BadHandshake,
            HandshakeError::WrongLinkId { .. } => TcpLinkDrop::WrongLinkId,
            HandshakeError::Reflected | HandshakeError::BadProof | HandshakeError::Closed => {
                TcpLinkDrop::AuthFailed
            }
            HandshakeError::TimedOut => TcpLinkDrop::HandshakeTimeout,
        }
    }
}

/// One end's hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    /// The sender's role.
    pub role: Role,
    /// The sender's link id.
    pub link_id: u32,
    /// The sender's fresh random nonce.
    pub nonce: [u8; NONCE_LEN],
}

impl Hello {
    /// A hello with a fresh nonce from the system's random source.
    pub fn fresh(role: Role, link_id: u32) -> std::io::Result<Hello> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(std::io::Error::other)?;
        Ok(Hello {
            role,
            link_id,
            nonce,
        })
    }

    /// The hello's bytes.
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut out = [0u8; HELLO_LEN];
        out[field::MAGIC].copy_from_slice(&HELLO_MAGIC);
        out[field::VERSION] = HELLO_VERSION;
        out[field::ROLE] = self.role as u8;
        out[field::LINK_ID].copy_from_slice(&self.link_id.to_be_bytes());
        out[field::NONCE].copy_from_slice(&self.nonce);
        out
    }

    /// Parses a peer's hello (checking its own fields, not how it fits this end).
    pub fn parse(b: &[u8; HELLO_LEN]) -> Result<Hello, HandshakeError> {
        if b[field::MAGIC] != HELLO_MAGIC {
            return Err(HandshakeError::NotAHello([b[0], b[1], b[2], b[3]]));
        }
        if b[field::VERSION] != HELLO_VERSION {
            return Err(HandshakeError::Malformed("unknown handshake version"));
        }
        let role = match b[field::ROLE] {
            1 => Role::Listener,
            2 => Role::Connector,
            _ => return Err(HandshakeError::Malformed("unknown role")),
        };
        if b[field::RESERVED].iter().any(|&x| x != 0) {
            return Err(HandshakeError::Malformed("reserved bytes set"));
        }
        let l = &b[field::LINK_ID];
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&b[field::NONCE]);
        Ok(Hello {
            role,
            link_id: u32::from_be_bytes([l[0], l[1], l[2], l[3]]),
            nonce,
        })
    }

    /// Checks the peer's hello against this end's own.
    pub fn check_peer(&self, peer: &Hello) -> Result<(), HandshakeError> {
        if peer.link_id != self.link_id {
            return Err(HandshakeError::WrongLinkId {
                theirs: peer.link_id,
                ours: self.link_id,
            });
        }
        if peer.role == self.role || peer.nonce == self.nonce {
            return Err(HandshakeError::Reflected);
        }
        Ok(())
    }
}

/// The MAC of a proof by `prover`, over the two hellos of a connection.
fn proof_mac(key: &LinkKey, prover: Role, ours: &Hello, peer: &Hello) -> Hmac<Sha256> {
    let (listener, connector) = match ours.role {
        Role::Listener => (ours, peer),
        Role::Connector => (peer, ours),
    };
    let mut mac = key.mac();
    mac.update(CONTEXT);
    mac.update(&[prover as u8]);
    mac.update(&ours.link_id.to_be_bytes());
    mac.update(&listener.nonce);
    mac.update(&connector.nonce);
    mac
}

/// This end's proof that it knows `key`, for the connection of these two hellos.
pub fn prove(key: &LinkKey, ours: &Hello, peer: &Hello) -> [u8; PROOF_LEN] {
    proof_mac(key, ours.role, ours, peer)
        .finalize()
        .into_bytes()
        .into()
}

/// Checks the peer's proof, in constant time.
pub fn verify(
    key: &LinkKey,
    ours: &Hello,
    peer: &Hello,
    proof: &[u8; PROOF_LEN],
) -> Result<(), HandshakeError> {
    proof_mac(key, peer.role, ours, peer)
        .verify_slice(proof)
        .map_err(|_| HandshakeError::BadProof)
}
