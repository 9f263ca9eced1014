//! Inner GRO: a UDP GRO buffer from a weft peer holds the datagrams of one `UDP_SEGMENT`
//! send, i.e. the consecutive TCP segments of one super-frame. When they all are (same
//! headers but for lengths, IDs, sequence numbers and checksums; contiguous sequence
//! numbers; only ACK, PSH on the last; every checksum right), they are merged back, in place,
//! into one TCP super-frame with its checksum left partial, so that a TSO-capable destination
//! (a TAP, a guest) takes 64 KB with one write instead of ~45. Anything else is left alone
//! and goes through the switch datagram by datagram. UDP datagrams of one `UDP_SEGMENT`
//! send (a USO super-frame) are merged back the same way (`rx_coalesce_udp.rs`). Pure (no
//! I/O).

use std::net::{Ipv4Addr, Ipv6Addr};

use weft_packet::checksum;
use weft_packet::{GsoKind, OffloadInfo};

use crate::vxlan::decap::{decapsulate, DecapRules};
use crate::vxlan::gro::gro_segments;

pub(crate) const ETH: usize = 14;
pub(crate) const VXLAN: usize = weft_packet::vxlan::HEADER_LEN;
const TCP: u8 = 6;
const UDP: u8 = 17;
const TCP_ACK: u8 = 0x10;
const TCP_PSH: u8 = 0x08;

/// Which super-frames a merge may make: those every destination takes whole (the switch
/// says which, [`weft_switch::PortRx::peers_accept`]); one that some destination would have
/// to cut again is not worth merging.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MergeKinds {
    /// TCP over IPv4.
    pub tcp4: bool,
    /// TCP over IPv6.
    pub tcp6: bool,
    /// UDP.
    pub udp: bool,
}

impl MergeKinds {
    /// Every kind (a port not yet told about its peers, or used without a switch).
    pub const ALL: MergeKinds = MergeKinds {
        tcp4: true,
        tcp6: true,
        udp: true,
    };

    /// What peers that take `caps` take whole.
    pub fn taken_by(caps: &weft_switch::PortCaps) -> MergeKinds {
        MergeKinds {
            tcp4: caps.tso4,
            tcp6: caps.tso6,
            udp: caps.uso,
        }
    }
}

/// A merged super-frame: where it lies in the buffer and its offload state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Merged {
    /// Offset of the inner frame in the buffer.
    pub start: usize,
    /// Its length.
    pub len: usize,
    /// TSO and partial checksum, for the switch and the destination port.
    pub offload: OffloadInfo,
}

/// The layout of the first inner segment's headers.
#[derive(Clone, Copy)]
struct Headers {
    v6: bool,
    ip_len: usize,
    tcp_len: usize,
}

impl Headers {
    fn total(self) -> usize {
        ETH + self.ip_len + self.tcp_len
    }
}

pub(crate) fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// An untagged Ethernet / IPv4 (no options, not a fragment) or IPv6 (no extension headers)
/// frame whose IP length fills it: whether it is IPv6, its IP header length and its upper
/// protocol; `None` for anything else.
pub(crate) fn ip_layer(inner: &[u8]) -> Option<(bool, usize, u8)> {
    match be16(inner, 12)? {
        0x0800 => {
            let vihl = *inner.get(ETH)?;
            let flags_offset = be16(inner, ETH + 6)?;
            let plain = vihl == 0x45 && flags_offset & 0x3fff == 0;
            if !plain || usize::from(be16(inner, ETH + 2)?) != inner.len() - ETH {
                return None;
            }
            Some((false, 20, *inner.get(ETH + 9)?))
        }
        0x86dd => {
            if usize::from(be16(inner, ETH + 4)?) + 40 != inner.len() - ETH {
                return None;
            }
            Some((true, 40, *inner.get(ETH + 6)?))
        }
        _ => None,
    }
}

/// Reads an untagged Ethernet / IPv4 (no options, not a fragment) or IPv6 (no extension
/// headers) / TCP frame's header lengths; `None` for anything else.
fn parse(inner: &[u8]) -> Option<Headers> {
    let (v6, ip_len, protocol) = ip_layer(inner)?;
    if protocol != TCP {
        return None;
    }
    let tcp_len = usize::from(*inner.get(ETH + ip_len + 12)? >> 4) * 4;
    let h = Headers {
        v6,
        ip_len,
        tcp_len,
    };
    (tcp_len >= 20 && h.total() <= inner.len()).then_some(h)
}

/// The pseudo-header sum of a TCP segment of `upper_len` bytes in `inner`.
fn pseudo(inner: &[u8], h: Headers, upper_len: usize) -> Option<u16> {
    pseudo_header(inner, h.v6, TCP, upper_len)
}

/// The pseudo-header sum for `protocol` and `upper_len` bytes, addresses read from `inner`.
pub(crate) fn pseudo_header(inner: &[u8], v6: bool, protocol: u8, upper_len: usize) -> Option<u16> {
    if v6 {
        let a: [u8; 16] = inner.get(ETH + 8..ETH + 24)?.try_into().ok()?;
        let b: [u8; 16] = inner.get(ETH + 24..ETH + 40)?.try_into().ok()?;
        let len = u32::try_from(upper_len).ok()?;
        Some(checksum::pseudo_header_v6(
            Ipv6Addr::from(a),
            Ipv6Addr::from(b),
            protocol,
            len,
        ))
    } else {
        let a: [u8; 4] = inner.get(ETH + 12..ETH + 16)?.try_into().ok()?;
        let b: [u8; 4] = inner.get(ETH + 16..ETH + 20)?.try_into().ok()?;
        let len = u16::try_from(upper_len).ok()?;
        Some(checksum::pseudo_header_v4(
            Ipv4Addr::from(a),
            Ipv4Addr::from(b),
            protocol,
            len,
        ))
    }
}

/// Whether segment `inner` carries the same flow and headers as `first`, ignoring the
/// fields that differ between segments of one super-frame.
fn same_headers(first: &[u8], inner: &[u8], h: Headers) -> bool {
    let l3 = ETH;
    let l4 = ETH + h.ip_len;
    let same = |r: std::ops::Range<usize>| first.get(r.clone()) == inner.get(r);
    let ip_same = if h.v6 {
        same(l3..l3 + 4) && same(l3 + 6..l3 + 40)
    } else {
        same(l3..l3 + 2) && same(l3 + 6..l3 + 10) && same(l3 + 12..l3 + 20)
    };
    same(0..ETH)
        && ip_same
        && same(l4..l4 + 4)
        && same(l4 + 8..l4 + 13)
        && same(l4 + 14..l4 + 16)
        && same(l4 + 18..l4 + h.tcp_len)
}

/// The merge itself, once every datagram of the GRO buffer `buf` (`segment` bytes each) is
/// checked: each one's payload (past its VXLAN header and `headers` bytes of inner headers)
/// moved up behind the first one's (`first_payload` bytes), and the first's IP length set to
/// `ip_field` (and an IPv4 header checksum computed again). Payloads only move towards the
/// start, so each copy reads bytes not yet overwritten. Returns where the merged inner frame
/// ends in `buf` (it starts at `VXLAN`); `None`, before anything is moved past what it can
/// check, when a datagram is shorter than the headers (callers check that first).
pub(crate) fn pack(
    buf: &mut [u8],
    segment: u16,
    headers: usize,
    first_payload: usize,
    v6: bool,
    ip_field: u16,
) -> Option<usize> {
    let mut write = VXLAN + headers + first_payload;
    for range in gro_segments(buf.len(), segment).skip(1) {
        let from = range.start + VXLAN + headers;
        // Bounds checked here too, so that no caller's mistake can make `copy_within` panic.
        if from > range.end || range.end > buf.len() || write > from {
            return None;
        }
        buf.copy_within(from..range.end, write);
        write += range.end - from;
    }
    let inner = buf.get_mut(VXLAN..write)?;
    if v6 {
        inner
            .get_mut(ETH + 4..ETH + 6)?
            .copy_from_slice(&ip_field.to_be_bytes());
    } else {
        inner
            .get_mut(ETH + 2..ETH + 4)?
            .copy_from_slice(&ip_field.to_be_bytes());
        inner.get_mut(ETH + 10..ETH + 12)?.fill(0);
        let ip_sum = checksum::checksum(inner.get(ETH..ETH + 20)?);
        inner
            .get_mut(ETH + 10..ETH + 12)?
            .copy_from_slice(&ip_sum.to_be_bytes());
    }
    Some(write)
}

/// Tries to merge the GRO buffer `buf` (datagrams of `segment` bytes) into one super-frame
/// of one of `kinds`. `buf` is changed only when the merge succeeds.
pub fn coalesce(
    buf: &mut [u8],
    segment: usize,
    rules: &DecapRules,
    kinds: MergeKinds,
) -> Option<Merged> {
    let segment = u16::try_from(segment).ok()?;
    let first_range = gro_segments(buf.len(), segment).next()?;
    let first = buf.get(first_range.start + VXLAN..first_range.end)?;
    decapsulate(buf.get(first_range.clone())?, false, rules).ok()?;
    if ip_layer(first)?.2 == UDP {
        return kinds
            .udp
            .then(|| crate::vxlan::rx_coalesce_udp::coalesce_udp(buf, segment, rules))
            .flatten();
    }
    let h = parse(first)?;
    if !(if h.v6 { kinds.tcp6 } else { kinds.tcp4 }) {
        return None;
    }
    let mss = first.len() - h.total();
    let mut seq = be32(first, ETH + h.ip_len + 4)?;
    let mut payload = 0usize;
    let mut count = 0usize;
    let last_index = buf.len().div_ceil(usize::from(segment)) - 1;
    let mut last_flags = 0;
    for (k, range) in gro_segments(buf.len(), segment).enumerate() {
        let datagram = buf.get(range)?;
        decapsulate(datagram, false, rules).ok()?;
        let inner = datagram.get(VXLAN..)?;
        let hk = parse(inner)?;
        let len = inner.len().checked_sub(h.total())?;
        let flags = *inner.get(ETH + h.ip_len + 13)?;
        last_flags = flags;
        let allowed = if k == last_index {
            TCP_ACK | TCP_PSH
        } else {
            TCP_ACK
        };
        let ok = hk.v6 == h.v6
            && hk.tcp_len == h.tcp_len
            && same_headers(first, inner, h)
            && flags & !allowed == 0
            && flags & TCP_ACK != 0
            && be32(inner, ETH + h.ip_len + 4)? == seq
            && len > 0
            && (len == mss || (k == last_index && len < mss));
        let upper = inner.get(ETH + h.ip_len..)?;
        let valid = checksum::combine(pseudo(inner, h, upper.len())?, checksum::sum(upper));
        let ip_valid = h.v6 || checksum::is_valid(inner.get(ETH..ETH + 20)?);
        if !ok || valid != 0xffff || !ip_valid {
            return None;
        }
        seq = seq.wrapping_add(u32::try_from(len).ok()?);
        payload += len;
        count += 1;
    }
    let upper_len = h.tcp_len + payload;
    let ip_field = if h.v6 { upper_len } else { 20 + upper_len };
    let ip_field = u16::try_from(ip_field).ok()?;
    if count < 2 {
        return None;
    }
    let write = pack(buf, segment, h.total(), mss, h.v6, ip_field)?;
    let inner = buf.get_mut(VXLAN..write)?;
    let l4 = ETH + h.ip_len;
    *inner.get_mut(l4 + 13)? |= last_flags & TCP_PSH;
    let partial = pseudo(inner, h, upper_len)?;
    let gso = if h.v6 { GsoKind::TcpV6 } else { GsoKind::TcpV4 };
    super_frame(inner, l4, 16, partial, gso, mss, h.total())
}

/// The merged super-frame `inner` (at `VXLAN` in its buffer) with its L4 checksum field
/// (`csum_offset` into the L4 header at `l4`) set to `partial`, the pseudo-header sum for
/// its whole length, and the offload state that says so: the destination completes it, or
/// cuts `gso` segments of `gso_size` payload bytes behind `hdr_len` bytes of headers.
pub(crate) fn super_frame(
    inner: &mut [u8],
    l4: usize,
    csum_offset: usize,
    partial: u16,
    gso: GsoKind,
    gso_size: usize,
    hdr_len: usize,
) -> Option<Merged> {
    inner
        .get_mut(l4 + csum_offset..l4 + csum_offset + 2)?
        .copy_from_slice(&partial.to_be_bytes());
    Some(Merged {
        start: VXLAN,
        len: inner.len(),
        offload: OffloadInfo {
            needs_csum: true,
            data_valid: false,
            csum_start: u16::try_from(l4).ok()?,
            csum_offset: u16::try_from(csum_offset).ok()?,
            gso,
            gso_size: u16::try_from(gso_size).ok()?,
            hdr_len: u16::try_from(hdr_len).ok()?,
        },
    })
}
