//! Stage 1: what the pipeline reads from a frame's headers, and the ingress checks on it.

use weft_packet::vlan::VlanStack;
use weft_packet::{EthernetFrame, FrameSummary, L3Summary, L4Summary, MacAddr, OffloadInfo};

use crate::counters::DropReason;
use crate::flow_key::FlowKey;
use crate::port::RxFrame;
use crate::types::{PortId, VlanId};
use crate::vlan::{Ingress, PortVlanMode};

use super::PacketMeta;

/// How the receiving port classifies frames by VLAN, with the answer for untagged (and
/// priority-tagged) frames found once per batch rather than per packet.
pub(super) struct PortIngress<'m> {
    mode: &'m PortVlanMode,
    untagged: Result<VlanId, DropReason>,
    /// An access port: no frame may arrive tagged (a priority tag alone excepted).
    access: bool,
}

impl<'m> PortIngress<'m> {
    pub(super) fn new(mode: &'m PortVlanMode) -> Self {
        PortIngress {
            mode,
            untagged: ingress(mode, None),
            access: mode.is_access(),
        }
    }

    /// The VLAN of a frame whose outer tag has VLAN id `tag_vid` (`None`: untagged).
    #[inline(always)]
    fn vlan(&self, tag_vid: Option<VlanId>) -> Result<VlanId, DropReason> {
        match tag_vid {
            None | Some(0) => self.untagged,
            Some(_) => ingress(self.mode, tag_vid),
        }
    }
}

#[inline(always)]
fn ingress(mode: &PortVlanMode, tag_vid: Option<VlanId>) -> Result<VlanId, DropReason> {
    match mode.ingress(tag_vid) {
        Ingress::Vlan(v) => Ok(v),
        Ingress::Denied => Err(DropReason::VlanIngressDenied),
    }
}

/// Ingress checks shared by both loops: a valid source, offload offsets past the headers
/// the switch may rewrite, a VLAN the port admits (in this order: the first that fails
/// names the drop). Writes `meta` (once: it is read again only for packets that pass);
/// returns the packet's VLAN.
#[inline(always)]
fn admit(
    src: MacAddr,
    frame_len: usize,
    stack: &VlanStack,
    offload: OffloadInfo,
    ingress: &PortIngress<'_>,
    meta: &mut PacketMeta,
) -> Result<VlanId, DropReason> {
    let outer = stack.outer;
    *meta = PacketMeta::new(
        outer.map(|t| (t.tpid, t.tci.to_bits())),
        stack.payload_offset(),
    );
    if !src.is_unicast() {
        return Err(DropReason::InvalidSourceMac);
    }
    // An access port's frames are untagged: a tag (or a second one behind a priority tag)
    // is a guest trying to reach another VLAN, e.g. [10][20] from an access-10 port, which
    // would otherwise leave a trunk tagged 20.
    if ingress.access && (stack.inner.is_some() || outer.is_some_and(|t| t.tci.vid() != 0)) {
        return Err(DropReason::TaggedOnAccessPort);
    }
    if offload.needs_csum || offload.is_gso() {
        check_offload(offload, stack.ethertype, stack.payload_offset(), frame_len)?;
    }
    ingress.vlan(outer.map(|t| t.tci.vid()))
}

/// What a port said about a frame's checksum or segmentation, checked against the frame
/// before anyone relies on it: offsets past the headers the switch may rewrite (or
/// shifting them for a new head would point them into the MAC addresses) and inside the
/// frame; a segment size; a GSO kind that fits the EtherType. The rest (that the L4 header
/// is really there) is checked where segmentation or checksumming happens.
///
/// Takes values, not references: whatever a call takes the address of is kept in memory on
/// the hot path too.
#[cold]
fn check_offload(
    o: OffloadInfo,
    ethertype: u16,
    payload_offset: usize,
    frame_len: usize,
) -> Result<(), DropReason> {
    use weft_packet::ethernet::ethertype as et;
    use weft_packet::GsoKind;
    let start = usize::from(o.csum_start);
    let field_end = start + usize::from(o.csum_offset) + 2;
    let kind_fits = match o.gso {
        GsoKind::None => true,
        GsoKind::TcpV4 => ethertype == et::IPV4,
        GsoKind::TcpV6 => ethertype == et::IPV6,
        GsoKind::UdpL4 => matches!(ethertype, et::IPV4 | et::IPV6),
    };
    let ok = start >= payload_offset
        && field_end <= frame_len
        && kind_fits
        && (!o.is_gso() || (o.needs_csum && o.gso_size != 0));
    if ok {
        Ok(())
    } else {
        Err(DropReason::BadOffload)
    }
}

/// A frame too short to read (its meta is never read: the packet is dropped).
#[cold]
fn unreadable(meta: &mut PacketMeta) -> DropReason {
    *meta = PacketMeta::default();
    DropReason::Malformed
}

/// Stage 1 of the bridge loop: destination, source and VLAN.
#[inline(always)]
pub(super) fn read_l2(
    frame: RxFrame<'_>,
    offload: OffloadInfo,
    ingress: &PortIngress<'_>,
    meta: &mut PacketMeta,
) -> Result<(MacAddr, MacAddr, VlanId), DropReason> {
    // Read from the head only: the tags lie within the first 22 bytes, which every port's
    // head holds (a port lends a tail only after a head of at least that).
    let head = frame.head;
    let (Ok(eth), Ok(stack)) = (EthernetFrame::new_checked(head), VlanStack::parse(head)) else {
        return Err(unreadable(meta));
    };
    let src = eth.src_addr();
    let vid = admit(src, frame.len(), &stack, offload, ingress, meta)?;
    Ok((eth.dst_addr(), src, vid))
}

/// Stage 1 of the flow loop: the whole key. On a drop, the key read so far and the reason.
pub(super) fn read_key(
    in_port: PortId,
    frame: RxFrame<'_>,
    offload: OffloadInfo,
    ingress: &PortIngress<'_>,
    meta: &mut PacketMeta,
) -> Result<FlowKey, (FlowKey, DropReason)> {
    let mut key = FlowKey {
        in_port,
        ..FlowKey::default()
    };
    // The headers are read from the head alone; a frame whose headers would run into its
    // shared tail cannot be classified from bytes only weft writes, and is dropped (ports
    // copy such frames whole, so this is a port's bug, not a guest's doing).
    let head = frame.head;
    let (Some(Ok(sum)), Ok(stack)) = (
        FrameSummary::parse_prefix(head, frame.len()),
        VlanStack::parse(head),
    ) else {
        return Err((key, unreadable(meta)));
    };
    key.dst_mac = sum.dst;
    key.src_mac = sum.src;
    key.vlan = admit(sum.src, frame.len(), &stack, offload, ingress, meta).map_err(|r| (key, r))?;
    key.ethertype = sum.ethertype;
    match sum.l3 {
        L3Summary::Ipv4 {
            src, dst, protocol, ..
        } => {
            key.ip_src = Some(src.into());
            key.ip_dst = Some(dst.into());
            key.ip_proto = protocol;
        }
        L3Summary::Ipv6 {
            src,
            dst,
            next_header,
            ..
        } => {
            key.ip_src = Some(src.into());
            key.ip_dst = Some(dst.into());
            key.ip_proto = next_header;
        }
        _ => {}
    }
    match sum.l4 {
        L4Summary::Ports { src, dst } => {
            key.l4_src = src;
            key.l4_dst = dst;
        }
        L4Summary::Icmp { ty, code } => {
            key.l4_src = u16::from(ty);
            key.l4_dst = u16::from(code);
        }
        _ => {}
    }
    Ok(key)
}

/// The bytes [`read_key`] reads from a frame whose IP header (of `version`: no IPv4
/// options, no IPv6 extension headers) starts at `l3`, as a mask over the first 64 bytes in
/// little-endian words: all before the IP header (addresses, tag, EtherType), the IP header
/// but for what no key or check depends on, and the four bytes after it (the L4 ports, or
/// the ICMP type and code). Left out: IPv4's identification, TTL and header checksum; IPv6's
/// traffic class and flow label (all but the version nibble of its first four bytes) and
/// its hop limit.
const fn keep_mask(l3: usize, version: u8) -> [u64; 8] {
    let mut mask = [0u64; 8];
    let ip_len = if version == 4 { 20 } else { 40 };
    let end = l3 + ip_len + 4;
    let mut at = 0;
    while at < end {
        let offset = at.wrapping_sub(l3);
        let byte: u64 = match (version, offset) {
            (4, 4 | 5 | 8 | 10 | 11) => 0,
            (6, 0) => 0xf0,
            (6, 1..=3 | 7) => 0,
            _ => 0xff,
        };
        mask[at / 8] |= byte << ((at % 8) * 8);
        at += 1;
    }
    mask
}

/// The frame layouts whose flow words the flow loop compares: IPv4 without options or IPv6
/// without extension headers, untagged or behind one 802.1Q tag.
///
/// Two frames of one layout whose heads have equal flow words ([`FlowLayout::same_words`]:
/// equal in every byte [`keep_mask`] keeps), with equal head and frame lengths and the same
/// offload state, get the same key, meta and drop from [`read_key`], so the second needs no
/// parse: the packets of a flow differ in just the bytes left out (and in their payload).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum FlowLayout {
    Ipv4,
    Ipv4Tagged,
    Ipv6,
    Ipv6Tagged,
}

impl FlowLayout {
    /// The layout of the frame with `head`, when it is one of these and the head holds every
    /// byte its flow words take; `None` for every other frame (QinQ or another TPID, IPv4
    /// with options, IPv6 with an extension header, non-IP, a head too short).
    #[inline(always)]
    pub(super) fn of(head: &[u8]) -> Option<FlowLayout> {
        use weft_packet::ipv6::next_header as nh;
        let tagged = head.get(12..14)? == [0x81, 0x00];
        let l3 = if tagged { 18 } else { 14 };
        let (ethertype, first) = (head.get(l3 - 2..l3)?, *head.get(l3)?);
        let layout = match (ethertype, first, tagged) {
            ([0x08, 0x00], 0x45, false) => FlowLayout::Ipv4,
            ([0x08, 0x00], 0x45, true) => FlowLayout::Ipv4Tagged,
            ([0x86, 0xdd], _, _) if first >> 4 == 6 => {
                // An extension header moves the L4 header beyond the bytes compared.
                if nh::is_walked_extension(*head.get(l3 + 6)?) {
                    return None;
                }
                if tagged {
                    FlowLayout::Ipv6Tagged
                } else {
                    FlowLayout::Ipv6
                }
            }
            _ => return None,
        };
        (head.len() >= layout.end()).then_some(layout)
    }

    /// Where the bytes its flow words take end: four past the IP header.
    fn end(self) -> usize {
        match self {
            FlowLayout::Ipv4 => 14 + 24,
            FlowLayout::Ipv4Tagged => 18 + 24,
            FlowLayout::Ipv6 => 14 + 44,
            FlowLayout::Ipv6Tagged => 18 + 44,
        }
    }

    /// Whether heads `a` and `b`, both of this layout (as [`FlowLayout::of`] found), have
    /// equal flow words. One copy per layout, its mask constant: the bytes it leaves out
    /// cost nothing, and a layout's words past its end are not read.
    #[inline(always)]
    pub(super) fn same_words(self, a: &[u8], b: &[u8]) -> bool {
        match self {
            FlowLayout::Ipv4 => same_masked::<14, 4, 40>(a, b),
            FlowLayout::Ipv4Tagged => same_masked::<18, 4, 48>(a, b),
            FlowLayout::Ipv6 => same_masked::<14, 6, 64>(a, b),
            FlowLayout::Ipv6Tagged => same_masked::<18, 6, 64>(a, b),
        }
    }
}

/// Whether the first `BYTES` bytes (whole words, at most 64) of `a` and `b` are equal under
/// [`keep_mask`]`(L3, VERSION)`; zeros stand in for bytes past a head's end.
#[inline(always)]
fn same_masked<const L3: usize, const VERSION: u8, const BYTES: usize>(a: &[u8], b: &[u8]) -> bool {
    let mask = const { keep_mask(L3, VERSION) };
    let (Some(a), Some(b)) = (a.first_chunk::<BYTES>(), b.first_chunk::<BYTES>()) else {
        return same_masked_short::<L3, VERSION, BYTES>(a, b);
    };
    let mut differ = 0u64;
    for ((a, b), mask) in a.chunks_exact(8).zip(b.chunks_exact(8)).zip(mask) {
        let (a, b) = (
            a.try_into().unwrap_or([0; 8]),
            b.try_into().unwrap_or([0; 8]),
        );
        differ |= (u64::from_le_bytes(a) ^ u64::from_le_bytes(b)) & mask;
    }
    differ == 0
}

/// [`same_masked`] for heads shorter than `BYTES`: compared padded with zeros to 64 bytes.
#[cold]
#[inline(never)]
fn same_masked_short<const L3: usize, const VERSION: u8, const BYTES: usize>(
    a: &[u8],
    b: &[u8],
) -> bool {
    let pad = |head: &[u8]| {
        let mut bytes = [0u8; 64];
        for (to, from) in bytes.iter_mut().zip(head) {
            *to = *from;
        }
        bytes
    };
    same_masked::<L3, VERSION, BYTES>(&pad(a), &pad(b))
}

#[cfg(test)]
mod tests;
