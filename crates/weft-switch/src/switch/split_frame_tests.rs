//! Frames a port lends as a head in weft's memory and a tail in shared memory (a guest's
//! buffer): classified from the head, delivered whole — as they came, with a VLAN tag
//! pushed, completed in the slow path — and captured whole.

use std::sync::Arc;

use vm_memory::VolatileSlice;
use weft_packet::{MacAddr, OffloadInfo};

use super::*;
use crate::capture::{CaptureBuffer, CaptureDirection};
use crate::memory_port::memory_port;
use crate::port::{FrameHandle, PortCaps, PortRx, RxBatch, RxDesc, RxFrame, SharedTail};
use crate::types::VlanId;
use crate::vlan::PortVlanMode;

const T0: Timestamp = Timestamp(1_000_000_000);
/// Bytes of each frame the port holds in its own memory.
const HEAD: usize = 40;

/// A port receiving, once, frames split after [`HEAD`] bytes: each tail lent from memory
/// leaked for the test (as a guest's mapping outlives the batch).
struct SplitRx {
    frames: Vec<(Vec<u8>, Vec<u8>, OffloadInfo)>,
    given: bool,
}

impl SplitRx {
    fn new(frames: &[(Vec<u8>, OffloadInfo)]) -> Self {
        let frames = frames
            .iter()
            .map(|(f, offload)| (f[..HEAD].to_vec(), f[HEAD..].to_vec(), *offload))
            .collect();
        SplitRx {
            frames,
            given: false,
        }
    }
}

impl PortRx for SplitRx {
    fn receive(&mut self, batch: &mut RxBatch) {
        if std::mem::replace(&mut self.given, true) {
            return;
        }
        for (i, (_, _, offload)) in self.frames.iter().enumerate() {
            let desc = RxDesc {
                handle: FrameHandle(u32::try_from(i).unwrap()),
                offload: *offload,
            };
            batch.push(desc).unwrap();
        }
    }
    fn frame(&self, handle: FrameHandle) -> RxFrame<'_> {
        self.frames
            .get(handle.0 as usize)
            .map_or_else(RxFrame::default, |(head, tail, _)| {
                let shared: &'static mut [u8] = Box::leak(tail.clone().into_boxed_slice());
                RxFrame::split(head, SharedTail::new(VolatileSlice::from(shared)))
            })
    }
    fn finish(&mut self) {}
}

/// A captured frame: its length and its bytes.
type Captured = (usize, Vec<u8>);

fn mac(last: u8) -> MacAddr {
    MacAddr([0x02, 0, 0, 0, 0, last])
}

/// A 300-byte frame from `mac(1)` to `mac(2)` with numbered payload.
fn frame() -> Vec<u8> {
    let mut f: Vec<u8> = (0..300u16)
        .map(|i| u8::try_from(i % 251).unwrap())
        .collect();
    f[..6].copy_from_slice(&mac(2).0);
    f[6..12].copy_from_slice(&mac(1).0);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f
}

/// A switch with the split port (`in`) and a memory port (`out`, the station the first
/// frame goes to, in VLAN `vlan`) whose VLAN mode is `out_vlan`; returns what `out` was sent and what was captured leaving it.
fn switch_one(
    frames: &[(Vec<u8>, OffloadInfo)],
    out_caps: PortCaps,
    out_vlan: PortVlanMode,
    vlan: VlanId,
    with_rules: bool,
) -> (Vec<(Vec<u8>, OffloadInfo)>, Vec<Captured>) {
    let mut sw = Switch::new("br0", SwitchConfig::default()).unwrap();
    if with_rules {
        let normal = FlowRule::new(
            0,
            crate::flow_match::FlowMatch::ANY,
            crate::flow_table::ActionList::single(crate::flow_table::Action::Normal),
        );
        sw.add_rule(normal).unwrap();
    }
    let (_, out_tx, out) = memory_port(out_caps, 64);
    let out_options = PortOptions {
        vlan: out_vlan,
        ..PortOptions::default()
    };
    let out_id = sw
        .add_port("out", None, Box::new(out_tx), out_options)
        .unwrap();
    let (dst, src) = (&frames[0].0[..6], &frames[0].0[6..12]);
    let (dst, src) = (
        MacAddr::from_bytes(dst).unwrap(),
        MacAddr::from_bytes(src).unwrap(),
    );
    sw.add_static_mac(vlan, dst, out_id).unwrap();
    let capture = Arc::new(CaptureBuffer::new(8, 65_535));
    sw.start_capture(out_id, CaptureDirection::Out, Arc::clone(&capture))
        .unwrap();
    let rx = SplitRx::new(frames);
    let (_, in_tx, _) = memory_port(PortCaps::plain(1500), 64);
    let in_id = sw
        .add_port(
            "in",
            Some(Box::new(rx)),
            Box::new(in_tx),
            PortOptions::default(),
        )
        .unwrap();
    assert_eq!(sw.poll(in_id, T0), frames.len());
    assert_eq!(
        sw.fdb().lookup(vlan, src, T0),
        Some(in_id),
        "learned from the head"
    );
    let mut captured = Vec::new();
    capture.drain(8, |c| captured.push((c.orig_len, c.data.to_vec())));
    (out.take_sent(), captured)
}

#[test]
fn a_split_frame_is_classified_from_its_head_and_delivered_and_captured_whole() {
    for with_rules in [false, true] {
        let f = frame();
        let frames = [(f.clone(), OffloadInfo::default())];
        let (sent, captured) = switch_one(
            &frames,
            PortCaps::plain(1500),
            PortVlanMode::plain(),
            0,
            with_rules,
        );
        assert_eq!(
            sent,
            vec![(f.clone(), OffloadInfo::default())],
            "rules: {with_rules}"
        );
        assert_eq!(captured, vec![(f.len(), f.clone())]);
    }
}

#[test]
fn a_vlan_tag_popped_from_a_split_frame_keeps_its_tail() {
    // Tagged VLAN 7 in on a plain port, out of an access port of VLAN 7: the head is
    // rewritten (the tag taken out), the rest follows from the port's head and tail.
    let mut f = frame();
    f.splice(12..12, [0x81, 0x00, 0x00, 0x07]);
    f.truncate(300);
    let frames = [(f.clone(), OffloadInfo::default())];
    let access = PortVlanMode::access(7).unwrap();
    let (sent, captured) = switch_one(&frames, PortCaps::plain(1500), access, 7, false);
    let mut untagged = f[..12].to_vec();
    untagged.extend_from_slice(&f[16..]);
    assert_eq!(sent, vec![(untagged.clone(), OffloadInfo::default())]);
    assert_eq!(captured, vec![(untagged.len(), untagged)]);
}

#[test]
fn a_split_super_frame_is_segmented_from_a_whole_copy() {
    use super::offload_tests::{check_segments, tcp_superframe, Ip, MAX_UNTAGGED_1500, MSS4};
    let (f, info) = tcp_superframe(Ip::V4);
    let frames = [(f.clone(), info)];
    let (sent, _) = switch_one(
        &frames,
        PortCaps::plain(1500),
        PortVlanMode::plain(),
        0,
        false,
    );
    assert_eq!(sent.len(), 14);
    check_segments(&f, &sent, usize::from(MSS4), MAX_UNTAGGED_1500, &[]);
}
