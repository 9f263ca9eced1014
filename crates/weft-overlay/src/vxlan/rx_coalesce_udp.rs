//! Inner GRO for UDP: a UDP GRO buffer from a weft peer may hold the datagrams of one USO
//! super-frame's `UDP_SEGMENT` send. When segmenting a UDP super-frame again would give back
//! exactly the datagrams received — same Ethernet, IP and UDP headers but for lengths,
//! checksums and IPv4 IDs counting up by one; every payload the first's size but the last,
//! none empty; every checksum right and none zero (an IPv4 datagram sent without one would
//! come out with one) — they are merged back, in place, into one UDP super-frame
//! (`GsoKind::UdpL4`, `gso_size` the datagrams' payload size, checksum left partial), so that
//! a destination that takes USO (a TAP, a guest) gets them in one write. Anything else is
//! left alone and goes through the switch datagram by datagram. Pure (no I/O).

use std::ops::Range;

use weft_packet::checksum;
use weft_packet::GsoKind;

use crate::vxlan::decap::{decapsulate, DecapRules};
use crate::vxlan::gro::gro_segments;
use crate::vxlan::rx_coalesce::{
    be16, ip_layer, pack, pseudo_header, super_frame, Merged, ETH, VXLAN,
};

const UDP: u8 = 17;
const UDP_HEADER: usize = 8;

/// Whether datagram `inner` carries the same flow and headers as `first`, ignoring the
/// fields that differ between datagrams of one super-frame (lengths, checksums, IPv4 ID).
fn same_headers(first: &[u8], inner: &[u8], v6: bool, l4: usize) -> bool {
    let same = |r: Range<usize>| first.get(r.clone()) == inner.get(r);
    let ip_same = if v6 {
        same(ETH..ETH + 4) && same(ETH + 6..ETH + 40)
    } else {
        same(ETH..ETH + 2) && same(ETH + 6..ETH + 10) && same(ETH + 12..ETH + 20)
    };
    same(0..ETH) && ip_same && same(l4..l4 + 4)
}

/// Tries to merge the GRO buffer `buf` (datagrams of `segment` bytes, the first an inner
/// UDP datagram) into one UDP super-frame. `buf` is changed only when the merge succeeds.
pub(crate) fn coalesce_udp(buf: &mut [u8], segment: u16, rules: &DecapRules) -> Option<Merged> {
    let count = buf.len().div_ceil(usize::from(segment).max(1));
    if count < 2 {
        return None;
    }
    let first_range = gro_segments(buf.len(), segment).next()?;
    let first = buf.get(first_range.start + VXLAN..first_range.end)?;
    let (v6, ip_len, protocol) = ip_layer(first)?;
    if protocol != UDP {
        return None;
    }
    let l4 = ETH + ip_len;
    let headers = l4 + UDP_HEADER;
    let piece = first.len().checked_sub(headers)?;
    let mut next_id = be16(first, ETH + 4)?;
    let mut payload = 0usize;
    for (k, range) in gro_segments(buf.len(), segment).enumerate() {
        let datagram = buf.get(range)?;
        decapsulate(datagram, false, rules).ok()?;
        let inner = datagram.get(VXLAN..)?;
        let (k_v6, k_ip_len, k_protocol) = ip_layer(inner)?;
        let udp = inner.get(l4..)?;
        let len = inner.len().checked_sub(headers)?;
        let id_follows = v6 || be16(inner, ETH + 4)? == next_id;
        next_id = next_id.wrapping_add(1);
        let ok = k_v6 == v6
            && k_ip_len == ip_len
            && k_protocol == UDP
            && same_headers(first, inner, v6, l4)
            && usize::from(be16(inner, l4 + 4)?) == udp.len()
            && be16(inner, l4 + 6)? != 0
            && len > 0
            && (len == piece || (k + 1 == count && len < piece))
            && id_follows;
        if !ok {
            return None;
        }
        let sum = checksum::combine(
            pseudo_header(inner, v6, UDP, udp.len())?,
            checksum::sum(udp),
        );
        let ip_valid = v6 || checksum::is_valid(inner.get(ETH..ETH + 20)?);
        if sum != 0xffff || !ip_valid {
            return None;
        }
        payload += len;
    }
    let upper_len = UDP_HEADER + payload;
    let ip_field = u16::try_from(if v6 { upper_len } else { 20 + upper_len }).ok()?;
    let udp_field = u16::try_from(upper_len).ok()?;
    let write = pack(buf, segment, headers, piece, v6, ip_field)?;
    let inner = buf.get_mut(VXLAN..write)?;
    inner
        .get_mut(l4 + 4..l4 + 6)?
        .copy_from_slice(&udp_field.to_be_bytes());
    // The pseudo-header sum with the super-frame's length, as a USO sender leaves it (each
    // datagram's is adjusted to its own length when it is cut).
    let partial = pseudo_header(inner, v6, UDP, upper_len)?;
    super_frame(inner, l4, 6, partial, GsoKind::UdpL4, piece, headers)
}
