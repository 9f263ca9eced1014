//! Offload metadata that travels beside a frame: the meaning of a virtio-net header
//! (checksum still to be computed, GSO super-frame), independent of its wire layout.
//!
//! Ports translate their own representation (virtio-net header from a guest or a TAP,
//! `PACKET_VNET_HDR`, VXLAN with UDP GSO) into an [`OffloadInfo`]; the switch uses it to decide
//! whether a destination can take the frame as it is, or needs checksums completed or the
//! frame segmented (see [`crate::gso`]).

/// What kind of segmentation a super-frame asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum GsoKind {
    /// An ordinary frame: no segmentation.
    #[default]
    None,
    /// TCP over IPv4 (virtio `VIRTIO_NET_HDR_GSO_TCPV4`).
    TcpV4,
    /// TCP over IPv6 (virtio `VIRTIO_NET_HDR_GSO_TCPV6`).
    TcpV6,
    /// UDP segmentation (USO, virtio `VIRTIO_NET_HDR_GSO_UDP_L4`), IPv4 or IPv6.
    UdpL4,
}

/// Offload state of one frame.
///
/// The default is "nothing to do": checksums (if any) are complete and the frame is not a
/// super-frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct OffloadInfo {
    /// The L4 checksum is still to be computed: sum from `csum_start` to the end of the frame
    /// and store it at `csum_start + csum_offset` (virtio `NEEDS_CSUM`). The field holds the
    /// pseudo-header sum already, as virtio and Linux expect.
    pub needs_csum: bool,
    /// The sender vouches for the checksums (virtio `DATA_VALID`): receivers may skip checking.
    pub data_valid: bool,
    /// Where checksumming starts (offset from the start of the Ethernet frame).
    pub csum_start: u16,
    /// Where, relative to `csum_start`, the checksum is stored.
    pub csum_offset: u16,
    /// The segmentation asked for.
    pub gso: GsoKind,
    /// Payload bytes per segment (MSS for TCP), when `gso` is not `None`.
    pub gso_size: u16,
    /// Length of the headers (Ethernet to L4 included), when `gso` is not `None`. A hint:
    /// segmentation recomputes it from the headers.
    pub hdr_len: u16,
}

impl OffloadInfo {
    /// True when the frame is a super-frame that needs segmentation.
    pub const fn is_gso(&self) -> bool {
        !matches!(self.gso, GsoKind::None)
    }
}
