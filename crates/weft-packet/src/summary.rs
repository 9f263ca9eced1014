//! The one-pass parse the switch runs on every frame: L2 addresses and tags, and a best-effort
//! look at L3 and L4 for the flow key.
//!
//! Only L2 can fail ([`FrameSummary::parse`] returns `Err` when the frame cannot even be
//! forwarded as Ethernet); anything wrong above L2 is recorded in the summary
//! ([`L3Summary::Malformed`], [`L4Summary::Malformed`]) and the frame stays forwardable.
//! L4 fields are read from within the IP payload (never from Ethernet padding), and only for
//! unfragmented packets and first fragments. No allocation; the result is `Copy`.

use core::net::{Ipv4Addr, Ipv6Addr};

use crate::arp::{ArpOperation, ArpPacket};
use crate::error::{ParseError, Result};
use crate::ethernet::{ethertype, EthernetFrame, MacAddr};
use crate::ipv4::{protocol, Ipv4Packet};
use crate::ipv6::Ipv6Packet;
use crate::vlan::{VlanStack, VlanTci};

/// Where a packet stands with respect to IP fragmentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FragmentKind {
    /// Not a fragment (IPv6 atomic fragments included).
    #[default]
    None,
    /// The first fragment: offset 0, more fragments follow. Carries the L4 header.
    First,
    /// A later fragment: no L4 header.
    Later,
}

/// What the summary found at L3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum L3Summary {
    /// Neither IP nor ARP.
    None,
    /// ARP for Ethernet/IPv4.
    Arp {
        /// The operation.
        op: ArpOperation,
        /// Sender protocol address.
        sender_ip: Ipv4Addr,
        /// Target protocol address.
        target_ip: Ipv4Addr,
    },
    /// IPv4.
    Ipv4 {
        /// Source address.
        src: Ipv4Addr,
        /// Destination address.
        dst: Ipv4Addr,
        /// Protocol field.
        protocol: u8,
        /// Time to live.
        ttl: u8,
        /// Fragmentation state.
        fragment: FragmentKind,
    },
    /// IPv6.
    Ipv6 {
        /// Source address.
        src: Ipv6Addr,
        /// Destination address.
        dst: Ipv6Addr,
        /// The upper-layer protocol after the extension headers (59 for No Next Header, 50 for
        /// ESP; for a later fragment, the protocol of the fragmented data).
        next_header: u8,
        /// Hop limit.
        hop_limit: u8,
        /// Fragmentation state.
        fragment: FragmentKind,
    },
    /// The EtherType says IPv4, IPv6 or ARP, but the header (or IPv6 extension-header chain)
    /// does not parse.
    Malformed(ParseError),
}

/// What the summary found at L4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum L4Summary {
    /// No L4 information: not IP, a later fragment, or a protocol without ports.
    None,
    /// TCP, UDP, SCTP or UDP-Lite ports (the first four bytes of the L4 header).
    Ports {
        /// Source port.
        src: u16,
        /// Destination port.
        dst: u16,
    },
    /// ICMP (over IPv4) or ICMPv6 (over IPv6) type and code.
    Icmp {
        /// Type.
        ty: u8,
        /// Code.
        code: u8,
    },
    /// The IP payload is too short for the fields above.
    Malformed,
}

/// The summary of one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FrameSummary {
    /// Destination MAC address.
    pub dst: MacAddr,
    /// Source MAC address.
    pub src: MacAddr,
    /// The TPID of the outer tag (0x8100, 0x88a8 or 0x9100), when the frame is tagged.
    pub outer_tpid: Option<u16>,
    /// The outer (or only) VLAN tag.
    pub outer_vlan: Option<VlanTci>,
    /// The inner VLAN tag of a QinQ frame (always a C-tag, 0x8100).
    pub inner_vlan: Option<VlanTci>,
    /// The EtherType after the tags.
    pub ethertype: u16,
    /// Offset of the L3 header from the start of the frame (14, 18 or 22).
    pub l3_offset: u16,
    /// L3 information.
    pub l3: L3Summary,
    /// Offset of the L4 header from the start of the frame, when L3 parsed and the packet is not
    /// a later fragment (set for every upper-layer protocol, even those [`L4Summary`] does not
    /// describe).
    pub l4_offset: Option<u16>,
    /// L4 information.
    pub l4: L4Summary,
}

impl FrameSummary {
    /// Parses `frame` (starting at the destination MAC address, without FCS).
    ///
    /// Errors only at L2: a truncated Ethernet header or VLAN tag ([`ParseError::Truncated`]),
    /// a third VLAN tag or an inner S-tag ([`ParseError::Unsupported`]).
    #[inline]
    pub fn parse(frame: &[u8]) -> Result<FrameSummary> {
        let eth = EthernetFrame::new_checked(frame)?;
        let tags = VlanStack::parse(frame)?;
        let l3_offset: u16 = match tags.tag_count() {
            0 => 14,
            1 => 18,
            _ => 22,
        };
        let mut summary = FrameSummary {
            dst: eth.dst_addr(),
            src: eth.src_addr(),
            outer_tpid: tags.outer.map(|t| t.tpid),
            outer_vlan: tags.outer.map(|t| t.tci),
            inner_vlan: tags.inner.map(|t| t.tci),
            ethertype: tags.ethertype,
            l3_offset,
            l3: L3Summary::None,
            l4_offset: None,
            l4: L4Summary::None,
        };
        let l3 = frame.get(usize::from(l3_offset)..).unwrap_or(&[]);
        match tags.ethertype {
            ethertype::IPV4 => summary.parse_ipv4(l3),
            ethertype::IPV6 => summary.parse_ipv6(l3),
            ethertype::ARP => summary.l3 = arp_summary(l3),
            _ => {}
        }
        Ok(summary)
    }

    fn parse_ipv4(&mut self, l3: &[u8]) {
        let packet = match Ipv4Packet::new_checked(l3) {
            Ok(packet) => packet,
            Err(err) => {
                self.l3 = L3Summary::Malformed(err);
                return;
            }
        };
        let fragment = if !packet.is_fragment() {
            FragmentKind::None
        } else if packet.frag_offset() == 0 {
            FragmentKind::First
        } else {
            FragmentKind::Later
        };
        self.l3 = L3Summary::Ipv4 {
            src: packet.src_addr(),
            dst: packet.dst_addr(),
            protocol: packet.protocol(),
            ttl: packet.ttl(),
            fragment,
        };
        if fragment != FragmentKind::Later {
            self.set_l4(
                packet.header_len(),
                packet.protocol(),
                protocol::ICMP,
                packet.payload(),
            );
        }
    }

    fn parse_ipv6(&mut self, l3: &[u8]) {
        let (packet, upper) = match Ipv6Packet::new_checked(l3) {
            Ok(packet) => match packet.upper_layer() {
                Ok(upper) => (packet, upper),
                Err(err) => {
                    self.l3 = L3Summary::Malformed(err);
                    return;
                }
            },
            Err(err) => {
                self.l3 = L3Summary::Malformed(err);
                return;
            }
        };
        let fragment = if upper.is_first_fragment() {
            FragmentKind::First
        } else if upper.is_fragment() {
            FragmentKind::Later
        } else {
            FragmentKind::None
        };
        self.l3 = L3Summary::Ipv6 {
            src: packet.src_addr(),
            dst: packet.dst_addr(),
            next_header: upper.protocol,
            hop_limit: packet.hop_limit(),
            fragment,
        };
        if fragment != FragmentKind::Later {
            // `upper.offset` is at most 40 + payload length, so the slice is in bounds.
            let end = crate::ipv6::HEADER_LEN + usize::from(packet.payload_len());
            let l4 = l3.get(upper.offset..end).unwrap_or(&[]);
            self.set_l4(upper.offset, upper.protocol, protocol::ICMPV6, l4);
        }
    }

    /// Records the L4 header at `offset` from the L3 header; `l4` is the IP payload from there.
    fn set_l4(&mut self, offset: usize, proto: u8, icmp: u8, l4: &[u8]) {
        let Ok(offset) = u16::try_from(offset + usize::from(self.l3_offset)) else {
            // Unreachable with a bounded walk (a few KiB of headers at most); stay total.
            self.l4 = L4Summary::Malformed;
            return;
        };
        self.l4_offset = Some(offset);
        self.l4 = match proto {
            protocol::TCP | protocol::UDP | protocol::SCTP | protocol::UDPLITE => match l4 {
                [s0, s1, d0, d1, ..] => L4Summary::Ports {
                    src: u16::from_be_bytes([*s0, *s1]),
                    dst: u16::from_be_bytes([*d0, *d1]),
                },
                _ => L4Summary::Malformed,
            },
            p if p == icmp => match l4 {
                [ty, code, ..] => L4Summary::Icmp {
                    ty: *ty,
                    code: *code,
                },
                _ => L4Summary::Malformed,
            },
            _ => L4Summary::None,
        };
    }
}

fn arp_summary(l3: &[u8]) -> L3Summary {
    match ArpPacket::new_checked(l3) {
        Ok(arp) => L3Summary::Arp {
            op: arp.operation(),
            sender_ip: arp.sender_protocol_addr(),
            target_ip: arp.target_protocol_addr(),
        },
        Err(err) => L3Summary::Malformed(err),
    }
}

#[cfg(test)]
mod tests;
