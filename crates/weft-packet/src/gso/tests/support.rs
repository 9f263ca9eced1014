//! Builds super-frames with etherparse, as a virtio sender would hand them over, and checks
//! segments independently with etherparse.

use etherparse::{
    NetSlice, PacketBuilder, PacketBuilderStep, SlicedPacket, TcpHeader, TcpOptionElement,
    TransportSlice, UdpHeader, VlanId,
};

use crate::checksum;
use crate::offload::{GsoKind, OffloadInfo};

pub(super) const MAC_SRC: [u8; 6] = [0x52, 0x54, 0, 0, 0, 1];
pub(super) const MAC_DST: [u8; 6] = [0x52, 0x54, 0, 0, 0, 2];
pub(super) const IP4_SRC: [u8; 4] = [192, 168, 7, 1];
pub(super) const IP4_DST: [u8; 4] = [192, 168, 7, 2];
pub(super) const IP6_SRC: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
pub(super) const IP6_DST: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
pub(super) const SEQ: u32 = 0xffff_f000;
pub(super) const IDENT: u16 = 0xfffe;

/// How a test frame is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ip {
    V4,
    V6,
}

/// How many VLAN tags a test frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tags {
    None,
    One,
    Two,
}

/// Deterministic payload bytes.
pub(super) fn payload(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| u8::try_from((i * 7 + i / 251) % 256).unwrap())
        .collect()
}

fn ip_step(ip: Ip, tags: Tags) -> PacketBuilderStep<etherparse::IpHeaders> {
    let eth = PacketBuilder::ethernet2(MAC_SRC, MAC_DST);
    let vid = |v| VlanId::try_new(v).unwrap();
    let mut v4 =
        etherparse::Ipv4Header::new(0, 64, etherparse::IpNumber::TCP, IP4_SRC, IP4_DST).unwrap();
    v4.identification = IDENT;
    v4.dont_fragment = true;
    let header = match ip {
        Ip::V4 => etherparse::IpHeaders::Ipv4(v4, Default::default()),
        Ip::V6 => etherparse::IpHeaders::Ipv6(
            etherparse::Ipv6Header {
                traffic_class: 0,
                flow_label: Default::default(),
                payload_length: 0,
                next_header: etherparse::IpNumber::TCP,
                hop_limit: 64,
                source: IP6_SRC,
                destination: IP6_DST,
            },
            Default::default(),
        ),
    };
    match tags {
        Tags::None => eth.ip(header),
        Tags::One => eth.single_vlan(vid(100)).ip(header),
        Tags::Two => eth.double_vlan(vid(10), vid(20)).ip(header),
    }
}

/// Offset of the IP header for `tags`.
pub(super) fn l3_offset(tags: Tags) -> usize {
    match tags {
        Tags::None => 14,
        Tags::One => 18,
        Tags::Two => 22,
    }
}

/// A TCP super-frame (ACK, PSH, FIN, CWR, ECE, timestamp option) as a virtio sender hands it
/// over: TCP checksum field holding the pseudo-header sum. Returns the frame and its info.
pub(super) fn tcp_superframe(ip: Ip, tags: Tags, len: usize, mss: u16) -> (Vec<u8>, OffloadInfo) {
    let mut frame = Vec::new();
    ip_step(ip, tags)
        .tcp(40000, 5201, SEQ, 1024)
        .ack(77)
        .psh()
        .fin()
        .cwr()
        .ece()
        .options(&[
            TcpOptionElement::Noop,
            TcpOptionElement::Noop,
            TcpOptionElement::Timestamp(1, 2),
        ])
        .unwrap()
        .write(&mut frame, &payload(len))
        .unwrap();
    let l4 = l3_offset(tags) + if ip == Ip::V4 { 20 } else { 40 };
    let gso = if ip == Ip::V4 {
        GsoKind::TcpV4
    } else {
        GsoKind::TcpV6
    };
    let info = virtio_info(&mut frame, ip, tags, l4, 16, gso, mss);
    (frame, info)
}

/// A UDP super-frame as a virtio sender hands it over (checksum field = pseudo-header sum).
pub(super) fn udp_superframe(ip: Ip, tags: Tags, len: usize, size: u16) -> (Vec<u8>, OffloadInfo) {
    let mut frame = Vec::new();
    ip_step(ip, tags)
        .udp(4000, 4789)
        .write(&mut frame, &payload(len))
        .unwrap();
    let l4 = l3_offset(tags) + if ip == Ip::V4 { 20 } else { 40 };
    let info = virtio_info(&mut frame, ip, tags, l4, 6, GsoKind::UdpL4, size);
    (frame, info)
}

/// Replaces the complete L4 checksum at `l4 + csum_offset` with the pseudo-header sum and
/// describes the frame the way virtio would.
fn virtio_info(
    frame: &mut [u8],
    ip: Ip,
    tags: Tags,
    l4: usize,
    csum_offset: u16,
    gso: GsoKind,
    gso_size: u16,
) -> OffloadInfo {
    let l3 = l3_offset(tags);
    let protocol = frame[if ip == Ip::V4 { l3 + 9 } else { l3 + 6 }];
    let l4_len = frame.len() - l4;
    let pseudo = match ip {
        Ip::V4 => checksum::pseudo_header_v4(
            IP4_SRC.into(),
            IP4_DST.into(),
            protocol,
            u16::try_from(l4_len).unwrap(),
        ),
        Ip::V6 => checksum::pseudo_header_v6(
            IP6_SRC.into(),
            IP6_DST.into(),
            protocol,
            u32::try_from(l4_len).unwrap(),
        ),
    };
    let field = l4 + usize::from(csum_offset);
    frame[field..field + 2].copy_from_slice(&pseudo.to_be_bytes());
    let hdr_len = l4 + if csum_offset == 16 { 32 } else { 8 };
    OffloadInfo {
        needs_csum: true,
        data_valid: false,
        csum_start: u16::try_from(l4).unwrap(),
        csum_offset,
        gso,
        gso_size,
        hdr_len: u16::try_from(hdr_len).unwrap(),
    }
}

/// Inserts an 8-byte Destination Options header (PadN) right after the fixed IPv6 header.
pub(super) fn insert_ipv6_dest_options(frame: &mut Vec<u8>, info: &mut OffloadInfo, l3: usize) {
    let next = frame[l3 + 6];
    frame.splice(l3 + 40..l3 + 40, [next, 0, 1, 4, 0, 0, 0, 0]);
    frame[l3 + 6] = 60;
    let len = u16::from_be_bytes([frame[l3 + 4], frame[l3 + 5]]) + 8;
    frame[l3 + 4..l3 + 6].copy_from_slice(&len.to_be_bytes());
    info.csum_start += 8;
    info.hdr_len += 8;
}

/// Runs the segmenter to the end with a 64 KiB output buffer.
pub(super) fn segment_all(frame: &[u8], info: &OffloadInfo, max_frame_len: usize) -> Vec<Vec<u8>> {
    let mut segmenter = super::Segmenter::new(frame, info, max_frame_len).unwrap();
    let count = segmenter.segment_count();
    let mut out = vec![0u8; 65_536];
    let mut segments = Vec::new();
    while let Some(result) = segmenter.next_segment(&mut out) {
        let len = result.unwrap();
        assert!(len <= segmenter.max_segment_len());
        segments.push(out[..len].to_vec());
    }
    assert_eq!(segments.len(), count);
    segments
}

/// The fields of a TCP/UDP frame that segments are compared against.
struct Parsed<'a> {
    l3_header_len: usize,
    ipv4_ident: Option<u16>,
    tcp: Option<TcpHeader>,
    payload: &'a [u8],
}

/// Parses `frame` with etherparse and checks its IP header checksum/lengths and L4 checksum.
fn parse_and_check(frame: &[u8], check_l4_checksum: bool) -> Parsed<'_> {
    let sliced = SlicedPacket::from_ethernet(frame).unwrap();
    let net = sliced.net.unwrap();
    let (addrs, ip_len, l3_header_len, ipv4_ident) = match &net {
        NetSlice::Ipv4(v4) => {
            let header = v4.header().to_header();
            assert_eq!(header.header_checksum, header.calc_header_checksum());
            let ip_len = usize::from(header.total_len);
            let addrs = (header.source.to_vec(), header.destination.to_vec());
            (
                addrs,
                ip_len,
                v4.header().slice().len(),
                Some(header.identification),
            )
        }
        NetSlice::Ipv6(v6) => {
            let header = v6.header();
            let ip_len = 40 + usize::from(header.payload_length());
            let ext_len = v6.extensions().slice().len();
            let addrs = (header.source().to_vec(), header.destination().to_vec());
            (addrs, ip_len, 40 + ext_len, None)
        }
    };
    assert!(frame.len() >= ip_len);
    let v4 = |a: &[u8]| <[u8; 4]>::try_from(a).unwrap();
    let v6 = |a: &[u8]| <[u8; 16]>::try_from(a).unwrap();
    match sliced.transport.unwrap() {
        TransportSlice::Tcp(tcp) => {
            if check_l4_checksum {
                let expected = match &net {
                    NetSlice::Ipv4(_) => tcp.calc_checksum_ipv4(v4(&addrs.0), v4(&addrs.1)),
                    NetSlice::Ipv6(_) => tcp.calc_checksum_ipv6(v6(&addrs.0), v6(&addrs.1)),
                };
                assert_eq!(tcp.checksum(), expected.unwrap(), "TCP checksum");
            }
            Parsed {
                l3_header_len,
                ipv4_ident,
                tcp: Some(tcp.to_header()),
                payload: tcp.payload(),
            }
        }
        TransportSlice::Udp(udp) => {
            assert_eq!(usize::from(udp.length()), udp.slice().len());
            if check_l4_checksum {
                let header: UdpHeader = udp.to_header();
                let expected = match &net {
                    NetSlice::Ipv4(_) => {
                        header.calc_checksum_ipv4_raw(v4(&addrs.0), v4(&addrs.1), udp.payload())
                    }
                    NetSlice::Ipv6(_) => {
                        header.calc_checksum_ipv6_raw(v6(&addrs.0), v6(&addrs.1), udp.payload())
                    }
                };
                assert_eq!(udp.checksum(), expected.unwrap(), "UDP checksum");
            }
            Parsed {
                l3_header_len,
                ipv4_ident,
                tcp: None,
                payload: udp.payload(),
            }
        }
        other => panic!("unexpected transport {other:?}"),
    }
}

/// Checks every segment of `original` independently with etherparse: lengths, IP header
/// checksum and identification, TCP sequence numbers and flags, L4 checksums, size limits, and
/// that the payloads put back together are the original payload.
pub(super) fn validate_segments(
    original: &[u8],
    segments: &[Vec<u8>],
    segment_payload: usize,
    max_frame_len: usize,
) {
    let orig = parse_and_check(original, false);
    let l3 = l3_offset_of(original);
    let mut reassembled = Vec::new();
    let last = segments.len() - 1;
    for (i, seg) in segments.iter().enumerate() {
        assert!(seg.len() <= max_frame_len, "segment {i} too long");
        assert_eq!(seg[..l3], original[..l3], "L2 header of segment {i}");
        let p = parse_and_check(seg, true);
        assert_eq!(p.l3_header_len, orig.l3_header_len);
        if i != last {
            assert_eq!(p.payload.len(), segment_payload, "segment {i} payload");
        } else {
            assert!(!p.payload.is_empty() && p.payload.len() <= segment_payload);
        }
        if let Some(ident) = orig.ipv4_ident {
            let expected = ident.wrapping_add(u16::try_from(i).unwrap());
            assert_eq!(p.ipv4_ident, Some(expected));
        }
        if let (Some(o), Some(t)) = (&orig.tcp, &p.tcp) {
            let advance = u32::try_from(reassembled.len()).unwrap();
            assert_eq!(t.sequence_number, o.sequence_number.wrapping_add(advance));
            assert_eq!(t.fin, o.fin && i == last, "FIN on segment {i}");
            assert_eq!(t.psh, o.psh && i == last, "PSH on segment {i}");
            assert_eq!(t.cwr, o.cwr && i == 0, "CWR on segment {i}");
            assert_eq!((t.ack, t.ece, t.syn, t.rst), (o.ack, o.ece, o.syn, o.rst));
            assert_eq!(t.acknowledgment_number, o.acknowledgment_number);
            assert_eq!(t.options, o.options);
        }
        reassembled.extend_from_slice(p.payload);
    }
    assert_eq!(reassembled, orig.payload, "reassembled payload");
}

/// Offset of the IP header of an etherparse-built frame.
fn l3_offset_of(frame: &[u8]) -> usize {
    crate::vlan::VlanStack::parse(frame)
        .unwrap()
        .payload_offset()
}
