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

/// What [`read_key`] reads from an untagged IPv4 frame without options (the L2 header,
/// the IPv4 header and the first four bytes after it), as five words with the bytes it
/// does not read masked out: the identification, the TTL, the header checksum, and the
/// bytes after the L4 ports. Two frames with equal words, equal heads and lengths and the
/// same offload state get the same key and the same drop, so the second needs no parse: the
/// packets of a flow differ in just those bytes (and in their payload).
///
/// `None` for every other frame (tagged, IPv6, IPv4 with options, a head under 40 bytes).
#[inline(always)]
pub(super) fn ipv4_flow_words(head: &[u8]) -> Option<[u64; 5]> {
    const MASK: [u64; 5] = [
        u64::MAX,
        u64::MAX,
        // Bytes 16..24: total length kept; identification (18, 19) and TTL (22) not.
        u64::from_le_bytes([0xff, 0xff, 0, 0, 0xff, 0xff, 0, 0xff]),
        // Bytes 24..32: the header checksum (24, 25) not.
        u64::from_le_bytes([0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
        // Bytes 32..40: the L4 ports end at 38.
        u64::from_le_bytes([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0]),
    ];
    let bytes: &[u8; 40] = head.get(..40)?.try_into().ok()?;
    // EtherType IPv4 right after the addresses, version 4 with a 20-byte header.
    if (bytes[12], bytes[13], bytes[14]) != (0x08, 0x00, 0x45) {
        return None;
    }
    let mut words = [0u64; 5];
    for (i, (word, mask)) in words.iter_mut().zip(MASK).enumerate() {
        let at = i * 8;
        let chunk: [u8; 8] = bytes[at..at + 8].try_into().ok()?;
        *word = u64::from_le_bytes(chunk) & mask;
    }
    Some(words)
}

#[cfg(test)]
mod tests;
