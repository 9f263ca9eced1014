//! The virtio-net header on the receive and transmit paths of both port kinds.
//!
//! Receive: a buffer holds `[virtio-net header][Ethernet frame]`; [`parse_rx`] checks it
//! (length, header fields against the frame, MTU) and gives the frame's [`OffloadInfo`] or
//! the reason to drop it. The kernel writes these headers, but the same code serves file
//! descriptors handed over by other processes, so nothing here trusts them.
//!
//! Transmit: [`tx_header`] renders a frame's offload state as a header to write in front.

use weft_packet::vlan::VlanStack;
use weft_packet::{OffloadInfo, VirtioNetHeader, VirtioNetHeaderError};

use crate::offloads::MAX_GSO_FRAME_LEN;
use crate::stats::PortDrop;

/// Header length on TAP queues: the virtio 1.x header (with `num_buffers`), set with
/// `TUNSETVNETHDRSZ`.
pub const TAP_HDR_LEN: usize = weft_packet::virtio_net::HEADER_LEN;
/// Header length on AF_PACKET sockets with `PACKET_VNET_HDR`: the legacy header.
pub const PACKET_HDR_LEN: usize = weft_packet::virtio_net::LEGACY_HEADER_LEN;
/// An Ethernet header without tags.
const ETH_HLEN: usize = 14;

/// Why [`parse_rx`] refused a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxReject {
    /// Too short for the header and an Ethernet header.
    Truncated,
    /// The header does not fit the frame.
    BadVnetHeader(VirtioNetHeaderError),
    /// An ordinary frame above the MTU, or a super-frame above [`MAX_GSO_FRAME_LEN`].
    Oversize,
}

impl RxReject {
    /// The counter this refusal goes to.
    pub const fn reason(self) -> PortDrop {
        match self {
            RxReject::Truncated => PortDrop::Truncated,
            RxReject::BadVnetHeader(_) => PortDrop::BadVnetHeader,
            RxReject::Oversize => PortDrop::Oversize,
        }
    }
}

/// Checks one received buffer: `hdr_len` bytes of virtio-net header, then the frame, whose
/// L3 packet may be at most `mtu` bytes unless it is a GSO super-frame. Returns the frame's
/// offload state.
pub fn parse_rx(buf: &[u8], hdr_len: usize, mtu: usize) -> Result<OffloadInfo, RxReject> {
    if buf.len() < hdr_len + ETH_HLEN || hdr_len < PACKET_HDR_LEN {
        return Err(RxReject::Truncated);
    }
    let (header, frame) = buf.split_at(hdr_len);
    let offload = VirtioNetHeader::new_checked(header)
        .map_err(|_| RxReject::Truncated)?
        .to_offload_info(frame.len())
        .map_err(RxReject::BadVnetHeader)?;
    if offload.is_gso() {
        if frame.len() > MAX_GSO_FRAME_LEN {
            return Err(RxReject::Oversize);
        }
    } else {
        // A tag stack cut short is the core's to drop (as malformed); measure from 14 then.
        let l3_offset = VlanStack::parse(frame).map_or(ETH_HLEN, |s| s.payload_offset());
        if frame.len().saturating_sub(l3_offset) > mtu {
            return Err(RxReject::Oversize);
        }
    }
    Ok(offload)
}

/// The 12-byte header to write in front of a frame with `offload` (a TAP uses all of it,
/// an AF_PACKET socket the first [`PACKET_HDR_LEN`] bytes).
pub fn tx_header(offload: &OffloadInfo) -> [u8; TAP_HDR_LEN] {
    if !offload.needs_csum && !offload.is_gso() && !offload.data_valid {
        return [0; TAP_HDR_LEN];
    }
    VirtioNetHeader::from_offload_info(offload).into_inner()
}

#[cfg(test)]
mod tests;
