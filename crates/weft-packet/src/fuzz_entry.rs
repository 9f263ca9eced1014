//! Bodies of the fuzz targets in `fuzz/`, kept in the library so that the crate's own tests
//! (a proptest below) run the same code on stable, and so that they compile with the crate.
//!
//! Each function takes arbitrary bytes and must never panic, except on the `assert!`s that
//! state an invariant: a fuzzer reports those as findings, which is their purpose here.

use core::hint::black_box;

use crate::arp::{ArpPacket, ArpRepr};
use crate::ethernet::{ethertype, EthernetFrame};
use crate::gso::{complete_checksum, Segmenter, MAX_SEGMENTS};
use crate::icmp::{Icmpv4Packet, Icmpv6Packet};
use crate::ipv4::{protocol, Ipv4Packet};
use crate::ipv6::Ipv6Packet;
use crate::offload::{GsoKind, OffloadInfo};
use crate::summary::FrameSummary;
use crate::tcp::TcpPacket;
use crate::udp::UdpPacket;
use crate::virtio_net::{self, VirtioNetHeader};
use crate::vlan::{VlanHeader, VlanStack};
use crate::vxlan::VxlanHeader;

/// Largest segment the `segment` target writes (a jumbo frame).
const SEGMENT_BUFFER_LEN: usize = 9216;

/// Parses `data` as a frame with [`FrameSummary::parse`], checks that
/// [`FrameSummary::parse_prefix`] agrees on its prefixes, then runs every view's
/// `new_checked` and all its accessors, both on `data` itself and where the headers of a real
/// frame would put them.
pub fn parse_frame(data: &[u8]) {
    let whole = FrameSummary::parse(data);
    check_prefixes(data, whole);
    if let Ok(summary) = whole {
        assert!(usize::from(summary.l3_offset) <= data.len());
        if let Some(l4) = summary.l4_offset {
            assert!(usize::from(l4) <= data.len());
        }
        black_box(summary);
    }
    if let Ok(eth) = EthernetFrame::new_checked(data) {
        black_box((
            eth.dst_addr(),
            eth.src_addr(),
            eth.ethertype(),
            eth.payload(),
        ));
    }
    if let Ok(vlan) = VlanHeader::new_checked(data) {
        black_box((
            vlan.tci(),
            vlan.pcp(),
            vlan.dei(),
            vlan.vid(),
            vlan.ethertype(),
        ));
        black_box(vlan.payload());
    }
    views_at(data, Layer::Any);
    if let Ok(stack) = VlanStack::parse(data) {
        let l3 = data.get(stack.payload_offset()..).unwrap_or_default();
        let layer = match stack.ethertype {
            ethertype::ARP => Layer::Arp,
            ethertype::IPV4 => Layer::Ipv4,
            ethertype::IPV6 => Layer::Ipv6,
            _ => return,
        };
        views_at(l3, layer);
    }
}

/// The snapshot invariant: a prefix of `data` gives `None` or exactly `whole` (the parse of
/// all of `data`), so a guest cannot hide headers past a port's snapshot; and a buffer longer
/// than the frame length is cut to it. Tried at the L2 header, the minimum frame, the usual
/// 128-byte snapshot and a length the input picks.
fn check_prefixes(data: &[u8], whole: crate::error::Result<FrameSummary>) {
    let picked = data.last().map_or(0, |&b| usize::from(b));
    for k in [14, 22, 64, 128, picked] {
        let k = k.min(data.len());
        if let Some(got) = FrameSummary::parse_prefix(&data[..k], data.len()) {
            assert_eq!(got, whole, "parse_prefix of {k} bytes disagrees with parse");
        }
    }
    assert_eq!(FrameSummary::parse_prefix(data, data.len()), Some(whole));
    let shorter = picked.min(data.len());
    assert_eq!(
        FrameSummary::parse_prefix(data, shorter),
        Some(FrameSummary::parse(&data[..shorter]))
    );
}

/// Which views to try on a buffer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Layer {
    Any,
    Arp,
    Ipv4,
    Ipv6,
}

/// Runs the L3 views `layer` names on `data`, and the L4 views on what they carry.
fn views_at(data: &[u8], layer: Layer) {
    if matches!(layer, Layer::Any | Layer::Arp) {
        if let Ok(arp) = ArpPacket::new_checked(data) {
            black_box((arp.hardware_type(), arp.protocol_type(), arp.operation()));
            black_box((arp.sender_hardware_addr(), arp.sender_protocol_addr()));
            black_box((arp.target_hardware_addr(), arp.target_protocol_addr()));
            black_box((arp.check_format().is_ok(), ArpRepr::parse(&arp)));
        }
    }
    if matches!(layer, Layer::Any | Layer::Ipv4) {
        if let Ok(ip) = Ipv4Packet::new_checked(data) {
            black_box((ip.version(), ip.ihl(), ip.dscp(), ip.ecn(), ip.total_len()));
            black_box((
                ip.ident(),
                ip.dont_frag(),
                ip.more_frags(),
                ip.frag_offset(),
            ));
            black_box((
                ip.is_fragment(),
                ip.is_first_fragment(),
                ip.ttl(),
                ip.checksum(),
            ));
            black_box((ip.options(), ip.verify_checksum()));
            let (src, dst) = (ip.src_addr(), ip.dst_addr());
            l4_views(ip.protocol(), ip.payload(), L4Addrs::V4(src, dst));
        }
    }
    if matches!(layer, Layer::Any | Layer::Ipv6) {
        if let Ok(ip) = Ipv6Packet::new_checked(data) {
            black_box((ip.traffic_class(), ip.flow_label(), ip.payload_len()));
            black_box((ip.next_header(), ip.hop_limit(), ip.payload()));
            if let Ok(upper) = ip.upper_layer() {
                assert!(upper.offset <= data.len());
                let l4 = data.get(upper.offset..).unwrap_or_default();
                let (src, dst) = (ip.src_addr(), ip.dst_addr());
                l4_views(upper.protocol, l4, L4Addrs::V6(src, dst));
            }
        }
    }
    if layer == Layer::Any {
        l4_views(protocol::TCP, data, L4Addrs::None);
        l4_views(protocol::UDP, data, L4Addrs::None);
        l4_views(protocol::ICMP, data, L4Addrs::None);
        l4_views(protocol::ICMPV6, data, L4Addrs::None);
    }
}

/// The addresses an L4 checksum covers.
#[derive(Clone, Copy)]
enum L4Addrs {
    None,
    V4(core::net::Ipv4Addr, core::net::Ipv4Addr),
    V6(core::net::Ipv6Addr, core::net::Ipv6Addr),
}

impl L4Addrs {
    fn v6_or_unspecified(self) -> (core::net::Ipv6Addr, core::net::Ipv6Addr) {
        match self {
            L4Addrs::V6(src, dst) => (src, dst),
            _ => (
                core::net::Ipv6Addr::UNSPECIFIED,
                core::net::Ipv6Addr::LOCALHOST,
            ),
        }
    }
    fn v4_or_unspecified(self) -> (core::net::Ipv4Addr, core::net::Ipv4Addr) {
        match self {
            L4Addrs::V4(src, dst) => (src, dst),
            _ => (
                core::net::Ipv4Addr::UNSPECIFIED,
                core::net::Ipv4Addr::LOCALHOST,
            ),
        }
    }
}

/// Runs the view for `proto` on `data` with every accessor and checksum check.
fn l4_views(proto: u8, data: &[u8], addrs: L4Addrs) {
    let (src4, dst4) = addrs.v4_or_unspecified();
    let (src6, dst6) = addrs.v6_or_unspecified();
    match proto {
        protocol::TCP => {
            if let Ok(tcp) = TcpPacket::new_checked(data) {
                black_box((
                    tcp.src_port(),
                    tcp.dst_port(),
                    tcp.seq_number(),
                    tcp.ack_number(),
                ));
                black_box((
                    tcp.data_offset(),
                    tcp.flags(),
                    tcp.fin(),
                    tcp.syn(),
                    tcp.rst(),
                ));
                black_box((tcp.psh(), tcp.ack(), tcp.urg(), tcp.ece(), tcp.cwr()));
                black_box((tcp.window(), tcp.checksum(), tcp.urgent_pointer()));
                black_box((tcp.options(), tcp.payload()));
                black_box(tcp.verify_checksum_v4(src4, dst4));
                black_box(tcp.verify_checksum_v6(src6, dst6));
            }
        }
        protocol::UDP => {
            if let Ok(udp) = UdpPacket::new_checked(data) {
                black_box((udp.src_port(), udp.dst_port(), udp.len(), udp.checksum()));
                black_box((udp.is_empty(), udp.payload()));
                black_box(udp.verify_checksum_v4(src4, dst4));
                black_box(udp.verify_checksum_v6(src6, dst6));
                if let Ok(vxlan) = VxlanHeader::new_checked(udp.payload()) {
                    black_box((vxlan.flags(), vxlan.vni(), vxlan.has_reserved_bits()));
                    parse_inner(vxlan.payload());
                }
            }
        }
        protocol::ICMP => {
            if let Ok(icmp) = Icmpv4Packet::new_checked(data) {
                black_box((icmp.msg_type(), icmp.code(), icmp.checksum()));
                black_box((icmp.rest_of_header(), icmp.next_hop_mtu(), icmp.body()));
                black_box(icmp.verify_checksum());
            }
        }
        protocol::ICMPV6 => {
            if let Ok(icmp) = Icmpv6Packet::new_checked(data) {
                black_box((icmp.msg_type(), icmp.code(), icmp.checksum()));
                black_box((icmp.rest_of_header(), icmp.mtu(), icmp.body()));
                black_box(icmp.verify_checksum(src6, dst6));
            }
        }
        _ => {}
    }
}

/// The inner frame of a VXLAN packet: summarised only (no further nesting).
fn parse_inner(frame: &[u8]) {
    black_box(FrameSummary::parse(frame).ok());
}

/// Reads a virtio-net header from the first 12 bytes of `data` and checks it against the
/// frame that follows; an accepted header must survive a round trip and its frame must be
/// segmentable or refused cleanly.
pub fn virtio_net_header(data: &[u8]) {
    black_box(virtio_net_header_segments(data));
}

/// [`virtio_net_header`], returning how many segments were written (`None` if the header or
/// the frame was refused).
fn virtio_net_header_segments(data: &[u8]) -> Option<usize> {
    let Some((header, frame)) = data.split_at_checked(virtio_net::HEADER_LEN) else {
        let legacy = VirtioNetHeader::new_checked(data).ok()?;
        black_box((legacy.num_buffers(), legacy.to_offload_info(0).ok()));
        return None;
    };
    let view = VirtioNetHeader::new_checked(header).ok()?;
    black_box((view.flags(), view.gso_type(), view.num_buffers()));
    let info = view.to_offload_info(frame.len()).ok()?;
    let back = VirtioNetHeader::from_offload_info(&info);
    assert_eq!(back.to_offload_info(frame.len()), Ok(info));
    run_segmenter(frame, &info, usize::from(u16::MAX), SEGMENT_BUFFER_LEN)
}

/// Derives an [`OffloadInfo`], a frame size limit and an output size from the first 13 bytes
/// of `data`, and segments the rest into a fixed buffer.
pub fn segment(data: &[u8]) {
    black_box(segment_segments(data));
}

/// [`segment`], returning how many segments were written (`None` if the frame was refused).
fn segment_segments(data: &[u8]) -> Option<usize> {
    let (head, frame) = data.split_at_checked(13)?;
    let be16 = |at: usize| u16::from_be_bytes([head[at], head[at + 1]]);
    let info = OffloadInfo {
        needs_csum: head[0] & 1 != 0,
        data_valid: head[0] & 2 != 0,
        gso: match (head[0] >> 2) & 3 {
            0 => GsoKind::None,
            1 => GsoKind::TcpV4,
            2 => GsoKind::TcpV6,
            _ => GsoKind::UdpL4,
        },
        csum_start: be16(1),
        csum_offset: be16(3),
        gso_size: be16(5),
        hdr_len: be16(7),
    };
    let max_frame_len = usize::from(be16(9));
    let out_len = usize::from(be16(11)) % (SEGMENT_BUFFER_LEN + 1);
    run_segmenter(frame, &info, max_frame_len, out_len)
}

/// Segments `frame` into an `out_len`-byte buffer and checks what comes out: within limits,
/// and (for GSO) each segment re-segments to itself. Returns how many segments were written.
fn run_segmenter(
    frame: &[u8],
    info: &OffloadInfo,
    max_frame_len: usize,
    out_len: usize,
) -> Option<usize> {
    let mut copy = frame.to_vec();
    black_box(complete_checksum(&mut copy, info).ok());
    let mut segmenter = Segmenter::new(frame, info, max_frame_len).ok()?;
    let count = segmenter.segment_count();
    assert!((1..=MAX_SEGMENTS).contains(&count));
    let mut buffer = [0u8; SEGMENT_BUFFER_LEN];
    let out = &mut buffer[..out_len];
    let mut produced = 0;
    let mut written = 0;
    while let Some(result) = segmenter.next_segment(out) {
        produced += 1;
        assert!(produced <= count);
        let Ok(len) = result else {
            continue;
        };
        written += 1;
        assert!(len <= max_frame_len && len <= out_len);
        assert!(len <= segmenter.max_segment_len());
        if info.is_gso() {
            assert_resegments_to_itself(&out[..len], info);
        }
    }
    Some(written)
}

/// A segment is a complete frame: segmenting it again with room for all of it must give it
/// back unchanged (lengths, checksums, sequence numbers and flags already final).
fn assert_resegments_to_itself(segment: &[u8], info: &OffloadInfo) {
    let again = OffloadInfo {
        gso_size: virtio_net::MAX_GSO_SIZE,
        ..*info
    };
    let resegmented = Segmenter::new(segment, &again, segment.len() + 1);
    let mut segmenter = match resegmented {
        Ok(segmenter) => segmenter,
        Err(err) => panic!("a segment does not segment again: {err}"),
    };
    let mut out = [0u8; SEGMENT_BUFFER_LEN];
    assert_eq!(segmenter.segment_count(), 1);
    match segmenter.next_segment(&mut out) {
        Some(Ok(len)) => assert_eq!(&out[..len], segment),
        other => panic!("re-segmenting failed: {other:?}"),
    }
}

#[cfg(test)]
mod tests;
