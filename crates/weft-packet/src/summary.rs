//! The one-pass parse the switch runs on every frame: L2 addresses and tags, and a best-effort
//! look at L3 and L4 for the flow key.
//!
//! Only L2 can fail ([`FrameSummary::parse`] returns `Err` when the frame cannot even be
//! forwarded as Ethernet); anything wrong above L2 is recorded in the summary
//! ([`L3Summary::Malformed`], [`L4Summary::Malformed`]) and the frame stays forwardable.
//! L4 fields are read from within the IP payload (never from Ethernet padding), and only for
//! unfragmented packets and first fragments. No allocation; the result is `Copy`.
//!
//! [`FrameSummary::parse_prefix`] classifies a frame from a snapshot of its head (the rest
//! stays in guest memory): the same code as [`FrameSummary::parse`] runs over the snapshot,
//! checking lengths against the real frame length and stopping with `None` before any read
//! past the snapshot, so it gives exactly `parse`'s answer or none.

use core::convert::Infallible;
use core::net::{Ipv4Addr, Ipv6Addr};
use core::ops::Range;

use crate::arp::{ArpOperation, ArpPacket};
use crate::error::{ParseError, Result};
use crate::ethernet::{ethertype, EthernetFrame, MacAddr};
use crate::ipv4::{protocol, Ipv4Packet};
use crate::ipv6::{Held, Ipv6Packet, Ipv6UpperLayer, NotHeld};
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
        let mut summary = Self::parse_l2(frame)?;
        // A whole frame never misses a byte: the L3 code of `parse_prefix`, without its checks.
        let Ok(()) = summary.parse_l3(Whole(frame));
        Ok(summary)
    }

    /// Parses a frame of `frame_len` bytes of which `prefix` holds the first `prefix.len()`
    /// (bytes past `frame_len` are ignored), for a port that snapshots only a frame's head.
    ///
    /// `Some(result)` is exactly what [`parse`](Self::parse) gives on the whole frame, found
    /// from `prefix` alone; `None` when a byte `parse` would read (L2 tags, an IP, ARP or
    /// extension header, the ports or ICMP type) lies past the prefix, so the whole frame is
    /// needed. Lengths are checked against `frame_len`, so a header claiming more bytes than
    /// the frame has is `Malformed` as in `parse`. A guest cannot hide headers past the
    /// snapshot: they give `None`, never a different summary. Ordinary frames (two tags, IPv4
    /// with options, IPv6 with short extension headers, TCP/UDP/ICMP, ARP) need 128 bytes.
    pub fn parse_prefix(prefix: &[u8], frame_len: usize) -> Option<Result<FrameSummary>> {
        let held = prefix.get(..frame_len).unwrap_or(prefix);
        let mut summary = match Self::parse_l2(held) {
            Ok(summary) => summary,
            // The L2 views fail with `Truncated` only when they run out of bytes, and any other
            // outcome comes from held bytes alone; out of held bytes, only the whole frame knows.
            Err(ParseError::Truncated { .. }) if held.len() < frame_len => return None,
            Err(err) => return Some(Err(err)),
        };
        let head = Held {
            held,
            len: frame_len,
        };
        summary.parse_l3(head).ok()?;
        Some(Ok(summary))
    }

    /// Whether [`parse_prefix`](Self::parse_prefix) decides this frame from `prefix`
    /// (exactly when it returns `Some`), found without parsing for ordinary frames: what a
    /// port that snapshots frames asks of every frame longer than its snapshot.
    ///
    /// Every byte `parse` reads lies within the first 86 bytes (22 of L2, a 60-byte IPv4
    /// header, 4 bytes of ports), except for IPv6 frames whose next header is an extension
    /// header; only those, and prefixes shorter than 86 bytes, are parsed to know.
    #[inline]
    pub fn headers_fit(prefix: &[u8], frame_len: usize) -> bool {
        use crate::ipv6::next_header as nh;
        const ORDINARY_HEADERS: usize = 22 + crate::ipv4::MAX_HEADER_LEN + 4;
        if prefix.len() >= frame_len {
            return true;
        }
        if prefix.len() >= ORDINARY_HEADERS {
            if let Ok(stack) = VlanStack::parse(prefix) {
                if stack.ethertype != ethertype::IPV6 {
                    return true;
                }
                // The IPv6 next-header field, 6 bytes into the fixed header.
                let next = prefix.get(stack.payload_offset() + 6).copied();
                if next.is_some_and(|n| !nh::is_walked_extension(n)) {
                    return true;
                }
            }
        }
        Self::parse_prefix(prefix, frame_len).is_some()
    }

    /// The Ethernet header and VLAN tags (reads the first 22 bytes at most), with L3 and L4
    /// still empty.
    #[inline(always)]
    fn parse_l2(frame: &[u8]) -> Result<FrameSummary> {
        let eth = EthernetFrame::new_checked(frame)?;
        let tags = VlanStack::parse(frame)?;
        let l3_offset: u16 = match tags.tag_count() {
            0 => 14,
            1 => 18,
            _ => 22,
        };
        Ok(FrameSummary {
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
        })
    }

    /// L3 and L4, the part [`parse`](Self::parse) and [`parse_prefix`](Self::parse_prefix)
    /// share: every byte read comes from `frame.held()` after a `need` covering it and every
    /// length checked is `real_len`, so over a [`Held`] (a frame's snapshot) it agrees with the whole frame or stops
    /// with `Missing` before reading past the snapshot.
    #[inline(always)]
    fn parse_l3<'a, B: Bytes<'a>>(&mut self, frame: B) -> core::result::Result<(), B::Missing> {
        let l3 = frame.skip(usize::from(self.l3_offset));
        match self.ethertype {
            ethertype::IPV4 => self.parse_ipv4(l3),
            ethertype::IPV6 => self.parse_ipv6(l3),
            ethertype::ARP => {
                self.l3 = arp_summary(l3)?;
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// IPv4 and its L4 header. Kept out of line, as the non-generic helper was: inlined, the
    /// per-packet `parse` grew by a third in instructions.
    #[inline(never)]
    fn parse_ipv4<'a, B: Bytes<'a>>(&mut self, l3: B) -> core::result::Result<(), B::Missing> {
        // The check reads the first four bytes, the accessors the fixed header.
        l3.need(crate::ipv4::MIN_HEADER_LEN)?;
        let packet = Ipv4Packet::new_unchecked(l3.held());
        if let Err(err) = packet.check_len_of(l3.real_len()) {
            self.l3 = L3Summary::Malformed(err);
            return Ok(());
        }
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
            let payload = packet.header_len()..usize::from(packet.total_len());
            self.set_l4(l3, payload, packet.protocol(), protocol::ICMP)?;
        }
        Ok(())
    }

    /// IPv6, its extension headers and its L4 header; out of line like `parse_ipv4`.
    #[inline(never)]
    fn parse_ipv6<'a, B: Bytes<'a>>(&mut self, l3: B) -> core::result::Result<(), B::Missing> {
        // The check reads the first six bytes, the accessors the fixed header.
        l3.need(crate::ipv6::HEADER_LEN)?;
        let packet = Ipv6Packet::new_unchecked(l3.held());
        let upper = match packet.check_len_of(l3.real_len()) {
            Ok(()) => B::upper_layer(&packet)?,
            Err(err) => Err(err),
        };
        let upper = match upper {
            Ok(upper) => upper,
            Err(err) => {
                self.l3 = L3Summary::Malformed(err);
                return Ok(());
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
            // `upper.offset` is at most 40 + payload length.
            let end = crate::ipv6::HEADER_LEN + usize::from(packet.payload_len());
            self.set_l4(l3, upper.offset..end, upper.protocol, protocol::ICMPV6)?;
        }
        Ok(())
    }

    /// Records the L4 header at `payload.start` from the L3 header; `payload` runs to the end
    /// of the IP payload (never into Ethernet padding). Reads only the fields it records.
    fn set_l4<'a, B: Bytes<'a>>(
        &mut self,
        l3: B,
        payload: Range<usize>,
        proto: u8,
        icmp: u8,
    ) -> core::result::Result<(), B::Missing> {
        let Ok(offset) = u16::try_from(payload.start + usize::from(self.l3_offset)) else {
            // Unreachable with a bounded walk (a few KiB of headers at most); stay total.
            self.l4 = L4Summary::Malformed;
            return Ok(());
        };
        self.l4_offset = Some(offset);
        self.l4 = match proto {
            protocol::TCP | protocol::UDP | protocol::SCTP | protocol::UDPLITE => {
                match l3.first_of(payload, 4)? {
                    [s0, s1, d0, d1, ..] => L4Summary::Ports {
                        src: u16::from_be_bytes([*s0, *s1]),
                        dst: u16::from_be_bytes([*d0, *d1]),
                    },
                    _ => L4Summary::Malformed,
                }
            }
            p if p == icmp => match l3.first_of(payload, 2)? {
                [ty, code, ..] => L4Summary::Icmp {
                    ty: *ty,
                    code: *code,
                },
                _ => L4Summary::Malformed,
            },
            _ => L4Summary::None,
        };
        Ok(())
    }
}

fn arp_summary<'a, B: Bytes<'a>>(l3: B) -> core::result::Result<L3Summary, B::Missing> {
    // The check reads the first six bytes, the accessors all 28.
    l3.need(crate::arp::PACKET_LEN)?;
    let arp = ArpPacket::new_unchecked(l3.held());
    let checked = arp
        .check_len_of(l3.real_len())
        .and_then(|()| arp.check_format());
    Ok(match checked {
        Ok(()) => L3Summary::Arp {
            op: arp.operation(),
            sender_ip: arp.sender_protocol_addr(),
            target_ip: arp.target_protocol_addr(),
        },
        Err(err) => L3Summary::Malformed(err),
    })
}

/// The bytes the summary reads: a whole frame ([`Whole`]) or the head of a longer one
/// ([`Held`] (a frame's snapshot)). [`FrameSummary::parse`] and [`FrameSummary::parse_prefix`] run the same code
/// over either, so the prefix parse can only agree with the whole one or give up.
trait Bytes<'a>: Copy {
    /// Why a byte the parse needs cannot be read: uninhabited for a whole frame.
    type Missing;
    /// The bytes held: the first bytes of the real buffer (all of them for a whole frame).
    fn held(self) -> &'a [u8];
    /// The length of the real buffer.
    fn real_len(self) -> usize;
    /// `Ok` when the held bytes include every byte of the real buffer below `end`: reads
    /// there see the real bytes, and reads past the real end fail on the held bytes too.
    fn need(self, end: usize) -> core::result::Result<(), Self::Missing>;
    /// The real buffer from `n` on (empty past its end).
    fn skip(self, n: usize) -> Self;
    /// The first `max` bytes of the real bytes `range` (fewer if the range is shorter; empty
    /// if it is not within the real buffer).
    #[inline]
    fn first_of(
        self,
        range: Range<usize>,
        max: usize,
    ) -> core::result::Result<&'a [u8], Self::Missing> {
        if range.start > range.end || range.end > self.real_len() {
            return Ok(&[]);
        }
        let end = range.end.min(range.start.saturating_add(max));
        self.need(end)?;
        Ok(self.held().get(range.start..end).unwrap_or(&[]))
    }
    /// The IPv6 extension-header walk over a packet held this way (checked with
    /// [`Ipv6Packet::check_len_of`]).
    fn upper_layer(
        packet: &Ipv6Packet<&'a [u8]>,
    ) -> core::result::Result<Result<Ipv6UpperLayer>, Self::Missing>;
}

/// A whole frame: every byte held, nothing ever missing.
#[derive(Clone, Copy)]
struct Whole<'a>(&'a [u8]);

impl<'a> Bytes<'a> for Whole<'a> {
    type Missing = Infallible;
    #[inline(always)]
    fn held(self) -> &'a [u8] {
        self.0
    }
    #[inline(always)]
    fn real_len(self) -> usize {
        self.0.len()
    }
    #[inline(always)]
    fn need(self, _end: usize) -> core::result::Result<(), Infallible> {
        Ok(())
    }
    #[inline(always)]
    fn skip(self, n: usize) -> Self {
        Whole(self.0.get(n..).unwrap_or(&[]))
    }
    #[inline(always)]
    fn upper_layer(
        packet: &Ipv6Packet<&'a [u8]>,
    ) -> core::result::Result<Result<Ipv6UpperLayer>, Infallible> {
        Ok(packet.upper_layer())
    }
}

impl<'a> Bytes<'a> for Held<'a> {
    type Missing = NotHeld;
    fn held(self) -> &'a [u8] {
        self.held
    }
    fn real_len(self) -> usize {
        self.len
    }
    fn need(self, end: usize) -> core::result::Result<(), NotHeld> {
        if self.held.len() >= end.min(self.len) {
            Ok(())
        } else {
            Err(NotHeld)
        }
    }
    fn skip(self, n: usize) -> Self {
        Held {
            held: self.held.get(n..).unwrap_or(&[]),
            len: self.len.saturating_sub(n),
        }
    }
    fn upper_layer(
        packet: &Ipv6Packet<&'a [u8]>,
    ) -> core::result::Result<Result<Ipv6UpperLayer>, NotHeld> {
        packet.upper_layer_prefix().ok_or(NotHeld)
    }
}

#[cfg(test)]
mod prefix_tests;
#[cfg(test)]
mod tests;
