//! Offloads through a whole switch, with real frames built by etherparse and every frame a
//! destination receives checked on its own by etherparse: super-frames segmented for ports
//! without TSO/USO and passed whole to ports with it, partial checksums completed or kept,
//! offload offsets following VLAN tags pushed or popped on the way, hostile offload
//! metadata dropped and counted where the code notices it, and frame size limits.

use etherparse::{NetSlice, PacketBuilder, SlicedPacket, TcpHeader, TransportSlice, VlanSlice};
use weft_packet::checksum;
use weft_packet::{GsoKind, OffloadInfo};

use super::*;
use crate::counters::{DropReason, PortCountersSnapshot};
use crate::flow_match::FlowMatch;
use crate::flow_table::{Action, ActionList, FlowRule};
use crate::memory_port::{memory_port, MemoryPortHandle};
use crate::port::PortCaps;
use crate::vlan::PortVlanMode;

const T0: Timestamp = Timestamp(1_000_000_000);
const SRC_MAC: [u8; 6] = [0x52, 0x54, 0, 0, 0, 1];
const DST_MAC: [u8; 6] = [0x52, 0x54, 0, 0, 0, 2];
const IP4_SRC: [u8; 4] = [192, 168, 7, 1];
const IP4_DST: [u8; 4] = [192, 168, 7, 2];
const IP6_SRC: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const IP6_DST: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
/// Close to the top, so that sequence numbers wrap inside the super-frame.
const SEQ: u32 = 0xffff_f000;
/// Segment sizes the tests ask for: a common IPv4 MSS (with TCP timestamps) and the IPv6
/// maximum at a 1500-byte MTU without options.
pub(super) const MSS4: u16 = 1448;
const MSS6: u16 = 1440;
const PAYLOAD: usize = 20_000;
/// The longest untagged frame a 1500-byte MTU allows.
pub(super) const MAX_UNTAGGED_1500: usize = 1514;

// ---- Frames. ----

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ip {
    V4,
    V6,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum L4 {
    Tcp,
    Udp,
}

/// Deterministic payload bytes that do not repeat with any segment size used here.
fn payload(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| u8::try_from((i * 7 + i / 251) % 256).unwrap())
        .collect()
}

/// An untagged TCP (ACK, PSH, FIN) or UDP frame carrying `len` payload bytes, with correct
/// checksums.
fn packet(ip: Ip, l4: L4, len: usize) -> Vec<u8> {
    let eth = PacketBuilder::ethernet2(SRC_MAC, DST_MAC);
    let data = payload(len);
    let mut f = Vec::new();
    match (ip, l4) {
        (Ip::V4, L4::Tcp) => eth
            .ipv4(IP4_SRC, IP4_DST, 64)
            .tcp(40000, 5201, SEQ, 1024)
            .ack(77)
            .psh()
            .fin()
            .write(&mut f, &data),
        (Ip::V6, L4::Tcp) => eth
            .ipv6(IP6_SRC, IP6_DST, 64)
            .tcp(40000, 5201, SEQ, 1024)
            .ack(77)
            .psh()
            .fin()
            .write(&mut f, &data),
        (Ip::V4, L4::Udp) => eth
            .ipv4(IP4_SRC, IP4_DST, 64)
            .udp(4000, 4789)
            .write(&mut f, &data),
        (Ip::V6, L4::Udp) => eth
            .ipv6(IP6_SRC, IP6_DST, 64)
            .udp(4000, 4789)
            .write(&mut f, &data),
    }
    .unwrap();
    f
}

/// Offset of the L4 header in an untagged frame.
fn l4_offset(ip: Ip) -> usize {
    14 + if ip == Ip::V4 { 20 } else { 40 }
}

/// `packet(ip, l4, len)` as a virtio sender hands it over: the L4 checksum field holds the
/// pseudo-header sum, and the offload info asks for it to be completed (and, with `gso`,
/// for `gso_size`-byte segments).
fn offloaded(ip: Ip, l4: L4, len: usize, gso: GsoKind, gso_size: u16) -> (Vec<u8>, OffloadInfo) {
    let mut f = packet(ip, l4, len);
    let start = l4_offset(ip);
    let (protocol, csum_offset, l4_header) = match l4 {
        L4::Tcp => (6, 16, 20),
        L4::Udp => (17, 6, 8),
    };
    let upper_len = f.len() - start;
    let pseudo = match ip {
        Ip::V4 => checksum::pseudo_header_v4(
            IP4_SRC.into(),
            IP4_DST.into(),
            protocol,
            u16::try_from(upper_len).unwrap(),
        ),
        Ip::V6 => checksum::pseudo_header_v6(
            IP6_SRC.into(),
            IP6_DST.into(),
            protocol,
            u32::try_from(upper_len).unwrap(),
        ),
    };
    let field = start + csum_offset;
    f[field..field + 2].copy_from_slice(&pseudo.to_be_bytes());
    let info = OffloadInfo {
        needs_csum: true,
        data_valid: false,
        csum_start: u16::try_from(start).unwrap(),
        csum_offset: u16::try_from(csum_offset).unwrap(),
        gso,
        gso_size,
        hdr_len: if gso == GsoKind::None {
            0
        } else {
            u16::try_from(start + l4_header).unwrap()
        },
    };
    (f, info)
}

fn mss(ip: Ip) -> u16 {
    match ip {
        Ip::V4 => MSS4,
        Ip::V6 => MSS6,
    }
}

fn tso_kind(ip: Ip) -> GsoKind {
    match ip {
        Ip::V4 => GsoKind::TcpV4,
        Ip::V6 => GsoKind::TcpV6,
    }
}

/// A TCP super-frame of `PAYLOAD` bytes at the MSS of a 1500-byte MTU.
pub(super) fn tcp_superframe(ip: Ip) -> (Vec<u8>, OffloadInfo) {
    offloaded(ip, L4::Tcp, PAYLOAD, tso_kind(ip), mss(ip))
}

/// `frame` with an 802.1Q tag for `vid` after the MAC addresses.
fn with_tag(frame: &[u8], vid: u16) -> Vec<u8> {
    let mut f = frame.to_vec();
    let [a, b] = vid.to_be_bytes();
    f.splice(12..12, [0x81, 0x00, a, b]);
    f
}

/// `info` for `frame` with `tags` more tag bytes in front of its L3 header.
fn shifted(info: OffloadInfo, by: u16) -> OffloadInfo {
    OffloadInfo {
        csum_start: info.csum_start + by,
        hdr_len: if info.hdr_len == 0 {
            0
        } else {
            info.hdr_len + by
        },
        ..info
    }
}

// ---- Checking frames with etherparse. ----

/// What a delivered frame carries, read by etherparse after checking it.
#[derive(Debug)]
struct Parsed {
    vlans: Vec<u16>,
    ipv4_ident: Option<u16>,
    tcp: Option<TcpHeader>,
    payload: Vec<u8>,
}

/// Parses `frame` with etherparse and checks its IP lengths and IPv4 header checksum, and
/// its TCP/UDP length and checksum when `check_l4` (a super-frame as sent holds only the
/// pseudo-header sum).
fn parse(frame: &[u8], check_l4: bool) -> Parsed {
    let sliced = SlicedPacket::from_ethernet(frame).unwrap();
    let vlans = match &sliced.vlan {
        None => vec![],
        Some(VlanSlice::SingleVlan(s)) => vec![s.vlan_identifier().value()],
        Some(VlanSlice::DoubleVlan(d)) => vec![
            d.outer().vlan_identifier().value(),
            d.inner().vlan_identifier().value(),
        ],
    };
    let l3 = 14 + 4 * vlans.len();
    let net = sliced.net.as_ref().unwrap();
    let ipv4_ident = match net {
        NetSlice::Ipv4(v4) => {
            let h = v4.header().to_header();
            assert_eq!(h.header_checksum, h.calc_header_checksum(), "IPv4 checksum");
            assert_eq!(usize::from(h.total_len), frame.len() - l3, "IPv4 length");
            Some(h.identification)
        }
        NetSlice::Ipv6(v6) => {
            let len = 40 + usize::from(v6.header().payload_length());
            assert_eq!(len, frame.len() - l3, "IPv6 payload length");
            None
        }
    };
    match sliced.transport.unwrap() {
        TransportSlice::Tcp(tcp) => {
            if check_l4 {
                let expected = match net {
                    NetSlice::Ipv4(v4) => {
                        tcp.calc_checksum_ipv4(v4.header().source(), v4.header().destination())
                    }
                    NetSlice::Ipv6(v6) => {
                        tcp.calc_checksum_ipv6(v6.header().source(), v6.header().destination())
                    }
                };
                assert_eq!(tcp.checksum(), expected.unwrap(), "TCP checksum");
            }
            Parsed {
                vlans,
                ipv4_ident,
                tcp: Some(tcp.to_header()),
                payload: tcp.payload().to_vec(),
            }
        }
        TransportSlice::Udp(udp) => {
            assert_eq!(usize::from(udp.length()), udp.slice().len(), "UDP length");
            if check_l4 {
                let h = udp.to_header();
                let expected = match net {
                    NetSlice::Ipv4(v4) => h.calc_checksum_ipv4_raw(
                        v4.header().source(),
                        v4.header().destination(),
                        udp.payload(),
                    ),
                    NetSlice::Ipv6(v6) => h.calc_checksum_ipv6_raw(
                        v6.header().source(),
                        v6.header().destination(),
                        udp.payload(),
                    ),
                };
                assert_eq!(udp.checksum(), expected.unwrap(), "UDP checksum");
            }
            Parsed {
                vlans,
                ipv4_ident,
                tcp: None,
                payload: udp.payload().to_vec(),
            }
        }
        other => panic!("unexpected transport {other:?}"),
    }
}

/// Checks the segments a destination received for `original` (a super-frame cut into
/// `segment_payload`-byte pieces): each one a valid frame on its own with the tags `vlans`,
/// no longer than `max_len`, without offload work left; IPv4 identifications counting up,
/// TCP sequence numbers contiguous, FIN and PSH on the last segment only; the payloads put
/// back together are the original's.
pub(super) fn check_segments(
    original: &[u8],
    segments: &[(Vec<u8>, OffloadInfo)],
    segment_payload: usize,
    max_len: usize,
    vlans: &[u16],
) {
    let orig = parse(original, false);
    let last = segments.len() - 1;
    let mut reassembled = Vec::new();
    for (i, (seg, info)) in segments.iter().enumerate() {
        assert!(seg.len() <= max_len, "segment {i}: {} bytes", seg.len());
        assert_eq!(*info, OffloadInfo::default(), "segment {i} offload state");
        assert_eq!(seg[..12], original[..12], "segment {i} MAC addresses");
        let p = parse(seg, true);
        assert_eq!(p.vlans, vlans, "segment {i} tags");
        if i == last {
            assert!(!p.payload.is_empty() && p.payload.len() <= segment_payload);
        } else {
            assert_eq!(p.payload.len(), segment_payload, "segment {i} payload");
        }
        if let Some(ident) = orig.ipv4_ident {
            let expected = ident.wrapping_add(u16::try_from(i).unwrap());
            assert_eq!(p.ipv4_ident, Some(expected), "segment {i} IPv4 id");
        }
        if let (Some(o), Some(t)) = (&orig.tcp, &p.tcp) {
            let advance = u32::try_from(reassembled.len()).unwrap();
            assert_eq!(t.sequence_number, o.sequence_number.wrapping_add(advance));
            assert_eq!(t.fin, o.fin && i == last, "FIN on segment {i}");
            assert_eq!(t.psh, o.psh && i == last, "PSH on segment {i}");
            assert_eq!(t.acknowledgment_number, o.acknowledgment_number);
        }
        reassembled.extend_from_slice(&p.payload);
    }
    assert_eq!(reassembled, orig.payload, "reassembled payload");
}

// ---- A switch with in-memory ports. ----

struct Rig {
    sw: Switch,
    ports: Vec<(PortId, MemoryPortHandle)>,
}

impl Rig {
    fn new(ports: &[(PortCaps, PortOptions)]) -> Rig {
        let mut sw = Switch::new("br0", SwitchConfig::default()).unwrap();
        let ports = ports
            .iter()
            .enumerate()
            .map(|(i, (caps, options))| {
                let (rx, tx, h) = memory_port(*caps, 1024);
                let id = sw
                    .add_port(
                        &format!("p{i}"),
                        Some(Box::new(rx)),
                        Box::new(tx),
                        options.clone(),
                    )
                    .unwrap();
                (id, h)
            })
            .collect();
        Rig { sw, ports }
    }

    /// Two plain ports: p0 sends, p1 (with `caps`) receives.
    fn pair(caps: PortCaps) -> Rig {
        Rig::new(&[
            (PortCaps::plain(1500), PortOptions::default()),
            (caps, PortOptions::default()),
        ])
    }

    /// Injects `frames` on `port` and polls until the switch has received them all, in as
    /// few batches as the batch size allows.
    fn send(&mut self, port: usize, frames: &[(Vec<u8>, OffloadInfo)]) {
        for (f, o) in frames {
            assert!(self.ports[port].1.inject_with(f, *o));
        }
        while self.sw.poll(self.ports[port].0, T0) > 0 {}
    }

    fn sent(&self, port: usize) -> Vec<(Vec<u8>, OffloadInfo)> {
        self.ports[port].1.take_sent()
    }

    fn counters(&self, port: usize) -> PortCountersSnapshot {
        self.sw
            .port_counters(self.ports[port].0)
            .unwrap()
            .snapshot()
    }
}

fn access(vid: u16) -> PortOptions {
    PortOptions {
        vlan: PortVlanMode::access(vid).unwrap(),
        ..PortOptions::default()
    }
}

fn trunk(vid: u16) -> PortOptions {
    PortOptions {
        vlan: PortVlanMode::trunk([vid], None).unwrap(),
        ..PortOptions::default()
    }
}

// ---- Super-frames. ----

#[test]
fn tcp4_superframe_to_a_port_without_tso_arrives_as_valid_mss_segments() {
    let mut r = Rig::pair(PortCaps::plain(1500));
    let (frame, info) = tcp_superframe(Ip::V4);
    r.send(0, &[(frame.clone(), info)]);
    let segments = r.sent(1);
    assert_eq!(segments.len(), PAYLOAD.div_ceil(usize::from(MSS4)));
    assert_eq!(segments.len(), 14);
    check_segments(&frame, &segments, usize::from(MSS4), MAX_UNTAGGED_1500, &[]);
    // Counters count frames on the wire: one in, fourteen out.
    let (c0, c1) = (r.counters(0), r.counters(1));
    assert_eq!(c0.rx_packets, 1);
    assert_eq!(c1.tx_packets, 14);
    let bytes: usize = segments.iter().map(|(s, _)| s.len()).sum();
    assert_eq!(c1.tx_bytes, bytes as u64);
    assert_eq!(c0.total_drops() + c1.total_drops(), 0);
}

#[test]
fn tcp4_superframe_to_a_tso_port_arrives_whole_with_its_offload_info() {
    let mut r = Rig::pair(PortCaps::full_offload(1500));
    let (frame, info) = tcp_superframe(Ip::V4);
    r.send(0, &[(frame.clone(), info)]);
    assert_eq!(r.sent(1), vec![(frame, info)]);
    assert_eq!(r.counters(1).tx_packets, 1);
}

#[test]
fn tcp6_superframe_to_a_port_without_tso_arrives_as_valid_mss_segments() {
    let mut r = Rig::pair(PortCaps::plain(1500));
    let (frame, info) = tcp_superframe(Ip::V6);
    r.send(0, &[(frame.clone(), info)]);
    let segments = r.sent(1);
    assert_eq!(segments.len(), 14);
    check_segments(&frame, &segments, usize::from(MSS6), MAX_UNTAGGED_1500, &[]);
}

#[test]
fn tcp6_superframe_to_a_port_with_tso4_only_is_segmented() {
    let caps = PortCaps {
        tso6: false,
        uso: false,
        ..PortCaps::full_offload(1500)
    };
    let mut r = Rig::pair(caps);
    let (frame, info) = tcp_superframe(Ip::V6);
    r.send(0, &[(frame.clone(), info)]);
    let segments = r.sent(1);
    assert_eq!(segments.len(), 14);
    check_segments(&frame, &segments, usize::from(MSS6), MAX_UNTAGGED_1500, &[]);
}

#[test]
fn udp_superframes_to_a_port_without_uso_arrive_as_valid_datagrams() {
    for (ip, size) in [(Ip::V4, 1472u16), (Ip::V6, 1452)] {
        let mut r = Rig::pair(PortCaps::plain(1500));
        let (frame, info) = offloaded(ip, L4::Udp, PAYLOAD, GsoKind::UdpL4, size);
        r.send(0, &[(frame.clone(), info)]);
        let datagrams = r.sent(1);
        assert_eq!(
            datagrams.len(),
            PAYLOAD.div_ceil(usize::from(size)),
            "{ip:?}"
        );
        check_segments(
            &frame,
            &datagrams,
            usize::from(size),
            MAX_UNTAGGED_1500,
            &[],
        );
    }
}

#[test]
fn udp_superframe_to_a_uso_port_arrives_whole() {
    let mut r = Rig::pair(PortCaps::full_offload(1500));
    let (frame, info) = offloaded(Ip::V6, L4::Udp, PAYLOAD, GsoKind::UdpL4, 1452);
    r.send(0, &[(frame.clone(), info)]);
    assert_eq!(r.sent(1), vec![(frame, info)]);
}

#[test]
fn udp_superframes_whose_datagrams_exceed_the_mtu_are_dropped_as_too_big_not_cut() {
    // 1473-byte datagrams are 1501-byte IPv4 packets: one byte over a 1500 MTU, whether the
    // port would segment (plain) or take the super-frame whole (USO).
    for caps in [PortCaps::plain(1500), PortCaps::full_offload(1500)] {
        let mut r = Rig::pair(caps);
        let (frame, info) = offloaded(Ip::V4, L4::Udp, PAYLOAD, GsoKind::UdpL4, 1473);
        r.send(0, &[(frame, info)]);
        assert!(r.sent(1).is_empty(), "no datagram is cut to fit");
        let c = r.counters(1);
        assert_eq!((c.drops(DropReason::FrameTooBig), c.tx_packets), (1, 0));
        // 1472 bytes fit.
        let (frame, info) = offloaded(Ip::V4, L4::Udp, PAYLOAD, GsoKind::UdpL4, 1472);
        r.send(0, &[(frame, info)]);
        assert!(!r.sent(1).is_empty());
    }
}

#[test]
fn one_superframe_is_segmented_for_one_port_and_passed_whole_to_another() {
    let mut r = Rig::new(&[
        (PortCaps::plain(1500), PortOptions::default()),
        (PortCaps::plain(1500), PortOptions::default()),
        (PortCaps::full_offload(1500), PortOptions::default()),
    ]);
    let (frame, info) = tcp_superframe(Ip::V4);
    r.send(0, &[(frame.clone(), info)]);
    check_segments(
        &frame,
        &r.sent(1),
        usize::from(MSS4),
        MAX_UNTAGGED_1500,
        &[],
    );
    assert_eq!(r.sent(2), vec![(frame, info)]);
}

// ---- VLAN rewrites move the offload offsets. ----

#[test]
fn vlan_push_on_the_way_to_a_tso_trunk_shifts_offsets_by_four() {
    let mut r = Rig::new(&[
        (PortCaps::plain(1500), access(10)),
        (PortCaps::full_offload(1500), trunk(10)),
    ]);
    let (frame, info) = tcp_superframe(Ip::V4);
    r.send(0, &[(frame.clone(), info)]);
    let out = r.sent(1);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, with_tag(&frame, 10));
    assert_eq!(out[0].1.csum_start, 38);
    assert_eq!(out[0].1.hdr_len, 58);
    assert_eq!(out[0].1, shifted(info, 4));
}

#[test]
fn vlan_push_on_the_way_then_segmentation_yields_valid_tagged_segments() {
    let mut r = Rig::new(&[
        (PortCaps::plain(1500), access(10)),
        (PortCaps::plain(1500), trunk(10)),
    ]);
    let (frame, info) = tcp_superframe(Ip::V4);
    r.send(0, &[(frame.clone(), info)]);
    let segments = r.sent(1);
    assert_eq!(segments.len(), 14);
    check_segments(
        &frame,
        &segments,
        usize::from(MSS4),
        MAX_UNTAGGED_1500 + 4,
        &[10],
    );
}

#[test]
fn vlan_pop_on_the_way_shifts_offsets_back() {
    let mut r = Rig::new(&[
        (PortCaps::plain(1500), trunk(10)),
        (PortCaps::full_offload(1500), access(10)),
        (PortCaps::plain(1500), access(10)),
    ]);
    let (frame, info) = tcp_superframe(Ip::V6);
    r.send(0, &[(with_tag(&frame, 10), shifted(info, 4))]);
    assert_eq!(r.sent(1), vec![(frame.clone(), info)]);
    check_segments(
        &frame,
        &r.sent(2),
        usize::from(MSS6),
        MAX_UNTAGGED_1500,
        &[],
    );
}

#[test]
fn push_vlan_rule_on_a_tagged_superframe_shifts_offsets_for_both_tags() {
    let mut r = Rig::new(&[
        (PortCaps::plain(1500), PortOptions::default()),
        (PortCaps::full_offload(1500), PortOptions::default()),
        (PortCaps::plain(1500), PortOptions::default()),
    ]);
    let out_to = |p: usize| Action::Output(r.ports[p].0);
    let actions = [Action::PushVlan(20), out_to(1), out_to(2)];
    r.sw.add_rule(FlowRule::new(
        1,
        FlowMatch::ANY,
        ActionList::from_slice(&actions).unwrap(),
    ))
    .unwrap();
    let (frame, info) = tcp_superframe(Ip::V4);
    let tagged = with_tag(&frame, 10);
    r.send(0, &[(tagged.clone(), shifted(info, 4))]);
    // Outer tag 20 (the pushed VLAN), inner tag 10 (the frame's own).
    let qinq = with_tag(&tagged, 20);
    let whole = r.sent(1);
    assert_eq!(whole, vec![(qinq.clone(), shifted(info, 8))]);
    check_segments(
        &qinq,
        &r.sent(2),
        usize::from(MSS4),
        MAX_UNTAGGED_1500 + 8,
        &[20, 10],
    );
}

// ---- Partial checksums. ----

#[test]
fn partial_checksum_is_completed_for_a_port_without_partial_csum() {
    for (ip, l4) in [
        (Ip::V4, L4::Tcp),
        (Ip::V6, L4::Tcp),
        (Ip::V4, L4::Udp),
        (Ip::V6, L4::Udp),
    ] {
        let mut r = Rig::pair(PortCaps::plain(1500));
        let (frame, info) = offloaded(ip, l4, 700, GsoKind::None, 0);
        r.send(0, &[(frame, info)]);
        let out = r.sent(1);
        assert_eq!(out.len(), 1, "{ip:?} {l4:?}");
        assert_eq!(out[0].1, OffloadInfo::default(), "nothing left to do");
        parse(&out[0].0, true);
        // The checksum a sender without offloads would have computed.
        assert_eq!(out[0].0, packet(ip, l4, 700), "{ip:?} {l4:?}");
    }
}

#[test]
fn partial_checksum_is_left_to_a_port_that_takes_it() {
    for (ip, l4) in [(Ip::V4, L4::Tcp), (Ip::V6, L4::Udp)] {
        let mut r = Rig::pair(PortCaps::full_offload(1500));
        let (frame, info) = offloaded(ip, l4, 700, GsoKind::None, 0);
        r.send(0, &[(frame.clone(), info)]);
        let out = r.sent(1);
        assert_eq!(out, vec![(frame, info)], "{ip:?} {l4:?}");
        assert!(out[0].1.needs_csum);
    }
}

#[test]
fn partial_checksum_is_completed_after_a_vlan_push() {
    let mut r = Rig::new(&[
        (PortCaps::plain(1500), access(10)),
        (PortCaps::plain(1500), trunk(10)),
    ]);
    let (frame, info) = offloaded(Ip::V4, L4::Tcp, 700, GsoKind::None, 0);
    r.send(0, &[(frame, info)]);
    let out = r.sent(1);
    assert_eq!(out.len(), 1);
    assert_eq!(parse(&out[0].0, true).vlans, vec![10]);
    assert_eq!(out[0].0, with_tag(&packet(Ip::V4, L4::Tcp, 700), 10));
}

// ---- Hostile offload metadata. ----

/// An ordinary frame (no offload work) that must get through whatever the frames around
/// it carry; `i` sets its length, to tell them apart.
fn good_frame(i: usize) -> (Vec<u8>, OffloadInfo) {
    (packet(Ip::V4, L4::Udp, 64 + i), OffloadInfo::default())
}

/// `hostile` frames, each followed by a good one, after a good one.
fn interleaved(hostile: &[(Vec<u8>, OffloadInfo)]) -> Vec<(Vec<u8>, OffloadInfo)> {
    let mut batch = vec![good_frame(0)];
    for (i, h) in hostile.iter().enumerate() {
        batch.push(h.clone());
        batch.push(good_frame(i + 1));
    }
    batch
}

fn good_frames(n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| good_frame(i).0).collect()
}

#[test]
fn csum_start_before_the_l3_header_is_dropped_at_ingress() {
    let mut r = Rig::new(&[
        (PortCaps::plain(1500), PortOptions::default()),
        (PortCaps::plain(1500), PortOptions::default()),
        (PortCaps::full_offload(1500), PortOptions::default()),
    ]);
    let (frame, info) = offloaded(Ip::V4, L4::Tcp, 700, GsoKind::None, 0);
    let (superframe, gso_info) = tcp_superframe(Ip::V4);
    let tagged = with_tag(&frame, 10);
    let hostile = [
        // Into the MAC addresses, the EtherType, one byte short of the IP header.
        (
            frame.clone(),
            OffloadInfo {
                csum_start: 6,
                ..info
            },
        ),
        (
            frame.clone(),
            OffloadInfo {
                csum_start: 12,
                ..info
            },
        ),
        (
            frame.clone(),
            OffloadInfo {
                csum_start: 13,
                ..info
            },
        ),
        // Into the VLAN tag of a tagged frame.
        (
            tagged,
            OffloadInfo {
                csum_start: 16,
                ..info
            },
        ),
        // A super-frame whose checksum would start at 0.
        (
            superframe,
            OffloadInfo {
                csum_start: 0,
                ..gso_info
            },
        ),
    ];
    r.send(0, &interleaved(&hostile));
    assert_eq!(
        r.counters(0).drops(DropReason::BadOffload),
        hostile.len() as u64
    );
    assert_eq!(r.counters(0).total_drops(), hostile.len() as u64);
    let goods = good_frames(hostile.len() + 1);
    let plain: Vec<Vec<u8>> = r.sent(1).into_iter().map(|(f, _)| f).collect();
    assert_eq!(plain, goods, "the good frames, in order, nothing else");
    let offload: Vec<Vec<u8>> = r.sent(2).into_iter().map(|(f, _)| f).collect();
    assert_eq!(
        offload.len(),
        goods.len(),
        "nothing hostile reaches a TSO port"
    );
    for p in 1..3 {
        assert_eq!(r.counters(p).total_drops(), 0);
    }
}

/// Offload metadata that passes the ingress check but that segmentation or checksum
/// completion refuses.
fn inconsistent_metadata() -> Vec<(Vec<u8>, OffloadInfo)> {
    let (frame, info) = offloaded(Ip::V4, L4::Tcp, 700, GsoKind::None, 0);
    let (superframe, gso_info) = tcp_superframe(Ip::V4);
    let (udp_superframe, _) = offloaded(Ip::V4, L4::Udp, PAYLOAD, GsoKind::UdpL4, 1472);
    let len = u16::try_from(frame.len()).unwrap();
    vec![
        // Checksum start past the end of the frame.
        (
            frame.clone(),
            OffloadInfo {
                csum_start: len + 10,
                ..info
            },
        ),
        // Checksum field straddling the end of the frame.
        (
            frame,
            OffloadInfo {
                csum_offset: len - info.csum_start - 1,
                ..info
            },
        ),
        // Segments of zero bytes.
        (
            superframe.clone(),
            OffloadInfo {
                gso_size: 0,
                ..gso_info
            },
        ),
        // TCP/IPv6 segmentation of a TCP/IPv4 frame.
        (
            superframe,
            OffloadInfo {
                gso: GsoKind::TcpV6,
                ..gso_info
            },
        ),
        // TCP segmentation of a UDP frame.
        (
            udp_superframe,
            OffloadInfo {
                gso: GsoKind::TcpV4,
                ..gso_info
            },
        ),
    ]
}

#[test]
fn inconsistent_offload_metadata_is_dropped_once_at_ingress_or_at_the_egress_that_needs_it() {
    // What the L2 header and the frame length can refute (offsets outside the frame, zero
    // segment size, a GSO kind for the other IP version) is dropped at ingress, whatever the
    // destination; what only segmentation finds out (TCP segmentation of a UDP frame) is
    // dropped by the one egress port that needed it. Either way exactly once, whether the
    // destination is known (unicast) or not (flooded).
    for learned in [true, false] {
        let mut r = Rig::pair(PortCaps::plain(1500));
        if learned {
            let mut hello = packet(Ip::V4, L4::Udp, 10);
            hello[..6].copy_from_slice(&SRC_MAC);
            hello[6..12].copy_from_slice(&DST_MAC);
            r.send(1, &[(hello, OffloadInfo::default())]);
            assert_eq!(r.sent(0).len(), 1);
        }
        let hostile = inconsistent_metadata();
        r.send(0, &interleaved(&hostile));
        let n = hostile.len() as u64;
        let (c0, c1) = (r.counters(0), r.counters(1));
        assert_eq!(
            c0.drops(DropReason::BadOffload),
            n - 1,
            "learned: {learned}"
        );
        assert_eq!(c1.drops(DropReason::BadOffload), 1, "learned: {learned}");
        assert_eq!(c0.total_drops() + c1.total_drops(), n, "learned: {learned}");
        let out: Vec<Vec<u8>> = r.sent(1).into_iter().map(|(f, _)| f).collect();
        assert_eq!(
            out,
            good_frames(hostile.len() + 1),
            "the good frames, in order, nothing else"
        );
    }
}

#[test]
fn metadata_refuted_by_the_frame_never_reaches_an_offload_capable_port() {
    let mut r = Rig::pair(PortCaps::full_offload(1500));
    let hostile = inconsistent_metadata();
    r.send(0, &interleaved(&hostile));
    let n = hostile.len() as u64;
    assert_eq!(r.counters(0).drops(DropReason::BadOffload), n - 1);
    // The UDP frame that claims TCP segmentation passes L2 checks; a port that segments
    // itself (a guest's or the kernel's stack) validates the L4 header as it does.
    assert_eq!(r.sent(1).len(), hostile.len() + 1 + 1);
}

#[test]
fn offsets_outside_the_frame_are_dropped_at_ingress_before_any_tag_shift() {
    let mut r = Rig::new(&[
        (PortCaps::plain(1500), access(10)),
        (PortCaps::full_offload(1500), trunk(10)),
    ]);
    let (frame, info) = offloaded(Ip::V4, L4::Tcp, 700, GsoKind::None, 0);
    r.send(
        0,
        &[
            (
                frame,
                OffloadInfo {
                    csum_start: u16::MAX - 1,
                    ..info
                },
            ),
            good_frame(1),
        ],
    );
    assert_eq!(r.counters(0).drops(DropReason::BadOffload), 1);
    assert_eq!(r.counters(1).total_drops(), 0);
    let out = r.sent(1);
    assert_eq!(out.len(), 1, "the good frame still goes");
}

// ---- Frame sizes. ----

#[test]
fn jumbo_frame_passes_between_9000_mtu_ports_and_is_too_big_for_a_1500_port() {
    let mut r = Rig::new(&[
        (PortCaps::plain(9000), PortOptions::default()),
        (PortCaps::plain(9000), PortOptions::default()),
        (PortCaps::plain(1500), PortOptions::default()),
    ]);
    let jumbo = packet(Ip::V4, L4::Udp, 9014 - 14 - 20 - 8);
    assert_eq!(jumbo.len(), 9014);
    r.send(0, &[(jumbo.clone(), OffloadInfo::default())]);
    assert_eq!(r.sent(1), vec![(jumbo, OffloadInfo::default())]);
    assert!(r.sent(2).is_empty());
    assert_eq!(r.counters(2).drops(DropReason::FrameTooBig), 1);
    assert_eq!(r.counters(2).total_drops(), 1);
    assert_eq!(r.counters(0).total_drops() + r.counters(1).total_drops(), 0);
}

#[test]
fn segments_for_a_1500_mtu_port_never_exceed_its_mtu() {
    // Senders with a larger MTU (or a wrong MSS) ask for segments the port cannot carry:
    // the port's MTU decides, and an untagged segment carries at most 1500 IP bytes.
    for (ip, gso_size) in [(Ip::V4, 8948), (Ip::V6, 8928), (Ip::V6, MSS4)] {
        let mut r = Rig::pair(PortCaps::plain(1500));
        let (frame, info) = offloaded(ip, L4::Tcp, PAYLOAD, tso_kind(ip), gso_size);
        r.send(0, &[(frame.clone(), info)]);
        let segments = r.sent(1);
        // An MTU of IP packet: 1500 minus the IP and TCP headers (no TCP options here).
        let room = match ip {
            Ip::V4 => 1500 - 20 - 20,
            Ip::V6 => 1500 - 40 - 20,
        };
        assert_eq!(segments.len(), PAYLOAD.div_ceil(room), "{ip:?} {gso_size}");
        check_segments(&frame, &segments, room, MAX_UNTAGGED_1500, &[]);
    }
}
