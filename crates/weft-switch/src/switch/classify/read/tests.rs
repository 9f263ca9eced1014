//! The flow loop reads a packet's key from the one before when both have one `FlowLayout`
//! and equal flow words: pins that such frames always read to the same key, meta and drop,
//! on any port, and which bytes the words leave out.

use proptest::prelude::*;
use weft_packet::OffloadInfo;

use super::*;
use crate::switch::proptests::{build_frame, packet_spec, vlan_mode, L3Spec};
use crate::vlan::PortVlanMode;

type Read = (
    Result<FlowKey, (FlowKey, DropReason)>,
    Option<(u16, u16, usize)>,
);

/// What `read_key` makes of `frame` on a port in `mode`, with the meta it wrote.
fn read(frame: &[u8], mode: &PortVlanMode) -> Read {
    let ingress = PortIngress::new(mode);
    let mut meta = PacketMeta::default();
    let key = read_key(
        PortId(1),
        RxFrame::local(frame),
        OffloadInfo::default(),
        &ingress,
        &mut meta,
    );
    let meta = key
        .is_ok()
        .then(|| (meta.wire_tpid(), meta.wire_tci(), meta.l3_offset()));
    (key, meta)
}

/// Whether frames `a` and `b` have one layout and equal flow words; `None` when either has
/// no layout.
fn same_flow_words(a: &[u8], b: &[u8]) -> Option<bool> {
    let (la, lb) = (FlowLayout::of(a)?, FlowLayout::of(b)?);
    Some(la == lb && la.same_words(a, b))
}

/// The bits of byte `at` that the flow words keep for a frame of `spec`'s layout (`None`:
/// not a layout it reads).
fn kept_bits(tagged: bool, l3: &L3Spec, at: usize) -> Option<u8> {
    let ipv6 = match l3 {
        L3Spec::V4 { .. } => false,
        L3Spec::V6 { .. } => true,
        _ => return None,
    };
    let mask = keep_mask(if tagged { 18 } else { 14 }, if ipv6 { 6 } else { 4 });
    Some(mask.get(at / 8).map_or(0, |w| w.to_le_bytes()[at % 8]))
}

proptest! {
    #[test]
    fn frames_with_equal_flow_words_read_to_the_same_key(
        spec in packet_spec(),
        mode in vlan_mode(),
        id in any::<u32>(),
        edits in prop::collection::vec((0usize..80, any::<u8>()), 1..4),
        cut in prop::option::weighted(0.2, 30usize..80),
    ) {
        let frame = build_frame(&spec, id);
        let mut other = frame.clone();
        for (at, byte) in edits {
            if let Some(b) = other.get_mut(at) {
                *b = byte;
            }
        }
        let mut frame = frame;
        if let Some(len) = cut {
            // Both cut alike: equal lengths, headers that may run past the end.
            frame.truncate(len);
            other.truncate(len);
        }
        if same_flow_words(&frame, &other) == Some(true) {
            prop_assert_eq!(read(&frame, &mode), read(&other, &mode));
        }
    }

    #[test]
    fn changing_every_byte_the_flow_words_leave_out_changes_nothing_read(
        spec in packet_spec(),
        mode in vlan_mode(),
        values in prop::collection::vec(any::<u8>(), 128),
    ) {
        let frame = build_frame(&spec, 0);
        if FlowLayout::of(&frame).is_none() {
            return Ok(());
        }
        let mut other = frame.clone();
        for (at, (b, v)) in other.iter_mut().zip(&values).enumerate() {
            let keep = kept_bits(spec.tag.is_some(), &spec.l3, at).unwrap_or(0xff);
            *b = (*b & keep) | (v & !keep);
        }
        prop_assert_eq!(same_flow_words(&frame, &other), Some(true));
        prop_assert_eq!(read(&frame, &mode), read(&other, &mode));
    }

    #[test]
    fn the_flow_words_leave_out_only_the_bytes_no_key_depends_on(
        spec in packet_spec(),
        at in 0usize..64,
        byte in any::<u8>(),
    ) {
        let frame = build_frame(&spec, 0);
        let mut other = frame.clone();
        let Some(b) = other.get_mut(at) else {
            return Ok(());
        };
        *b = byte;
        let Some(same) = same_flow_words(&frame, &other) else {
            return Ok(());
        };
        let l3 = if spec.tag.is_some() { 18 } else { 14 };
        let (ipv6, end) = match spec.l3 {
            L3Spec::V6 { .. } => (true, l3 + 44),
            _ => (false, l3 + 24),
        };
        let left_out: u8 = match (ipv6, at.wrapping_sub(l3)) {
            _ if at >= end => 0xff,
            (false, 4 | 5 | 8 | 10 | 11) => 0xff,
            (true, 0) => 0x0f,
            (true, 1..=3 | 7) => 0xff,
            _ => 0,
        };
        prop_assert_eq!(same, (frame[at] ^ byte) & !left_out == 0, "byte {}", at);
    }
}

#[test]
fn frames_of_other_layouts_have_no_flow_layout() {
    use crate::switch::proptests::{L4Spec, PacketSpec};
    let v6 = |tag| PacketSpec {
        src: 0,
        dst: 1,
        tag,
        l3: L3Spec::V6 {
            src: 0,
            dst: 1,
            l4: L4Spec::Udp(0, 1),
        },
    };
    let plain = build_frame(&v6(None), 0);
    let tagged = build_frame(&v6(Some(10)), 0);
    assert_eq!(FlowLayout::of(&plain), Some(FlowLayout::Ipv6));
    assert_eq!(FlowLayout::of(&tagged), Some(FlowLayout::Ipv6Tagged));
    // A hop-by-hop header (next header 0), QinQ, an S-tag alone, and IPv4 with options.
    let mut hop_by_hop = plain.clone();
    hop_by_hop[14 + 6] = 0;
    let mut qinq = tagged.clone();
    qinq.splice(12..12, [0x81, 0x00, 0x00, 0x14]);
    let mut s_tag = tagged.clone();
    s_tag[12..14].copy_from_slice(&[0x88, 0xa8]);
    let v4 = PacketSpec {
        l3: L3Spec::V4 {
            src: 0,
            dst: 1,
            l4: L4Spec::Udp(0, 1),
        },
        ..v6(None)
    };
    let mut options = build_frame(&v4, 0);
    options[14] = 0x46;
    for frame in [&hop_by_hop, &qinq, &s_tag, &options] {
        assert_eq!(FlowLayout::of(frame), None);
    }
    // A head that ends before the L4 ports.
    assert_eq!(FlowLayout::of(&plain[..57]), None);
    assert_eq!(FlowLayout::of(&plain[..58]), Some(FlowLayout::Ipv6));
}
