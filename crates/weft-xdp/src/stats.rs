//! What an AF_XDP port counts itself: frames it refused, by reason, and its kicks.
//!
//! Receive counters are written only by the receive half, transmit counters only by the
//! transmit half (single writer each); anyone reads them through the shared `Arc`.

use weft_switch::counters::Counter;

/// Why the port dropped a frame itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum XdpDrop {
    /// An rx descriptor whose address is outside the UMEM's receive chunks.
    BadAddress,
    /// An rx descriptor whose frame runs past the end of its chunk.
    CrossesChunk,
    /// An rx descriptor shorter than an Ethernet header.
    Runt,
    /// An rx descriptor naming a chunk the port already held (named twice).
    DuplicateChunk,
    /// A frame to transmit larger than a chunk.
    TxTooBig,
    /// The kernel refused a frame on transmit (the device dropped it).
    TxRefused,
}

impl XdpDrop {
    /// Every reason, in index order.
    pub const ALL: [XdpDrop; 6] = [
        XdpDrop::BadAddress,
        XdpDrop::CrossesChunk,
        XdpDrop::Runt,
        XdpDrop::DuplicateChunk,
        XdpDrop::TxTooBig,
        XdpDrop::TxRefused,
    ];
    /// Number of reasons.
    pub const COUNT: usize = Self::ALL.len();

    /// Position in [`XdpDrop::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }

    /// A stable snake_case name for metrics and logs.
    pub const fn name(self) -> &'static str {
        match self {
            XdpDrop::BadAddress => "xdp_bad_address",
            XdpDrop::CrossesChunk => "xdp_crosses_chunk",
            XdpDrop::Runt => "xdp_runt",
            XdpDrop::DuplicateChunk => "xdp_duplicate_chunk",
            XdpDrop::TxTooBig => "xdp_tx_too_big",
            XdpDrop::TxRefused => "xdp_tx_refused",
        }
    }
}

/// Counters of one AF_XDP port.
#[derive(Debug, Default)]
pub struct XdpStats {
    /// Frames received and handed to the switch.
    pub rx_frames: Counter,
    /// Wake-ups of the fill ring the kernel asked for (`poll`).
    pub rx_kicks: Counter,
    /// Frames put in the tx ring.
    pub tx_frames: Counter,
    /// Wake-ups of the tx ring (`sendto`).
    pub tx_kicks: Counter,
    /// Completion-ring entries that named no chunk in flight (ignored).
    pub tx_bad_completions: Counter,
    drops: [Counter; XdpDrop::COUNT],
}

impl XdpStats {
    /// Counts one drop (by the half that owns `reason`).
    #[inline]
    pub(crate) fn drop_one(&self, reason: XdpDrop) {
        self.drops[reason.index()].add(1);
    }

    /// Drops counted for `reason`.
    pub fn drops(&self, reason: XdpDrop) -> u64 {
        self.drops[reason.index()].get()
    }
}
