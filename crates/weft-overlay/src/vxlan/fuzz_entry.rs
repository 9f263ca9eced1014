//! Body of the `vxlan_decap` fuzz target (`fuzz/fuzz_targets/vxlan_decap.rs`), also run by a
//! proptest on stable.

use std::net::{IpAddr, Ipv4Addr};

use weft_packet::Vni;

use crate::vxlan::decap::{decapsulate as check, DecapRules};
use crate::vxlan::remote_fdb::RemoteFdb;

/// Decapsulates `data` as a datagram for VNI 42 (the first byte picks strictness and the
/// truncation flag), and learns its inner source into a small FDB; also reads it as a UDP
/// GRO control buffer and as a GRO buffer to merge (segment size from the mode byte). Must
/// never panic; an accepted frame must lie inside `data` and be within the size bounds.
pub fn decapsulate(data: &[u8]) -> bool {
    let (mode, datagram) = data.split_first().map_or((0, data), |(m, d)| (*m, d));
    let _ = crate::vxlan::gro::gro_segment_size(datagram);
    let mut copy = [0u8; 2048];
    let n = datagram.len().min(copy.len());
    copy[..n].copy_from_slice(&datagram[..n]);
    let gro_rules = DecapRules {
        vni: Vni::new(42).unwrap_or_default(),
        strict_reserved: false,
        max_frame_len: 1522,
    };
    if let Some(m) = crate::vxlan::rx_coalesce::coalesce(
        &mut copy[..n],
        usize::from(mode) * 8 + 1,
        &gro_rules,
        crate::vxlan::rx_coalesce::MergeKinds::ALL,
    ) {
        assert!(m.start + m.len <= n);
    }
    let rules = DecapRules {
        vni: Vni::new(42).unwrap_or_default(),
        strict_reserved: mode & 1 != 0,
        max_frame_len: 1522,
    };
    match check(datagram, mode & 2 != 0, &rules) {
        Ok(d) => {
            let inner = &datagram[d.inner.clone()];
            assert!(inner.len() >= 14 && inner.len() <= rules.max_frame_len);
            assert!(d.inner_src.is_unicast());
            let mut fdb = RemoteFdb::new(1, 1);
            fdb.learn(d.inner_src, IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)));
            assert!(fdb.learned_len() <= 1);
            true
        }
        Err(_) => false,
    }
}
