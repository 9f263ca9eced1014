//! Where the headers of a super-frame are: Ethernet (+ VLAN tags), IPv4 or IPv6 (+ simple
//! extension headers), TCP or UDP. Also checks that the lengths the headers claim agree with
//! the frame, since every segment's lengths are derived from them.

use super::GsoError;
use crate::ethernet::ethertype;
use crate::ipv4::{protocol, Ipv4Packet};
use crate::ipv6::{self, next_header, Ipv6Packet};
use crate::offload::GsoKind;
use crate::tcp::TcpPacket;
use crate::udp::{self, UdpPacket};
use crate::vlan::VlanStack;
use crate::ParseError;

/// The IP version of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Family {
    V4,
    V6,
}

/// The transport protocol of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Transport {
    Tcp,
    Udp,
}

/// Offsets of the headers from the start of the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Layout {
    pub(super) family: Family,
    pub(super) transport: Transport,
    /// Start of the IP header.
    pub(super) l3: usize,
    /// Start of the TCP/UDP header.
    pub(super) l4: usize,
    /// Start of the TCP/UDP payload: the length of all headers.
    pub(super) payload: usize,
}

impl Layout {
    /// Parses the headers of `frame` and checks that they are what `gso` segments.
    pub(super) fn parse(frame: &[u8], gso: GsoKind) -> Result<Layout, GsoError> {
        let vlans = VlanStack::parse(frame)?;
        let l3 = vlans.payload_offset();
        let ip = frame.get(l3..).unwrap_or_default();
        let (family, l4_protocol, l4) = match vlans.ethertype {
            ethertype::IPV4 => {
                let (protocol, header_len) = parse_ipv4(ip)?;
                (Family::V4, protocol, l3 + header_len)
            }
            ethertype::IPV6 => {
                let (protocol, header_len) = parse_ipv6(ip)?;
                (Family::V6, protocol, l3 + header_len)
            }
            other => return Err(GsoError::NotIp { ethertype: other }),
        };
        let l4_bytes = frame.get(l4..).unwrap_or_default();
        let (transport, payload) = match l4_protocol {
            protocol::TCP => {
                let tcp = TcpPacket::new_checked(l4_bytes)?;
                (Transport::Tcp, l4 + tcp.header_len())
            }
            protocol::UDP => {
                let udp = UdpPacket::new_checked(l4_bytes)?;
                if usize::from(udp.len()) != l4_bytes.len() {
                    return Err(GsoError::LengthMismatch);
                }
                (Transport::Udp, l4 + udp::HEADER_LEN)
            }
            other => return Err(GsoError::NotTcpOrUdp { protocol: other }),
        };
        let matches = match gso {
            GsoKind::TcpV4 => (family, transport) == (Family::V4, Transport::Tcp),
            GsoKind::TcpV6 => (family, transport) == (Family::V6, Transport::Tcp),
            GsoKind::UdpL4 => transport == Transport::Udp,
            GsoKind::None => true,
        };
        if !matches {
            return Err(GsoError::KindMismatch { gso });
        }
        Ok(Layout {
            family,
            transport,
            l3,
            l4,
            payload,
        })
    }
}

/// Checks an IPv4 header that must span exactly `ip`; returns (protocol, header length).
fn parse_ipv4(ip: &[u8]) -> Result<(u8, usize), GsoError> {
    let packet = Ipv4Packet::new_checked(ip)?;
    if packet.is_fragment() {
        return Err(GsoError::IpFragment);
    }
    if usize::from(packet.total_len()) != ip.len() {
        return Err(GsoError::LengthMismatch);
    }
    Ok((packet.protocol(), packet.header_len()))
}

/// Checks an IPv6 header whose payload length must cover exactly `ip`, and walks Hop-by-Hop
/// and Destination Options headers; returns (transport protocol, length of all IP headers).
///
/// Narrower than [`Ipv6Packet::upper_layer`] on purpose: a Routing header changes the
/// pseudo-header's destination, AH authenticates the lengths segmentation rewrites, ESP hides
/// the transport header, and a fragment cannot be segmented.
fn parse_ipv6(ip: &[u8]) -> Result<(u8, usize), GsoError> {
    let packet = Ipv6Packet::new_checked(ip)?;
    // Jumbograms (payload length 0) are not segmented: they would not fit a virtio frame.
    if ipv6::HEADER_LEN + usize::from(packet.payload_len()) != ip.len() {
        return Err(GsoError::LengthMismatch);
    }
    let mut next = packet.next_header();
    let mut offset = ipv6::HEADER_LEN;
    for _ in 0..ipv6::MAX_EXTENSION_HEADERS {
        match next {
            next_header::HOP_BY_HOP | next_header::DEST_OPTS => {
                let ext = ip
                    .get(offset..offset + 2)
                    .ok_or(ParseError::truncated(offset + 2, ip.len()))?;
                let len = (usize::from(ext[1]) + 1) * 8;
                if offset + len > ip.len() {
                    return Err(ParseError::truncated(offset + len, ip.len()).into());
                }
                next = ext[0];
                offset += len;
            }
            next_header::FRAGMENT => return Err(GsoError::IpFragment),
            next_header::ROUTING | next_header::AUTH | next_header::ESP => {
                return Err(GsoError::UnsupportedExtensionHeader { next_header: next });
            }
            protocol => return Ok((protocol, offset)),
        }
    }
    Err(ParseError::BadExtensionHeader.into())
}
