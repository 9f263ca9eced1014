//! What a TCP link counts: frames each way, drops by reason, connections made and lost.
//!
//! Most counters have one writer (the receive half, the transmit half or the link thread),
//! readable from any thread through the `Arc`; drops are added atomically.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Why a TCP link dropped a frame, or cut its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TcpLinkDrop {
    /// A frame header without the magic bytes: the peer speaks something else (cut).
    BadMagic,
    /// A wire format version this end does not speak (cut).
    BadVersion,
    /// The peer is configured with another link id (cut).
    WrongLinkId,
    /// A frame length below an Ethernet header or above a 64 KB super-frame (cut).
    BadLength,
    /// An ordinary frame above the port's MTU.
    FrameTooBig,
    /// Offload state (virtio-net header) that does not hold for its frame, or that the
    /// port was configured not to take.
    BadOffload,
    /// Sent while no connection was up.
    Disconnected,
    /// Sent while the output buffer was full (the peer or the underlay is slower).
    BufferFull,
    /// A connection whose peer did not prove it knows the link's key (another key, a
    /// reflected or replayed proof), or left after its hello (it refused ours): refused.
    AuthFailed,
    /// A connection whose first bytes were not a handshake hello (garbage, a peer without a
    /// key, not weft), or that closed or failed before its hello: refused.
    BadHandshake,
    /// A connection that did not finish the handshake within the handshake time: refused.
    HandshakeTimeout,
    /// A connection whose handshake gave way to a newer one: too many were pending from its
    /// source address, or in all (a connection flood): refused.
    HandshakeLimit,
    /// A connection to a link without a key, from another address than the live
    /// connection's peer, while that connection is up: refused (it would have replaced it).
    RefusedTakeover,
}

impl TcpLinkDrop {
    /// Every reason, in counter order.
    pub const ALL: [TcpLinkDrop; 13] = [
        TcpLinkDrop::BadMagic,
        TcpLinkDrop::BadVersion,
        TcpLinkDrop::WrongLinkId,
        TcpLinkDrop::BadLength,
        TcpLinkDrop::FrameTooBig,
        TcpLinkDrop::BadOffload,
        TcpLinkDrop::Disconnected,
        TcpLinkDrop::BufferFull,
        TcpLinkDrop::AuthFailed,
        TcpLinkDrop::BadHandshake,
        TcpLinkDrop::HandshakeTimeout,
        TcpLinkDrop::HandshakeLimit,
        TcpLinkDrop::RefusedTakeover,
    ];

    /// The reason's name in counters (`snake_case`).
    pub const fn name(self) -> &'static str {
        match self {
            TcpLinkDrop::BadMagic => "bad_magic",
            TcpLinkDrop::BadVersion => "bad_version",
            TcpLinkDrop::WrongLinkId => "wrong_link_id",
            TcpLinkDrop::BadLength => "bad_length",
            TcpLinkDrop::FrameTooBig => "frame_too_big",
            TcpLinkDrop::BadOffload => "bad_offload",
            TcpLinkDrop::Disconnected => "disconnected",
            TcpLinkDrop::BufferFull => "buffer_full",
            TcpLinkDrop::AuthFailed => "auth_failed",
            TcpLinkDrop::BadHandshake => "bad_handshake",
            TcpLinkDrop::HandshakeTimeout => "handshake_timeout",
            TcpLinkDrop::HandshakeLimit => "handshake_limit",
            TcpLinkDrop::RefusedTakeover => "refused_takeover",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Counters of one TCP link port.
#[derive(Debug, Default)]
pub struct TcpLinkStats {
    rx_frames: AtomicU64,
    tx_frames: AtomicU64,
    drops: [AtomicU64; TcpLinkDrop::ALL.len()],
    io_errors: AtomicU64,
    connects: AtomicU64,
    connect_failures: AtomicU64,
    disconnects: AtomicU64,
    connected: AtomicBool,
}

/// A copy of the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpLinkStatsSnapshot {
    /// Frames handed to the switch.
    pub rx_frames: u64,
    /// Frames queued to the peer.
    pub tx_frames: u64,
    /// Frames dropped (or connections cut), by [`TcpLinkDrop`] index.
    pub drops: [u64; TcpLinkDrop::ALL.len()],
    /// Reads and writes that failed (each cuts the connection).
    pub io_errors: u64,
    /// Connections established (accepted or connected).
    pub connects: u64,
    /// Connection attempts that failed.
    pub connect_failures: u64,
    /// Connections lost or cut.
    pub disconnects: u64,
    /// A connection is up now.
    pub connected: bool,
}

impl TcpLinkStatsSnapshot {
    /// Drops for `reason`.
    pub fn drops(&self, reason: TcpLinkDrop) -> u64 {
        self.drops[reason.index()]
    }
}

fn bump(c: &AtomicU64, n: u64) {
    // Single writer: a load and a store are enough and cheaper than a locked add.
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

impl TcpLinkStats {
    /// Counts `n` drops for `reason`. An atomic add: the link thread's handshakes count
    /// `WrongLinkId` too, beside the receive half (once per burst at most, so cheap).
    pub(crate) fn count_drop(&self, reason: TcpLinkDrop, n: u64) {
        self.drops[reason.index()].fetch_add(n, Ordering::Relaxed);
    }
    pub(crate) fn rx_frames(&self, n: u64) {
        bump(&self.rx_frames, n);
    }
    pub(crate) fn tx_frames(&self, n: u64) {
        bump(&self.tx_frames, n);
    }
    pub(crate) fn io_error(&self) {
        // Both halves and the link thread write this one.
        self.io_errors.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn connected(&self) {
        bump(&self.connects, 1);
        self.connected.store(true, Ordering::Relaxed);
    }
    pub(crate) fn connect_failed(&self) {
        bump(&self.connect_failures, 1);
    }
    pub(crate) fn disconnected(&self) {
        bump(&self.disconnects, 1);
        self.connected.store(false, Ordering::Relaxed);
    }

    /// Reads every counter.
    pub fn snapshot(&self) -> TcpLinkStatsSnapshot {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        TcpLinkStatsSnapshot {
            rx_frames: r(&self.rx_frames),
            tx_frames: r(&self.tx_frames),
            drops: std::array::from_fn(|i| r(&self.drops[i])),
            io_errors: r(&self.io_errors),
            connects: r(&self.connects),
            connect_failures: r(&self.connect_failures),
            disconnects: r(&self.disconnects),
            connected: self.connected.load(Ordering::Relaxed),
        }
    }
}
