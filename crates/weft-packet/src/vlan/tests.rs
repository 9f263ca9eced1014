use super::*;
use proptest::prelude::*;

const DST: [u8; 6] = [0x52, 0x54, 0, 0, 0, 1];
const SRC: [u8; 6] = [0x52, 0x54, 0, 0, 0, 2];

/// Addresses, then `tags`, then `ethertype`, then a 46-byte payload.
fn frame(tags: &[VlanTag], ethertype: u16) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&DST);
    f.extend_from_slice(&SRC);
    for t in tags {
        f.extend_from_slice(&t.to_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(&[0xab; 46]);
    f
}

fn tag(tpid: u16, pcp: u8, dei: bool, vid: u16) -> VlanTag {
    VlanTag {
        tpid,
        tci: VlanTci::new(pcp, dei, vid).unwrap(),
    }
}

#[test]
fn tci_packs_pcp_dei_vid_like_the_standard() {
    let tci = VlanTci::new(5, true, 0x123).unwrap();
    assert_eq!(tci.to_bits(), (5 << 13) | 0x1000 | 0x123);
    assert_eq!((tci.pcp(), tci.dei(), tci.vid()), (5, true, 0x123));
    assert_eq!(tci.with_vid(7).unwrap().to_bits(), (5 << 13) | 0x1000 | 7);
    assert_eq!(VlanTci::from_bits(0xffff).vid(), 4095);
    assert_eq!(VlanTci::from_bits(0xffff).pcp(), 7);
}

#[test]
fn tci_out_of_range_values_are_rejected() {
    assert_eq!(VlanTci::new(8, false, 1), None);
    assert_eq!(VlanTci::new(0, false, 4096), None);
    assert_eq!(VlanTci::default().with_vid(0x1000), None);
}

#[test]
fn untagged_frame_has_no_tags_and_payload_at_14() {
    let f = frame(&[], 0x0800);
    let s = VlanStack::parse(&f).unwrap();
    assert_eq!((s.outer, s.inner, s.ethertype), (None, None, 0x0800));
    assert_eq!((s.tag_count(), s.payload_offset()), (0, 14));
}

#[test]
fn single_ctag_is_read() {
    let t = tag(tpid::CTAG, 3, false, 100);
    let s = VlanStack::parse(&frame(&[t], 0x86dd)).unwrap();
    assert_eq!((s.outer, s.inner, s.ethertype), (Some(t), None, 0x86dd));
    assert_eq!(s.payload_offset(), 18);
}

#[test]
fn qinq_with_stag_or_legacy_outer_is_read() {
    for outer_tpid in [tpid::STAG, tpid::QINQ_LEGACY, tpid::CTAG] {
        let outer = tag(outer_tpid, 1, true, 4000);
        let inner = tag(tpid::CTAG, 0, false, 7);
        let s = VlanStack::parse(&frame(&[outer, inner], 0x0806)).unwrap();
        assert_eq!(
            (s.outer, s.inner, s.ethertype),
            (Some(outer), Some(inner), 0x0806)
        );
        assert_eq!((s.tag_count(), s.payload_offset()), (2, 22));
    }
}

#[test]
fn third_tag_is_reported_as_unsupported() {
    for third in [tpid::CTAG, tpid::STAG, tpid::QINQ_LEGACY] {
        let f = frame(
            &[tag(tpid::STAG, 0, false, 1), tag(tpid::CTAG, 0, false, 2)],
            third,
        );
        assert_eq!(
            VlanStack::parse(&f),
            Err(ParseError::Unsupported),
            "{third:#x}"
        );
    }
}

#[test]
fn inner_stag_is_unsupported() {
    for inner_tpid in [tpid::STAG, tpid::QINQ_LEGACY] {
        let f = frame(
            &[tag(tpid::STAG, 0, false, 1), tag(inner_tpid, 0, false, 2)],
            0x0800,
        );
        assert_eq!(VlanStack::parse(&f), Err(ParseError::Unsupported));
    }
}

#[test]
fn every_truncation_of_a_qinq_header_is_an_error() {
    let f = frame(
        &[tag(tpid::STAG, 0, false, 1), tag(tpid::CTAG, 0, false, 2)],
        0x0800,
    );
    for len in 0..22 {
        let needed = match len {
            0..14 => 14,
            14..18 => 18,
            _ => 22,
        };
        assert_eq!(
            VlanStack::parse(&f[..len]),
            Err(ParseError::truncated(needed, len)),
            "len {len}"
        );
    }
    assert!(VlanStack::parse(&f[..22]).is_ok());
}

#[test]
fn header_view_short_buffer_is_truncated_error() {
    for len in 0..HEADER_LEN {
        let buf = vec![0u8; len];
        assert_eq!(
            VlanHeader::new_checked(&buf[..]).unwrap_err(),
            ParseError::truncated(HEADER_LEN, len)
        );
    }
}

#[test]
fn header_view_fields_read_and_write_back() {
    let mut buf = [0u8; 10];
    let mut h = VlanHeader::new_checked(&mut buf[..]).unwrap();
    h.set_tci(VlanTci::new(6, false, 42).unwrap());
    h.set_ethertype(0x0800);
    h.payload_mut()[0] = 0x45;
    assert_eq!(
        (h.pcp(), h.dei(), h.vid(), h.ethertype()),
        (6, false, 42, 0x0800)
    );
    assert_eq!(h.payload().len(), 6);
    assert_eq!(buf[..5], [0xc0, 42, 0x08, 0x00, 0x45]);
}

#[test]
fn write_tag_writes_tpid_then_tci_and_rejects_short_buffers() {
    let mut buf = [0u8; 6];
    write_tag(&mut buf, tag(tpid::STAG, 7, true, 0xabc)).unwrap();
    assert_eq!(buf, [0x88, 0xa8, 0xfa, 0xbc, 0, 0]);
    assert_eq!(
        write_tag(&mut buf[..3], tag(tpid::CTAG, 0, false, 1)),
        Err(ParseError::truncated(4, 3))
    );
}

#[test]
fn etherparse_single_and_double_tagged_frames_parse_alike() {
    use etherparse::PacketBuilder;
    let mut single = Vec::new();
    PacketBuilder::ethernet2(SRC, DST)
        .single_vlan(0x123.try_into().unwrap())
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .udp(1000, 2000)
        .write(&mut single, &[1, 2, 3])
        .unwrap();
    let s = VlanStack::parse(&single).unwrap();
    assert_eq!(
        s.outer,
        Some(VlanTag {
            tpid: tpid::CTAG,
            tci: VlanTci::from_bits(0x123)
        })
    );
    assert_eq!(
        (s.inner, s.ethertype, s.payload_offset()),
        (None, 0x0800, 18)
    );

    let mut double = Vec::new();
    PacketBuilder::ethernet2(SRC, DST)
        .double_vlan(0x456.try_into().unwrap(), 0x789.try_into().unwrap())
        .ipv6([1; 16], [2; 16], 64)
        .tcp(1, 2, 3, 4)
        .write(&mut double, &[])
        .unwrap();
    let s = VlanStack::parse(&double).unwrap();
    assert_eq!(
        s.outer.map(|t| (t.tpid, t.tci.vid())),
        Some((tpid::STAG, 0x456))
    );
    assert_eq!(
        s.inner.map(|t| (t.tpid, t.tci.vid())),
        Some((tpid::CTAG, 0x789))
    );
    assert_eq!((s.ethertype, s.payload_offset()), (0x86dd, 22));
}

proptest! {
    #[test]
    fn tci_fields_round_trip(pcp in 0u8..8, dei: bool, vid in 0u16..4096) {
        let tci = VlanTci::new(pcp, dei, vid).unwrap();
        prop_assert_eq!((tci.pcp(), tci.dei(), tci.vid()), (pcp, dei, vid));
        prop_assert_eq!(VlanTci::from_bits(tci.to_bits()), tci);
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_header_view(data in proptest::collection::vec(any::<u8>(), 0..16)) {
        if let Ok(h) = VlanHeader::new_checked(&data[..]) {
            let _ = (h.tci(), h.pcp(), h.dei(), h.vid(), h.ethertype(), h.payload());
        }
    }

    #[test]
    fn arbitrary_frames_parse_or_error_with_payload_in_bounds(
        data in proptest::collection::vec(
            prop_oneof![Just(0x81u8), Just(0x00), Just(0x88), Just(0xa8), any::<u8>()], 0..40),
    ) {
        if let Ok(s) = VlanStack::parse(&data) {
            prop_assert!(s.payload_offset() <= data.len());
            prop_assert!(!is_outer_tpid(s.ethertype));
            prop_assert!(s.inner.is_none() || s.outer.is_some());
        }
    }
}
