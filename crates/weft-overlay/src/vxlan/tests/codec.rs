use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr};

use proptest::prelude::*;
use weft_packet::{MacAddr, Vni};

use crate::error::OverlayError;
use crate::vxlan::decap::{decapsulate, DecapRules};
use crate::vxlan::encap::{flow_hash, source_port, write_header, ENCAP_LEN, SOURCE_PORT_MIN};
use crate::vxlan::remote_fdb::{LearnOutcome, RemoteFdb};
use crate::vxlan::stats::DecapDrop;

fn vni(v: u32) -> Vni {
    Vni::new(v).unwrap()
}

fn rules() -> DecapRules {
    DecapRules {
        vni: vni(42),
        strict_reserved: false,
        max_frame_len: 1522,
    }
}

/// An Ethernet/IPv4/UDP frame from `sport` to `dport`.
fn inner_udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let builder = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .udp(sport, dport);
    let mut out = Vec::new();
    builder.write(&mut out, payload).unwrap();
    out
}

fn datagram(vni_value: u32, inner: &[u8]) -> Vec<u8> {
    let header = write_header(vni(vni_value), 50_000, 4789, inner.len()).unwrap();
    let mut d = header[8..].to_vec();
    d.extend_from_slice(inner);
    d
}

#[test]
fn encapsulation_header_parses_as_udp_to_4789_with_vxlan_and_the_inner_frame() {
    let inner = inner_udp(1234, 80, b"hello");
    let header = write_header(vni(0x12_3456), 51_000, 4789, inner.len()).unwrap();
    let mut packet = header.to_vec();
    packet.extend_from_slice(&inner);
    let (udp, rest) = etherparse::UdpHeader::from_slice(&packet).unwrap();
    assert_eq!(udp.source_port, 51_000);
    assert_eq!(udp.destination_port, 4789);
    assert_eq!(usize::from(udp.length), packet.len());
    assert_eq!(
        udp.checksum, 0,
        "zero: IPv4 allows it, the kernel fills it for IPv6"
    );
    assert_eq!(&rest[..8], &[0x08, 0, 0, 0, 0x12, 0x34, 0x56, 0]);
    let parsed = etherparse::SlicedPacket::from_ethernet(&rest[8..]).unwrap();
    match parsed.transport {
        Some(etherparse::TransportSlice::Udp(u)) => {
            assert_eq!((u.source_port(), u.destination_port()), (1234, 80));
            assert_eq!(u.payload(), b"hello");
        }
        other => panic!("inner transport {other:?}"),
    }
}

#[test]
fn encapsulation_matches_a_full_ipv4_packet_built_by_etherparse() {
    let inner = inner_udp(1, 2, &[7; 100]);
    let mut payload = write_header(vni(42), 60_000, 4789, inner.len()).unwrap()[8..].to_vec();
    payload.extend_from_slice(&inner);
    let mut reference = Vec::new();
    etherparse::PacketBuilder::ipv4([192, 168, 0, 1], [192, 168, 0, 2], 64)
        .udp(60_000, 4789)
        .write(&mut reference, &payload)
        .unwrap();
    let ours = write_header(vni(42), 60_000, 4789, inner.len()).unwrap();
    // Everything but the checksum (the reference computes one) is the same.
    assert_eq!(&reference[20..26], &ours[..6]);
    assert_eq!(&reference[28..], &[&ours[8..], &inner[..]].concat()[..]);
}

#[test]
fn a_datagram_over_65535_bytes_is_refused() {
    assert!(write_header(vni(1), 50_000, 4789, 65_535 - ENCAP_LEN).is_some());
    assert!(write_header(vni(1), 50_000, 4789, 65_535 - ENCAP_LEN + 1).is_none());
}

#[test]
fn source_port_is_stable_per_flow_and_spreads_across_flows() {
    let a = inner_udp(1000, 80, b"x");
    let b = inner_udp(1000, 80, b"a different payload");
    assert_eq!(
        flow_hash(&a),
        flow_hash(&b),
        "payload is not part of the flow"
    );
    assert_eq!(source_port(flow_hash(&a)), source_port(flow_hash(&b)));
    let ports: HashSet<u16> = (0..1000u16)
        .map(|sport| source_port(flow_hash(&inner_udp(1000 + sport, 80, b"x"))))
        .collect();
    assert!(ports.len() > 900, "only {} distinct ports", ports.len());
    assert!(ports.iter().all(|&p| p >= SOURCE_PORT_MIN));
}

#[test]
fn source_ports_cover_the_dynamic_range_evenly() {
    let mut buckets = [0u32; 16];
    for sport in 0..16_000u16 {
        let p = source_port(flow_hash(&inner_udp(sport, 443, b"")));
        buckets[usize::from((p - SOURCE_PORT_MIN) / 1024)] += 1;
    }
    assert!(
        buckets.iter().all(|&n| (700..1300).contains(&n)),
        "{buckets:?}"
    );
}

#[test]
fn a_valid_datagram_yields_the_inner_frame() {
    let inner = inner_udp(1, 2, b"data");
    let d = datagram(42, &inner);
    let got = decapsulate(&d, false, &rules()).unwrap();
    assert_eq!(&d[got.inner], &inner[..]);
    assert_eq!(got.inner_src, MacAddr([2, 0, 0, 0, 0, 1]));
}

#[test]
fn every_hostile_datagram_is_dropped_with_its_reason() {
    let inner = inner_udp(1, 2, b"data");
    let good = datagram(42, &inner);
    let mut strict = rules();
    strict.strict_reserved = true;
    let with_byte = |i: usize, v: u8| {
        let mut d = good.clone();
        d[i] = v;
        d
    };
    let cases: Vec<(&str, Vec<u8>, bool, DecapRules, DecapDrop)> = vec![
        ("empty", vec![], false, rules(), DecapDrop::Truncated),
        (
            "7 bytes",
            good[..7].to_vec(),
            false,
            rules(),
            DecapDrop::Truncated,
        ),
        (
            "no I flag",
            with_byte(0, 0),
            false,
            rules(),
            DecapDrop::BadFlags,
        ),
        (
            "reserved flag, strict",
            with_byte(0, 0x88),
            false,
            strict,
            DecapDrop::ReservedBits,
        ),
        (
            "reserved byte 7, strict",
            with_byte(7, 1),
            false,
            strict,
            DecapDrop::ReservedBits,
        ),
        (
            "other VNI",
            datagram(43, &inner),
            false,
            rules(),
            DecapDrop::UnknownVni,
        ),
        (
            "header only",
            good[..8].to_vec(),
            false,
            rules(),
            DecapDrop::InnerTooShort,
        ),
        (
            "13-byte inner",
            good[..8 + 13].to_vec(),
            false,
            rules(),
            DecapDrop::InnerTooShort,
        ),
        (
            "kernel truncated",
            good.clone(),
            true,
            rules(),
            DecapDrop::InnerTooBig,
        ),
        (
            "inner over MTU",
            datagram(42, &inner_udp(1, 2, &[0; 1600])),
            false,
            rules(),
            DecapDrop::InnerTooBig,
        ),
        (
            "multicast source",
            with_byte(8 + 6, 0x01),
            false,
            rules(),
            DecapDrop::InnerBadSource,
        ),
        (
            "zero source",
            {
                let mut d = good.clone();
                d[14..20].fill(0);
                d
            },
            false,
            rules(),
            DecapDrop::InnerBadSource,
        ),
    ];
    for (name, d, truncated, r, want) in cases {
        assert_eq!(decapsulate(&d, truncated, &r), Err(want), "{name}");
    }
    // Not strict: reserved bits are ignored (RFC 7348 §5).
    assert!(decapsulate(&with_byte(7, 1), false, &rules()).is_ok());
    assert!(decapsulate(&with_byte(0, 0x88), false, &rules()).is_ok());
}

#[test]
fn static_fdb_is_bounded() {
    let ip = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    let mut fdb = RemoteFdb::new(2, 0);
    fdb.insert_static(MacAddr([2, 0, 0, 0, 0, 1]), ip).unwrap();
    fdb.insert_static(MacAddr([2, 0, 0, 0, 0, 2]), ip).unwrap();
    assert!(matches!(
        fdb.insert_static(MacAddr([2, 0, 0, 0, 0, 3]), ip),
        Err(OverlayError::FdbFull(2))
    ));
    // Replacing an existing entry is not growth.
    fdb.insert_static(MacAddr([2, 0, 0, 0, 0, 2]), ip).unwrap();
    assert_eq!(fdb.len(), 2);
}

#[test]
fn learning_is_bounded_and_never_overrides_static_entries() {
    let (a, b) = (
        IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
        IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)),
    );
    let mut fdb = RemoteFdb::new(1, 2);
    let pinned = MacAddr([2, 0, 0, 0, 0, 9]);
    fdb.insert_static(pinned, a).unwrap();
    assert_eq!(fdb.learn(pinned, b), LearnOutcome::Unchanged);
    assert_eq!(fdb.lookup(pinned).unwrap().endpoint, a);
    assert_eq!(
        fdb.learn(MacAddr([2, 0, 0, 0, 0, 1]), a),
        LearnOutcome::Learned
    );
    assert_eq!(
        fdb.learn(MacAddr([2, 0, 0, 0, 0, 2]), a),
        LearnOutcome::Learned
    );
    assert_eq!(
        fdb.learn(MacAddr([2, 0, 0, 0, 0, 3]), a),
        LearnOutcome::Full
    );
    assert_eq!(fdb.learned_len(), 2);
    // A learned MAC moves; broadcast and multicast are never learned.
    assert_eq!(
        fdb.learn(MacAddr([2, 0, 0, 0, 0, 1]), b),
        LearnOutcome::Learned
    );
    assert_eq!(fdb.lookup(MacAddr([2, 0, 0, 0, 0, 1])).unwrap().endpoint, b);
    assert_eq!(fdb.learn(MacAddr::BROADCAST, a), LearnOutcome::Unchanged);
    assert!(fdb.lookup(MacAddr::BROADCAST).is_none());
    assert!(fdb.remove(MacAddr([2, 0, 0, 0, 0, 1])));
    assert_eq!(
        fdb.learn(MacAddr([2, 0, 0, 0, 0, 3]), a),
        LearnOutcome::Learned
    );
    assert_eq!((fdb.learned_len(), fdb.static_len()), (2, 1));
}

proptest! {
    #[test]
    fn arbitrary_datagrams_never_panic_and_accepted_frames_are_in_bounds(
        data in proptest::collection::vec(any::<u8>(), 0..1600),
        truncated in any::<bool>(),
        strict in any::<bool>(),
    ) {
        let mut r = rules();
        r.strict_reserved = strict;
        if let Ok(d) = decapsulate(&data, truncated, &r) {
            prop_assert!(d.inner.end <= data.len());
            prop_assert!(d.inner.len() >= 14 && d.inner.len() <= r.max_frame_len);
            prop_assert_eq!(u32::from_be_bytes([0, data[4], data[5], data[6]]), 42);
        }
    }

    #[test]
    fn fuzz_entry_never_panics(data in proptest::collection::vec(any::<u8>(), 0..1600)) {
        let _ = crate::vxlan::fuzz_entry::decapsulate(&data);
    }

    #[test]
    fn valid_vxlan_around_any_frame_round_trips(
        payload in proptest::collection::vec(any::<u8>(), 0..1400),
        v in 0u32..=0xff_ffff,
    ) {
        let inner = inner_udp(5, 6, &payload);
        let d = datagram(v, &inner);
        let mut r = rules();
        r.vni = vni(v);
        let got = decapsulate(&d, false, &r).unwrap();
        prop_assert_eq!(&d[got.inner], &inner[..]);
    }

    #[test]
    fn learned_entries_never_exceed_the_bound(
        macs in proptest::collection::vec((any::<[u8; 6]>(), 0u8..4), 0..200),
    ) {
        let mut fdb = RemoteFdb::new(0, 16);
        for (mac, host) in macs {
            fdb.learn(MacAddr(mac), IpAddr::V4(Ipv4Addr::new(192, 0, 2, host)));
            prop_assert!(fdb.learned_len() <= 16);
            prop_assert_eq!(fdb.len(), fdb.learned_len());
        }
    }
}
