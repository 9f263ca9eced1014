//! Frames for the port security tests, built by hand so that a test can put any byte
//! anywhere (checksums are left zero: the check does not read them).

use core::net::{Ipv4Addr, Ipv6Addr};

use weft_packet::MacAddr;

/// The port's own MAC.
pub(super) const MAC: MacAddr = MacAddr([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
/// Another station's MAC.
pub(super) const OTHER_MAC: MacAddr = MacAddr([0x52, 0x54, 0x00, 0x65, 0x43, 0x21]);
/// The port's own IPv4 address.
pub(super) const IP4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 5);
/// Another station's IPv4 address.
pub(super) const OTHER_IP4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 9);
/// The port's own IPv6 address.
pub(super) const IP6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 5);
/// Another station's IPv6 address.
pub(super) const OTHER_IP6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 9);
/// fe80::5054:ff:fe12:3456, the port's EUI-64 link-local address.
pub(super) const LINK_LOCAL: Ipv6Addr =
    Ipv6Addr::new(0xfe80, 0, 0, 0, 0x5054, 0xff, 0xfe12, 0x3456);
/// All-nodes multicast.
pub(super) const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

pub(super) const UDP: u8 = 17;
pub(super) const TCP: u8 = 6;
pub(super) const ICMPV6: u8 = 58;
pub(super) const HOP_BY_HOP: u8 = 0;
pub(super) const DEST_OPTS: u8 = 60;
pub(super) const FRAGMENT: u8 = 44;

/// An untagged Ethernet frame from `src`.
pub(super) fn eth(src: MacAddr, ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x01];
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// `frame` with `count` VLAN tags pushed after the addresses (an S-tag outside a C-tag).
pub(super) fn tagged(frame: &[u8], count: usize) -> Vec<u8> {
    let mut f = frame[..12].to_vec();
    if count == 2 {
        f.extend_from_slice(&[0x88, 0xa8, 0x00, 0x64]);
    }
    if count >= 1 {
        f.extend_from_slice(&[0x81, 0x00, 0x00, 0x0a]);
    }
    f.extend_from_slice(&frame[12..]);
    f
}

/// An IPv4 header with `options` (a multiple of four bytes) and `flags_frag` (the flags and
/// fragment offset word), followed by `payload`.
pub(super) fn ipv4_with(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    proto: u8,
    flags_frag: u16,
    options: &[u8],
    payload: &[u8],
) -> Vec<u8> {
    let header_len = 20 + options.len();
    let total = u16::try_from(header_len + payload.len()).unwrap();
    let ihl = u8::try_from(header_len / 4).unwrap();
    let mut p = vec![0x40 | ihl, 0];
    p.extend_from_slice(&total.to_be_bytes());
    p.extend_from_slice(&[0, 1]);
    p.extend_from_slice(&flags_frag.to_be_bytes());
    p.extend_from_slice(&[64, proto, 0, 0]);
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    p.extend_from_slice(options);
    p.extend_from_slice(payload);
    p
}

/// An unfragmented IPv4 packet without options.
pub(super) fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, payload: &[u8]) -> Vec<u8> {
    ipv4_with(src, dst, proto, 0x4000, &[], payload)
}

/// A UDP datagram (length set, checksum zero).
pub(super) fn udp(src_port: u16, dst_port: u16, payload: &[u8]) -> Vec<u8> {
    let len = u16::try_from(8 + payload.len()).unwrap();
    let mut d = src_port.to_be_bytes().to_vec();
    d.extend_from_slice(&dst_port.to_be_bytes());
    d.extend_from_slice(&len.to_be_bytes());
    d.extend_from_slice(&[0, 0]);
    d.extend_from_slice(payload);
    d
}

/// A minimal TCP header (SYN).
pub(super) fn tcp(src_port: u16, dst_port: u16) -> Vec<u8> {
    let mut t = src_port.to_be_bytes().to_vec();
    t.extend_from_slice(&dst_port.to_be_bytes());
    t.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
    t
}

/// An IPv6 packet; `payload` includes any extension headers.
pub(super) fn ipv6(src: Ipv6Addr, dst: Ipv6Addr, next: u8, payload: &[u8]) -> Vec<u8> {
    let len = u16::try_from(payload.len()).unwrap();
    let mut p = vec![0x60, 0, 0, 0];
    p.extend_from_slice(&len.to_be_bytes());
    p.extend_from_slice(&[next, 255]);
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    p.extend_from_slice(payload);
    p
}

/// A hop-by-hop or destination options header of `8 * (units + 1)` bytes (PadN inside).
pub(super) fn options_header(next: u8, units: u8) -> Vec<u8> {
    let len = 8 * (usize::from(units) + 1);
    let mut h = vec![next, units, 1, u8::try_from(len - 4).unwrap()];
    h.resize(len, 0);
    h
}

/// A fragment header: `offset` in bytes (a multiple of 8), `more` the M flag.
pub(super) fn fragment_header(next: u8, offset: u16, more: bool) -> Vec<u8> {
    let word = offset | u16::from(more);
    let mut h = vec![next, 0];
    h.extend_from_slice(&word.to_be_bytes());
    h.extend_from_slice(&[0, 0, 0, 7]);
    h
}

/// An ICMPv6 message: type, code 0, checksum zero, then `body`.
pub(super) fn icmpv6(ty: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![ty, 0, 0, 0];
    m.extend_from_slice(body);
    m
}

/// A neighbour solicitation (135) or advertisement (136) for `target` with `options`.
pub(super) fn nd(ty: u8, target: Ipv6Addr, options: &[u8]) -> Vec<u8> {
    let mut body = vec![0x60, 0, 0, 0];
    body.extend_from_slice(&target.octets());
    body.extend_from_slice(options);
    icmpv6(ty, &body)
}

/// A link-layer address option: 1 source, 2 target.
pub(super) fn lla_option(kind: u8, mac: MacAddr) -> Vec<u8> {
    let mut o = vec![kind, 1];
    o.extend_from_slice(&mac.0);
    o
}

/// An Ethernet/IPv4 ARP packet.
pub(super) fn arp(op: u16, sha: MacAddr, spa: Ipv4Addr, tha: MacAddr, tpa: Ipv4Addr) -> Vec<u8> {
    let mut a = vec![0, 1, 0x08, 0x00, 6, 4];
    a.extend_from_slice(&op.to_be_bytes());
    a.extend_from_slice(&sha.0);
    a.extend_from_slice(&spa.octets());
    a.extend_from_slice(&tha.0);
    a.extend_from_slice(&tpa.octets());
    a
}

/// An IPv4 frame from the port's MAC.
pub(super) fn v4_frame(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, payload: &[u8]) -> Vec<u8> {
    eth(MAC, 0x0800, &ipv4(src, dst, proto, payload))
}

/// An IPv6 frame from the port's MAC.
pub(super) fn v6_frame(src: Ipv6Addr, dst: Ipv6Addr, next: u8, payload: &[u8]) -> Vec<u8> {
    eth(MAC, 0x86dd, &ipv6(src, dst, next, payload))
}
