//! UDP datagrams of one USO send merged back into a UDP super-frame on receive: exact (cut
//! again, it gives back the very datagrams received), and refused for anything that would
//! not be.

use proptest::prelude::*;
use weft_packet::gso::Segmenter;
use weft_packet::{GsoKind, Vni};

use super::offload::{encapsulate, udp_super_frame};
use crate::vxlan::decap::DecapRules;
use crate::vxlan::rx_coalesce::{coalesce, MergeKinds};

fn rules() -> DecapRules {
    DecapRules {
        vni: Vni::new(42).unwrap(),
        strict_reserved: false,
        max_frame_len: 1472,
    }
}

fn data(len: usize) -> Vec<u8> {
    (0..len).map(|i| u8::try_from(i % 241).unwrap()).collect()
}

/// What a GRO socket receives from a peer's send of a USO super-frame of `len` payload
/// bytes in `gso_size`-byte datagrams: the buffer and its segment size.
fn gro_buffer(v6: bool, len: usize, gso_size: u16) -> (Vec<u8>, usize) {
    let (frame, info) = udp_super_frame(v6, &data(len), gso_size);
    let (out, plan) = encapsulate(&frame, &info, 1450, Vni::new(42).unwrap()).unwrap();
    (out, plan.segment())
}

/// The inner datagrams of a GRO buffer, one by one.
fn inner_datagrams(buf: &[u8], segment: usize) -> Vec<Vec<u8>> {
    buf.chunks(segment).map(|d| d[8..].to_vec()).collect()
}

/// Merges `buf`, cuts the merged super-frame again with weft's segmenter and checks that
/// the datagrams are the ones received, byte for byte.
fn merges_exactly(v6: bool, len: usize, gso_size: u16) {
    let (mut buf, segment) = gro_buffer(v6, len, gso_size);
    let received = inner_datagrams(&buf, segment);
    let m = coalesce(&mut buf, segment, &rules(), MergeKinds::ALL).expect("merged");
    let o = m.offload;
    assert_eq!((o.gso, o.gso_size), (GsoKind::UdpL4, gso_size));
    assert!(o.needs_csum && o.csum_offset == 6);
    let merged = &buf[m.start..m.start + m.len];
    let mut again = Segmenter::new(merged, &o, 1514).unwrap();
    let mut out = vec![0u8; 2048];
    let mut cut = Vec::new();
    while let Some(n) = again.next_segment(&mut out) {
        cut.push(out[..n.unwrap()].to_vec());
    }
    assert_eq!(
        cut, received,
        "v6 {v6}, {len} bytes in {gso_size}-byte datagrams"
    );
}

#[test]
fn a_uso_send_received_coalesced_merges_back_and_cuts_again_into_the_same_datagrams() {
    for v6 in [false, true] {
        merges_exactly(v6, 36_300, 1200);
        merges_exactly(v6, 2_400, 1200);
        merges_exactly(v6, 2_401, 1200);
    }
}

#[test]
fn datagrams_that_would_not_come_back_the_same_are_left_alone() {
    let (buf, segment) = gro_buffer(false, 6_000, 1200);
    // Inner offsets in the second datagram: VXLAN 8, Ethernet 14, IPv4 20, UDP 8.
    let ip = segment + 8 + 14;
    let udp = ip + 20;
    let corruptions: [(usize, u8); 5] = [
        (udp + 8 + 30, 0x55), // a payload byte: the checksum fails
        (ip + 5, 0x02),       // an IPv4 ID out of order
        (udp + 1, 0x01),      // another destination port
        (ip + 8, 0x01),       // another TTL
        (ip + 16, 0x01),      // another destination address
    ];
    for (at, bits) in corruptions {
        let mut bad = buf.clone();
        bad[at] ^= bits;
        let copy = bad.clone();
        assert_eq!(
            coalesce(&mut bad, segment, &rules(), MergeKinds::ALL),
            None,
            "byte {at}"
        );
        assert_eq!(bad, copy, "untouched when not merged");
    }
    // A datagram without a checksum (zero, allowed over IPv4) would come out with one.
    let mut no_sum = buf.clone();
    no_sum[udp + 6..udp + 8].fill(0);
    assert_eq!(
        coalesce(&mut no_sum, segment, &rules(), MergeKinds::ALL),
        None
    );
    // One datagram alone is not merged.
    let mut one = buf[..segment].to_vec();
    assert_eq!(coalesce(&mut one, segment, &rules(), MergeKinds::ALL), None);
}

#[test]
fn only_kinds_every_destination_takes_whole_are_merged() {
    let (buf, segment) = gro_buffer(false, 6_000, 1200);
    let no_uso = MergeKinds::taken_by(&weft_switch::PortCaps {
        uso: false,
        ..weft_switch::PortCaps::full_offload(1500)
    });
    assert_eq!((no_uso.tcp4, no_uso.tcp6, no_uso.udp), (true, true, false));
    let mut kept = buf.clone();
    assert_eq!(coalesce(&mut kept, segment, &rules(), no_uso), None);
    assert_eq!(
        kept, buf,
        "left as received, for the switch to pass datagram by datagram"
    );
    let mut merged = buf.clone();
    assert!(coalesce(&mut merged, segment, &rules(), MergeKinds::ALL).is_some());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_uso_send_merges_back_exactly(
        v6 in any::<bool>(),
        len in 1usize..40_000,
        gso_size in 200u16..1300,
    ) {
        // Only sends of two datagrams or more are merged.
        prop_assume!(len > usize::from(gso_size));
        merges_exactly(v6, len, gso_size);
    }

    #[test]
    fn hostile_bytes_in_a_coalesced_buffer_never_panic_and_merge_only_exactly(
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
    ) {
        let (mut buf, segment) = gro_buffer(false, 5_000, 1000);
        for (at, value) in flips {
            let at = at % buf.len();
            buf[at] = value;
        }
        let received = inner_datagrams(&buf, segment);
        if let Some(m) = coalesce(&mut buf, segment, &rules(), MergeKinds::ALL) {
            // Whatever was merged still cuts into exactly what came in.
            let merged = &buf[m.start..m.start + m.len];
            let mut again = Segmenter::new(merged, &m.offload, 1514).unwrap();
            let mut out = vec![0u8; 2048];
            let mut cut = Vec::new();
            while let Some(n) = again.next_segment(&mut out) {
                cut.push(out[..n.unwrap()].to_vec());
            }
            prop_assert_eq!(cut, received);
        }
    }
}
