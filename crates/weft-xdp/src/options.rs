//! How to open an AF_XDP port.

/// Smallest UMEM: 32 chunks for receiving, 32 for transmitting.
pub const MIN_FRAMES: u32 = 64;
/// Largest UMEM (256 MiB of chunks).
pub const MAX_FRAMES: u32 = 65_536;
/// Bytes per UMEM chunk (one page: the largest the kernel takes in aligned mode).
pub const CHUNK_SIZE: u32 = 4096;
/// Bytes the kernel leaves free in front of a received frame in its chunk
/// (`XDP_PACKET_HEADROOM`): a received frame starts this far into its chunk.
pub const RX_HEADROOM: u32 = 256;
/// The Ethernet header and two VLAN tags: what a frame carries beside its MTU's worth.
const L2_OVERHEAD: u32 = 22;
/// The largest MTU a chunk carries: a received frame fits behind the kernel's headroom.
pub const MAX_MTU: u32 = CHUNK_SIZE - RX_HEADROOM - L2_OVERHEAD;

/// Which XDP attachment to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XdpMode {
    /// Native (driver) XDP, falling back to generic when the driver has none; zero-copy
    /// tried first under native XDP, copy mode when the driver cannot.
    #[default]
    Auto,
    /// Native (driver) XDP only; zero-copy when the driver allows, else copy mode.
    Native,
    /// Generic (skb) XDP: any interface, frames copied (never zero-copy).
    Generic,
}

impl XdpMode {
    /// The mode as the command line and `port show` spell it.
    pub const fn name(self) -> &'static str {
        match self {
            XdpMode::Auto => "auto",
            XdpMode::Native => "native",
            XdpMode::Generic => "generic",
        }
    }
}

/// How to open an AF_XDP port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XdpOptions {
    /// The interface (in the current network namespace; it must exist).
    pub ifname: String,
    /// The receive queue the socket serves (frames on other queues go on to the kernel).
    pub queue: u32,
    /// Native or generic XDP.
    pub mode: XdpMode,
    /// UMEM chunks of [`CHUNK_SIZE`] bytes: a power of two from [`MIN_FRAMES`] to
    /// [`MAX_FRAMES`]. Half receive, half transmit.
    pub frames: u32,
}

impl XdpOptions {
    /// Queue 0, [`XdpMode::Auto`], 4096 chunks (16 MiB) on `ifname`.
    pub fn new(ifname: &str) -> Self {
        XdpOptions {
            ifname: ifname.to_string(),
            queue: 0,
            mode: XdpMode::Auto,
            frames: 4096,
        }
    }
}
