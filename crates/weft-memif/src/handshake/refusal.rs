//! Why a peer is refused or dropped, as an error (its message goes into the DISCONNECT
//! sent) and as a counted reason.

use crate::wire::DecodeError;

/// Why a handshake failed. The message is what the DISCONNECT sent to the peer says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    /// The message could not be decoded.
    #[error("malformed message: {0}")]
    Decode(#[from] DecodeError),
    /// A message the handshake does not take now.
    #[error("unexpected {message} while {state}")]
    Unexpected {
        /// The message.
        message: &'static str,
        /// Where the handshake was.
        state: &'static str,
    },
    /// A message that may come once came again.
    #[error("duplicate {0}")]
    Duplicate(&'static str),
    /// INIT with a version other than 2.0.
    #[error("incompatible memif version {0:#06x} (2.0 spoken)")]
    Version(u16),
    /// HELLO whose range leaves out 2.0.
    #[error("incompatible memif versions {min:#06x}..={max:#06x} (2.0 spoken)")]
    VersionRange {
        /// Lowest offered.
        min: u16,
        /// Highest offered.
        max: u16,
    },
    /// INIT for another interface id.
    #[error("ID {0} not found")]
    WrongId(u32),
    /// INIT in a mode other than Ethernet.
    #[error("only ethernet mode supported (got mode {0})")]
    Mode(u8),
    /// INIT without the secret the port asks for.
    #[error("secret required")]
    SecretRequired,
    /// INIT with another secret.
    #[error("incorrect secret")]
    WrongSecret,
    /// A message that needs a descriptor came without.
    #[error("{0} without its file descriptor")]
    MissingFd(&'static str),
    /// A message came with descriptors it has no use for.
    #[error("{message} with {count} file descriptors too many")]
    ExtraFds {
        /// The message.
        message: &'static str,
        /// How many came.
        count: usize,
    },
    /// ADD_REGION out of order (regions come 0, 1, 2 ...).
    #[error("invalid region index {index} (expected {expected})")]
    RegionIndex {
        /// Index given.
        index: u16,
        /// Index expected.
        expected: usize,
    },
    /// More regions than HELLO allowed.
    #[error("more than {0} regions")]
    TooManyRegions(u16),
    /// A region of size 0, or past the port's memory limit.
    #[error("region {index} of {size} bytes (at most {limit} in all)")]
    RegionSize {
        /// The region.
        index: u16,
        /// Its size.
        size: u64,
        /// The port's limit.
        limit: u64,
    },
    /// A ring index over the maximum.
    #[error("invalid ring index {0}")]
    RingIndex(u16),
    /// A ring in a region not announced.
    #[error("ring in unknown region {0}")]
    RingRegion(u16),
    /// A ring size out of range (log2).
    #[error("ring size 2^{0} out of range")]
    RingSize(u8),
    /// A private header (not supported).
    #[error("private header of {0} bytes not supported")]
    PrivateHeader(u16),
    /// A ring offset not aligned.
    #[error("ring offset {0:#x} not 16-byte aligned")]
    RingAlign(u32),
    /// A ring that does not fit in its region.
    #[error("ring at {offset:#x}..{end:#x} outside its region of {region_size} bytes")]
    RingOutside {
        /// Ring offset.
        offset: u32,
        /// Where it would end.
        end: u64,
        /// Region size.
        region_size: u64,
    },
    /// CONNECT before a ring each way, numbered from 0.
    #[error("connect without rings 0..n in both directions")]
    MissingRings,
    /// The peer's memory could not be admitted or mapped, or weft's own allocated.
    #[error("memory refused: {0}")]
    Memory(String),
    /// A ring's memory is not a ring (wrong cookie, unreadable).
    #[error("ring {index} refused: {why}")]
    RingBroken {
        /// The ring's index.
        index: u16,
        /// Why.
        why: String,
    },
    /// A descriptor that should be an eventfd is not.
    #[error("ring {0}'s interrupt is not an eventfd")]
    NotEventFd(u16),
    /// The peer said DISCONNECT.
    #[error("peer disconnected: {0}")]
    PeerDisconnected(String),
}

/// Why a peer was refused or dropped, as counted (`memif_refused_<name>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Malformed bytes, or a message out of order or repeated.
    Protocol,
    /// Version, id or mode not served.
    Incompatible,
    /// No or a wrong secret.
    Secret,
    /// Descriptors missing or too many.
    Fds,
    /// Regions out of order, too many or too large; files not admitted or not mappable.
    Memory,
    /// Rings out of range, misplaced or broken.
    Ring,
    /// A second peer while one is there.
    Busy,
    /// No handshake within the timeout.
    Timeout,
}

impl Refusal {
    /// Every reason, in counter order.
    pub const ALL: [Refusal; 8] = [
        Refusal::Protocol,
        Refusal::Incompatible,
        Refusal::Secret,
        Refusal::Fds,
        Refusal::Memory,
        Refusal::Ring,
        Refusal::Busy,
        Refusal::Timeout,
    ];

    /// The counter's name.
    pub fn counter_name(self) -> &'static str {
        match self {
            Refusal::Protocol => "memif_refused_protocol",
            Refusal::Incompatible => "memif_refused_incompatible",
            Refusal::Secret => "memif_refused_secret",
            Refusal::Fds => "memif_refused_fds",
            Refusal::Memory => "memif_refused_memory",
            Refusal::Ring => "memif_refused_ring",
            Refusal::Busy => "memif_refused_busy",
            Refusal::Timeout => "memif_refused_timeout",
        }
    }

    /// Index in [`Refusal::ALL`].
    pub fn index(self) -> usize {
        Refusal::ALL.iter().position(|r| *r == self).unwrap_or(0)
    }
}

impl HandshakeError {
    /// The counted reason.
    pub fn refusal(&self) -> Refusal {
        use HandshakeError as E;
        match self {
            E::Decode(_) | E::Unexpected { .. } | E::Duplicate(_) | E::PeerDisconnected(_) => {
                Refusal::Protocol
            }
            E::Version(_) | E::VersionRange { .. } | E::WrongId(_) | E::Mode(_) => {
                Refusal::Incompatible
            }
            E::SecretRequired | E::WrongSecret => Refusal::Secret,
            E::MissingFd(_) | E::ExtraFds { .. } | E::NotEventFd(_) => Refusal::Fds,
            E::RegionIndex { .. } | E::TooManyRegions(_) | E::RegionSize { .. } | E::Memory(_) => {
                Refusal::Memory
            }
            E::RingIndex(_)
            | E::RingRegion(_)
            | E::RingSize(_)
            | E::PrivateHeader(_)
            | E::RingAlign(_)
            | E::RingOutside { .. }
            | E::RingBroken { .. }
            | E::MissingRings => Refusal::Ring,
        }
    }
}
