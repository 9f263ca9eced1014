//! The flow loop reads a packet's key from the one before when their `ipv4_flow_words`
//! are equal: pins that such frames always read to the same key, meta and drop.

use proptest::prelude::*;
use weft_packet::OffloadInfo;

use super::*;
use crate::switch::proptests::{build_frame, packet_spec};
use crate::vlan::PortVlanMode;

type Read = (
    Result<FlowKey, (FlowKey, DropReason)>,
    Option<(u16, u16, usize)>,
);

/// What `read_key` makes of `frame` on a plain port, with the meta it wrote.
fn read(frame: &[u8]) -> Read {
    let mode = PortVlanMode::plain();
    let ingress = PortIngress::new(&mode);
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

proptest! {
    #[test]
    fn frames_with_equal_flow_words_read_to_the_same_key(
        spec in packet_spec(),
        id in any::<u32>(),
        edits in prop::collection::vec((0usize..64, any::<u8>()), 1..4),
        cut in prop::option::weighted(0.2, 40usize..64),
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
        let (Some(a), Some(b)) = (ipv4_flow_words(&frame), ipv4_flow_words(&other)) else {
            return Ok(());
        };
        if a == b {
            prop_assert_eq!(read(&frame), read(&other));
        }
    }

    #[test]
    fn the_flow_words_leave_out_only_the_bytes_no_key_depends_on(
        spec in packet_spec(),
        at in 0usize..40,
        byte in any::<u8>(),
    ) {
        let frame = build_frame(&spec, 0);
        let mut other = frame.clone();
        let Some(b) = other.get_mut(at) else {
            return Ok(());
        };
        *b = byte;
        if let (Some(a), Some(b)) = (ipv4_flow_words(&frame), ipv4_flow_words(&other)) {
            let ignored = matches!(at, 18 | 19 | 22 | 24 | 25 | 38 | 39);
            prop_assert_eq!(a == b, ignored || frame[at] == byte, "byte {}", at);
        }
    }
}
