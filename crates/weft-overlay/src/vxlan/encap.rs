//! Encapsulation: the 16 bytes put in front of each inner frame (UDP header + VXLAN header;
//! the kernel writes the outer IP header), and the flow hash that picks the UDP source port
//! so that the underlay's ECMP spreads flows and keeps each flow on one path (RFC 7348 §5).

use weft_packet::summary::{L3Summary, L4Summary};
use weft_packet::vxlan::{self, HEADER_LEN as VXLAN_HEADER_LEN};
use weft_packet::{FrameSummary, Vni};

/// UDP header + VXLAN header.
pub const ENCAP_LEN: usize = 8 + VXLAN_HEADER_LEN;
/// Lowest source port used (IANA dynamic range, as RFC 7348 recommends).
pub const SOURCE_PORT_MIN: u16 = 49_152;
/// How many leading bytes of the inner frame the flow hash reads (enough for two VLAN tags,
/// IPv6 and the L4 ports).
pub const HASH_PREFIX: usize = 96;

/// A stable hash of the inner frame's flow: MACs and EtherType, plus IP addresses and
/// protocol, plus L4 ports when present and not a later fragment.
pub fn flow_hash(prefix: &[u8]) -> u64 {
    let mut h = Mixer::default();
    match FrameSummary::parse(prefix) {
        Ok(s) => {
            h.add(s.dst.to_u64());
            h.add(s.src.to_u64());
            h.add(u64::from(s.ethertype));
            match s.l3 {
                L3Summary::Ipv4 {
                    src, dst, protocol, ..
                } => {
                    h.add(u64::from(u32::from(src)));
                    h.add(u64::from(u32::from(dst)));
                    h.add(u64::from(protocol));
                }
                L3Summary::Ipv6 {
                    src,
                    dst,
                    next_header,
                    ..
                } => {
                    let (s, d) = (u128::from(src), u128::from(dst));
                    for v in [s, s >> 64, d, d >> 64] {
                        h.add(low64(v));
                    }
                    h.add(u64::from(next_header));
                }
                _ => {}
            }
            if let L4Summary::Ports { src, dst } = s.l4 {
                h.add(u64::from(src) << 16 | u64::from(dst));
            }
        }
        Err(_) => {
            for chunk in prefix.chunks(8).take(2) {
                let mut b = [0u8; 8];
                b[..chunk.len()].copy_from_slice(chunk);
                h.add(u64::from_le_bytes(b));
            }
        }
    }
    h.finish()
}

#[allow(clippy::cast_possible_truncation)]
fn low64(v: u128) -> u64 {
    // Keeps the low 64 bits on purpose.
    v as u64
}

/// The UDP source port for a flow hash: in `SOURCE_PORT_MIN..=65535`.
pub fn source_port(hash: u64) -> u16 {
    let span = u64::from(u16::MAX - SOURCE_PORT_MIN) + 1;
    let offset = u16::try_from((hash >> 32) % span).unwrap_or(0);
    SOURCE_PORT_MIN + offset
}

/// Writes the UDP header (checksum zero: the kernel fills it in for IPv6, and zero is valid
/// for IPv4, RFC 7348 §5) and the VXLAN header for an inner frame of `inner_len` bytes.
/// `None` when the datagram would exceed 65535 bytes.
pub fn write_header(
    vni: Vni,
    src_port: u16,
    dst_port: u16,
    inner_len: usize,
) -> Option<[u8; ENCAP_LEN]> {
    let udp_len = u16::try_from(inner_len.checked_add(ENCAP_LEN)?).ok()?;
    let mut out = [0u8; ENCAP_LEN];
    out[0..2].copy_from_slice(&src_port.to_be_bytes());
    out[2..4].copy_from_slice(&dst_port.to_be_bytes());
    out[4..6].copy_from_slice(&udp_len.to_be_bytes());
    vxlan::emit(vni, &mut out[8..]).ok()?;
    Some(out)
}

/// A small multiply-xorshift mixer (stable across runs and builds, unlike `RandomState`).
#[derive(Default)]
struct Mixer(u64);

impl Mixer {
    fn add(&mut self, v: u64) {
        self.0 = (self.0 ^ v)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
    }
    fn finish(&self) -> u64 {
        let mut x = self.0;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x
    }
}
