//! Oversize frames through a switch (root, loopback sockets): the switch refuses them by the
//! port's real MTU, counts them, and hands them to the port's `too_big` hook, whose ICMP
//! answer comes back out of the receive half and is switched to the sender.

use std::sync::Arc;
use std::time::{Duration, Instant};

use weft_packet::OffloadInfo;
use weft_switch::memory_port::{memory_port, MemoryPortHandle};
use weft_switch::{
    DropReason, PortCaps, PortId, PortOptions, PortRx, PortTx, RxBatch, Switch, SwitchConfig,
    Timestamp, TxFrame,
};

use super::sockets::{can_run, config, lo, port};
use crate::{OverlayStats, VxlanPort};

const T0: Timestamp = Timestamp(1_000_000_000);

/// A 2042-byte IPv4 frame with DF from 10.0.0.1 (02::01) to 10.0.0.2 (02::02).
fn oversize_df_frame() -> Vec<u8> {
    super::offload::oversize(false, true, 2000)
}

/// The MTU an ICMP "fragmentation needed" frame (Ethernet + 20-byte IPv4) announces.
fn announced_mtu(answer: &[u8]) -> u16 {
    assert_eq!(answer[14 + 20], 3, "ICMP destination unreachable");
    u16::from_be_bytes([answer[14 + 20 + 6], answer[14 + 20 + 7]])
}

/// A switch with a memory port `host` (MTU 9000) and a VXLAN port of inner MTU 1450.
struct Rig {
    sw: Switch,
    host: PortId,
    host_handle: MemoryPortHandle,
    vxlan: PortId,
    stats: Arc<OverlayStats>,
}

impl Rig {
    fn new(local_port: u16, answer_too_big: bool) -> Rig {
        let mut c = config(lo(1), port(local_port), port(53)).remote(lo(2));
        c.mtu_from_underlay = false;
        c.answer_too_big = answer_too_big;
        let (rx, tx, stats) = VxlanPort::open(&c).unwrap().split();
        assert_eq!(tx.caps().mtu, 1450, "the real inner MTU");
        let mut sw = Switch::new("br0", SwitchConfig::default()).unwrap();
        let (host_rx, host_tx, host_handle) = memory_port(PortCaps::plain(9000), 16);
        let mut add = |name: &str, rx: Box<dyn PortRx>, tx: Box<dyn PortTx>| {
            sw.add_port(name, Some(rx), tx, PortOptions::default())
                .unwrap()
        };
        let host = add("host", Box::new(host_rx), Box::new(host_tx));
        let vxlan = add("vxlan", Box::new(rx), Box::new(tx));
        Rig {
            sw,
            host,
            host_handle,
            vxlan,
            stats,
        }
    }

    /// The host sends `frame`; the VXLAN port's switch counters after.
    fn send(&mut self, frame: &[u8]) -> weft_switch::PortCountersSnapshot {
        assert!(self.host_handle.inject(frame));
        self.sw.poll(self.host, T0);
        self.sw.port_counters(self.vxlan).unwrap().snapshot()
    }

    /// Polls the VXLAN port until the host got something (at most 2 s).
    fn back_at_host(&mut self) -> Vec<Vec<u8>> {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            self.sw.poll(self.vxlan, T0);
            let back = self.host_handle.take_sent();
            if !back.is_empty() || Instant::now() > deadline {
                return back.into_iter().map(|(f, _)| f).collect();
            }
        }
    }
}

#[test]
fn an_oversize_frame_given_to_the_hook_is_answered_through_the_receive_half_and_counted() {
    if !can_run(
        "an_oversize_frame_given_to_the_hook_is_answered_through_the_receive_half_and_counted",
    ) {
        return;
    }
    let mut c = config(lo(1), port(52), port(53)).remote(lo(2));
    c.mtu_from_underlay = false;
    let (mut rx, mut tx, stats) = VxlanPort::open(&c).unwrap().split();
    let big = oversize_df_frame();
    tx.too_big(&TxFrame::whole(&big, OffloadInfo::default()), 1450);
    let mut batch = RxBatch::new(64);
    rx.receive(&mut batch);
    assert_eq!(batch.len(), 1, "the answer comes out of the receive half");
    let answer = rx.frame(batch.descs()[0].handle).to_vec();
    rx.finish();
    assert_eq!(&answer[0..6], &big[6..12]);
    assert_eq!(announced_mtu(&answer), 1450, "the MTU the switch gave");
    let s = stats.snapshot();
    assert_eq!((s.too_big, s.too_big_answered, s.tx_datagrams), (1, 1, 0));
}

#[test]
fn an_oversize_frame_through_a_switch_is_refused_counted_and_answered_to_its_sender() {
    if !can_run("an_oversize_frame_through_a_switch_is_refused_counted_and_answered_to_its_sender")
    {
        return;
    }
    let mut rig = Rig::new(54, true);
    let big = oversize_df_frame();
    let refused = rig.send(&big);
    assert_eq!(
        (refused.drops(DropReason::FrameTooBig), refused.tx_packets),
        (1, 0)
    );
    // The answer enters the switch from the overlay and goes back to the sender's port.
    let back = rig.back_at_host();
    assert_eq!(back.len(), 1, "one answer");
    let answer = &back[0];
    assert_eq!((&answer[0..6], &answer[6..12]), (&big[6..12], &big[0..6]));
    assert_eq!(announced_mtu(answer), 1450);
    let s = rig.stats.snapshot();
    assert_eq!((s.too_big, s.too_big_answered, s.tx_datagrams), (1, 1, 0));
}

#[test]
fn without_answers_an_oversize_frame_is_only_the_switchs_counted_drop() {
    if !can_run("without_answers_an_oversize_frame_is_only_the_switchs_counted_drop") {
        return;
    }
    let mut rig = Rig::new(55, false);
    let refused = rig.send(&oversize_df_frame());
    assert_eq!(refused.drops(DropReason::FrameTooBig), 1);
    assert!(rig.back_at_host().is_empty(), "no answer");
    let s = rig.stats.snapshot();
    assert_eq!((s.too_big, s.tx_errors, s.tx_datagrams), (0, 0, 0));
}

#[test]
fn an_answer_does_not_teach_the_switch_its_spoofed_source_on_the_overlay_port() {
    if !can_run("an_answer_does_not_teach_the_switch_its_spoofed_source_on_the_overlay_port") {
        return;
    }
    let mut rig = Rig::new(56, true);
    // The sender names any destination (here one nobody has seen: the frame is flooded to
    // the overlay); the answer comes back from that address.
    let big = oversize_df_frame();
    let destination = weft_packet::MacAddr(big[0..6].try_into().unwrap());
    rig.send(&big);
    let back = rig.back_at_host();
    assert_eq!(back.len(), 1, "one answer");
    assert_eq!(
        &back[0][6..12],
        &destination.0,
        "from the destination's address"
    );
    assert_eq!(
        rig.sw.fdb().lookup(0, destination, T0),
        None,
        "the answer's source is not learned on the overlay port"
    );
}
