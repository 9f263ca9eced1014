//! Frames a port makes itself (`RxBatch::push_own`, an overlay's ICMP answers): forwarded,
//! but never a lesson for the FDB, so that a guest cannot plant an address on the port.

use weft_packet::MacAddr;

use super::*;
use crate::flow_match::FlowMatch;
use crate::flow_table::{Action, ActionList};
use crate::memory_port::memory_port;
use crate::port::{FrameHandle, PortCaps, PortRx, RxBatch, RxDesc};

const T0: Timestamp = Timestamp(1_000_000_000);

fn mac(last: u8) -> MacAddr {
    MacAddr([0x02, 0, 0, 0, 0, last])
}

fn frame(dst: MacAddr, src: MacAddr) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&dst.0);
    f[6..12].copy_from_slice(&src.0);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f
}

/// A port that receives, once, some frames of its own then some from its link.
struct OwnThenReceived {
    own: Vec<Vec<u8>>,
    received: Vec<Vec<u8>>,
    given: bool,
}

impl PortRx for OwnThenReceived {
    fn receive(&mut self, batch: &mut RxBatch) {
        if std::mem::replace(&mut self.given, true) {
            return;
        }
        for i in 0..self.own.len() + self.received.len() {
            let desc = RxDesc {
                handle: FrameHandle(u32::try_from(i).unwrap()),
                offload: weft_packet::OffloadInfo::default(),
            };
            let pushed = if i < self.own.len() {
                batch.push_own(desc)
            } else {
                batch.push(desc)
            };
            pushed.unwrap();
        }
    }
    fn frame(&self, handle: FrameHandle) -> crate::port::RxFrame<'_> {
        let i = handle.0 as usize;
        crate::port::RxFrame::local(
            self.own
                .get(i)
                .or_else(|| self.received.get(i - self.own.len()))
                .map_or(&[][..], Vec::as_slice),
        )
    }
    fn finish(&mut self) {}
}

#[test]
fn a_ports_own_frames_are_forwarded_but_their_source_is_not_learned() {
    for with_rules in [false, true] {
        let mut sw = Switch::new("br0", SwitchConfig::default()).unwrap();
        if with_rules {
            sw.add_rule(FlowRule::new(
                0,
                FlowMatch::ANY,
                ActionList::single(Action::Normal),
            ))
            .unwrap();
        }
        let (host_rx, host_tx, host) = memory_port(PortCaps::plain(1500), 16);
        let host_id = sw
            .add_port(
                "host",
                Some(Box::new(host_rx)),
                Box::new(host_tx),
                PortOptions::default(),
            )
            .unwrap();
        // The host is known: the answer goes to it alone.
        assert!(host.inject(&frame(MacAddr::BROADCAST, mac(1))));
        sw.poll(host_id, T0);
        // The overlay's answer claims to come from mac(9), a station a guest named; the
        // frame after it is a real one from mac(7), with the same header as a second answer
        // would have, so that the shortcut for repeated headers is covered too.
        let overlay_rx = OwnThenReceived {
            own: vec![frame(mac(1), mac(9)), frame(mac(1), mac(8))],
            received: vec![frame(mac(1), mac(8)), frame(mac(1), mac(7))],
            given: false,
        };
        let (_, overlay_tx, _) = memory_port(PortCaps::plain(1500), 16);
        let overlay = sw
            .add_port(
                "overlay",
                Some(Box::new(overlay_rx)),
                Box::new(overlay_tx),
                PortOptions::default(),
            )
            .unwrap();
        sw.poll(overlay, T0);
        let sent = host.take_sent();
        assert_eq!(
            sent.len(),
            4,
            "every frame is forwarded (rules: {with_rules})"
        );
        assert_eq!(sw.fdb().lookup(0, mac(9), T0), None, "rules: {with_rules}");
        assert_eq!(
            sw.fdb().lookup(0, mac(8), T0),
            Some(overlay),
            "received, so learned"
        );
        assert_eq!(sw.fdb().lookup(0, mac(7), T0), Some(overlay));
    }
}

#[test]
fn own_frames_come_before_received_ones() {
    let desc = RxDesc::default();
    let mut batch = RxBatch::new(4);
    batch.push_own(desc).unwrap();
    batch.push(desc).unwrap();
    assert!(batch.push_own(desc).is_err(), "after a received frame");
    assert_eq!(batch.own_frames(), 1);
    batch.clear();
    assert_eq!(batch.own_frames(), 0);
    for _ in 0..4 {
        batch.push_own(desc).unwrap();
    }
    assert!(batch.push_own(desc).is_err(), "full");
    assert_eq!(batch.own_frames(), 4);
}
