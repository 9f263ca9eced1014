//! Which of the guest's receive queues a frame goes to: a hash of the flow fields the frame
//! already carries (MAC addresses; IPv4/IPv6 addresses and protocol; TCP/UDP ports of an
//! unfragmented packet). One flow always hashes the same, so it stays on one queue and its
//! order is kept. Cheap: the first 64 bytes are read, nothing is validated beyond bounds.

use weft_switch::TxFrame;

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const ETHERTYPE_VLAN: u16 = 0x8100;
const ETHERTYPE_QINQ: u16 = 0x88a8;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

/// Bytes of a frame the hash looks at: two VLAN tags and an IPv6 header with ports fit.
const HASHED_PREFIX: usize = 64;

/// The flow hash of `frame` (see the module documentation).
pub(crate) fn flow_hash(frame: &TxFrame<'_>) -> u32 {
    if frame.head().is_empty() && (frame.tail.is_empty() || frame.body.len() >= HASHED_PREFIX) {
        return flow_hash_bytes(frame.body.get(..HASHED_PREFIX).unwrap_or(frame.body));
    }
    let mut prefix = [0u8; HASHED_PREFIX];
    let n = frame.copy_prefix(&mut prefix);
    flow_hash_bytes(prefix.get(..n).unwrap_or(&prefix))
}

/// FNV-1a over the chosen fields, folded so that the low bits mix the high ones.
struct Fnv(u32);

impl Fnv {
    fn add(&mut self, bytes: Option<&[u8]>) {
        for b in bytes.unwrap_or(&[]) {
            self.0 = (self.0 ^ u32::from(*b)).wrapping_mul(0x0100_0193);
        }
    }

    fn finish(self) -> u32 {
        self.0 ^ (self.0 >> 16)
    }
}

fn be16(f: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*f.get(at)?, *f.get(at + 1)?]))
}

/// The flow hash of a frame's first bytes.
pub(crate) fn flow_hash_bytes(f: &[u8]) -> u32 {
    let mut h = Fnv(0x811c_9dc5);
    h.add(f.get(..12));
    let mut at = 12;
    let mut ethertype = be16(f, at);
    for _ in 0..2 {
        if matches!(ethertype, Some(ETHERTYPE_VLAN | ETHERTYPE_QINQ)) {
            at += 4;
            ethertype = be16(f, at);
        }
    }
    let l3 = at + 2;
    match ethertype {
        Some(ETHERTYPE_IPV4) => {
            let ihl = f.get(l3).map_or(0, |b| usize::from(b & 0x0f) * 4);
            let proto = f.get(l3 + 9).copied();
            h.add(f.get(l3 + 9..l3 + 10));
            h.add(f.get(l3 + 12..l3 + 20));
            // Fragment offset and more-fragments: only a whole packet shows its ports.
            let unfragmented = be16(f, l3 + 6).is_some_and(|v| v & 0x3fff == 0);
            if unfragmented && ihl >= 20 && matches!(proto, Some(PROTO_TCP | PROTO_UDP)) {
                h.add(f.get(l3 + ihl..l3 + ihl + 4));
            }
        }
        Some(ETHERTYPE_IPV6) => {
            let next = f.get(l3 + 6).copied();
            h.add(f.get(l3 + 6..l3 + 7));
            h.add(f.get(l3 + 8..l3 + 40));
            if matches!(next, Some(PROTO_TCP | PROTO_UDP)) {
                h.add(f.get(l3 + 40..l3 + 44));
            }
        }
        _ => {}
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_packet::OffloadInfo;

    fn udp4(src_port: u16, payload: u8) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8 + 4];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        f[14] = 0x45;
        f[23] = PROTO_UDP;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f[34..36].copy_from_slice(&src_port.to_be_bytes());
        f[36..38].copy_from_slice(&9u16.to_be_bytes());
        f[42..].fill(payload);
        f
    }

    #[test]
    fn one_flow_hashes_the_same_whatever_its_payload() {
        assert_eq!(
            flow_hash_bytes(&udp4(1000, 1)),
            flow_hash_bytes(&udp4(1000, 2))
        );
    }

    #[test]
    fn ports_spread_flows() {
        let hashes: std::collections::HashSet<u32> = (0..64u16)
            .map(|p| flow_hash_bytes(&udp4(1000 + p, 0)) % 4)
            .collect();
        assert_eq!(hashes.len(), 4, "64 flows should reach all of 4 queues");
    }

    #[test]
    fn a_rewritten_head_hashes_as_the_whole_frame() {
        let f = udp4(1234, 7);
        let whole = TxFrame::whole(&f, OffloadInfo::default());
        let split = TxFrame::with_head(&f[..12], &f[12..], OffloadInfo::default());
        assert_eq!(flow_hash(&whole), flow_hash(&split));
        assert_eq!(flow_hash(&whole), flow_hash_bytes(&f));
    }

    proptest::proptest! {
        #[test]
        fn a_frame_hashes_the_same_however_its_head_is_cut(
            frame in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
            cut in 0usize..=TxFrame::MAX_HEAD,
        ) {
            let cut = cut.min(frame.len());
            let whole = TxFrame::whole(&frame, OffloadInfo::default());
            let split = TxFrame::with_head(&frame[..cut], &frame[cut..], OffloadInfo::default());
            proptest::prop_assert_eq!(flow_hash(&whole), flow_hash(&split));
        }

        #[test]
        fn the_payload_never_moves_a_flow(
            flow in proptest::prelude::any::<u16>(),
            payload in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..100),
        ) {
            let plain = udp4(flow, 0);
            let mut other = plain[..42].to_vec();
            other.extend_from_slice(&payload);
            proptest::prop_assert_eq!(flow_hash_bytes(&plain), flow_hash_bytes(&other));
        }
    }

    #[test]
    fn short_and_odd_frames_hash_without_panicking() {
        for len in 0..80 {
            let mut f = udp4(1, 1);
            f.resize(len, 0xff);
            let _ = flow_hash_bytes(&f);
        }
    }
}
