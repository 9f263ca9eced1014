//! Behaviour of a switch with in-memory ports.

use weft_packet::{GsoKind, MacAddr, OffloadInfo};

use super::*;
use crate::counters::DropReason;
use crate::flow_match::FlowMatch;
use crate::flow_table::{Action, ActionList, FlowRule};
use crate::memory_port::{memory_port, MemoryPortHandle};
use crate::port::PortCaps;
use crate::vlan::PortVlanMode;

pub(super) const T0: Timestamp = Timestamp(1_000_000_000);

pub(super) fn mac(last: u8) -> MacAddr {
    MacAddr([0x02, 0, 0, 0, 0, last])
}

/// An untagged frame of `len` bytes from `src` to `dst` (EtherType 0x88b5, local experimental).
pub(super) fn frame(dst: MacAddr, src: MacAddr, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len.max(14)];
    f[..6].copy_from_slice(&dst.0);
    f[6..12].copy_from_slice(&src.0);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    for (i, b) in f.iter_mut().enumerate().skip(14) {
        *b = u8::try_from(i % 251).unwrap();
    }
    f
}

/// The same frame with an 802.1Q tag.
fn tagged(dst: MacAddr, src: MacAddr, vid: u16, len: usize) -> Vec<u8> {
    let mut f = frame(dst, src, len);
    let [a, b] = vid.to_be_bytes();
    f.splice(12..12, [0x81, 0x00, a, b]);
    f
}

fn vlan_of(f: &[u8]) -> Option<u16> {
    (f.get(12..14) == Some(&[0x81, 0x00][..])).then(|| u16::from_be_bytes([f[14], f[15]]) & 0x0fff)
}

/// A switch `br0` with in-memory ports `p0`, `p1`, ... (also the lanes tests' single switch).
pub(super) struct Rig {
    pub(super) sw: Switch,
    pub(super) ports: Vec<(PortId, MemoryPortHandle)>,
}

impl Rig {
    pub(super) fn new(n: usize) -> Rig {
        Self::with(n, SwitchConfig::default(), |_| PortOptions::default())
    }

    pub(super) fn with(
        n: usize,
        config: SwitchConfig,
        options: impl Fn(usize) -> PortOptions,
    ) -> Rig {
        Self::build(&vec![1024; n], config, options)
    }

    /// Ports whose transmit queues hold `queue_lens[i]` frames, default settings.
    pub(super) fn with_queues(queue_lens: &[usize]) -> Rig {
        Self::build(queue_lens, SwitchConfig::default(), |_| {
            PortOptions::default()
        })
    }

    /// Ports whose transmit queues hold `queue_lens[i]` frames.
    fn build(
        queue_lens: &[usize],
        config: SwitchConfig,
        options: impl Fn(usize) -> PortOptions,
    ) -> Rig {
        let mut sw = Switch::new("br0", config).unwrap();
        let ports = (0..queue_lens.len())
            .map(|i| {
                let (rx, tx, h) = memory_port(PortCaps::plain(1500), queue_lens[i]);
                let id = sw
                    .add_port(
                        &format!("p{i}"),
                        Some(Box::new(rx)),
                        Box::new(tx),
                        options(i),
                    )
                    .unwrap();
                (id, h)
            })
            .collect();
        Rig { sw, ports }
    }

    pub(super) fn send(&mut self, port: usize, f: &[u8]) {
        assert!(self.ports[port].1.inject(f));
        while self.sw.poll(self.ports[port].0, T0) > 0 {}
    }

    pub(super) fn sent(&self, port: usize) -> Vec<Vec<u8>> {
        self.ports[port]
            .1
            .take_sent()
            .into_iter()
            .map(|(f, _)| f)
            .collect()
    }

    pub(super) fn counters(&self, port: usize) -> crate::counters::PortCountersSnapshot {
        self.sw
            .port_counters(self.ports[port].0)
            .unwrap()
            .snapshot()
    }
}

#[test]
fn unknown_unicast_floods_to_every_other_port() {
    let mut r = Rig::new(4);
    let f = frame(mac(9), mac(1), 60);
    r.send(0, &f);
    assert!(r.sent(0).is_empty(), "never back out of the ingress port");
    for p in 1..4 {
        assert_eq!(r.sent(p), vec![f.clone()], "port {p}");
    }
}

#[test]
fn learned_destination_gets_unicast_only() {
    let mut r = Rig::new(4);
    r.send(2, &frame(MacAddr::BROADCAST, mac(2), 60));
    for p in [0, 1, 3] {
        r.sent(p);
    }
    let f = frame(mac(2), mac(1), 100);
    r.send(0, &f);
    assert_eq!(r.sent(2), vec![f]);
    assert!(r.sent(1).is_empty() && r.sent(3).is_empty());
    assert_eq!(r.sw.fdb().lookup(0, mac(1), T0), Some(r.ports[0].0));
}

#[test]
fn frames_to_a_station_on_the_ingress_port_are_dropped_and_counted() {
    let mut r = Rig::new(2);
    r.send(0, &frame(MacAddr::BROADCAST, mac(1), 60));
    r.send(0, &frame(mac(1), mac(2), 60));
    assert!(r.sent(1).len() == 1, "only the broadcast");
    assert_eq!(r.counters(0).drops(DropReason::SamePort), 1);
}

#[test]
fn multicast_source_and_runt_frames_are_dropped_by_reason() {
    let mut r = Rig::new(2);
    r.send(0, &frame(mac(2), MacAddr([1, 0, 0x5e, 0, 0, 1]), 60));
    r.send(0, &[0u8; 10]);
    let c = r.counters(0);
    assert_eq!(c.drops(DropReason::InvalidSourceMac), 1);
    assert_eq!(c.drops(DropReason::Malformed), 1);
    assert_eq!(c.rx_packets, 2);
    assert!(r.sent(1).is_empty());
}

#[test]
fn broadcast_on_a_single_port_switch_counts_no_destination() {
    let mut r = Rig::new(1);
    r.send(0, &frame(MacAddr::BROADCAST, mac(1), 60));
    assert_eq!(r.counters(0).drops(DropReason::NoDestination), 1);
}

#[test]
fn port_that_opts_out_gets_no_unknown_unicast_but_still_broadcast() {
    let mut r = Rig::with(3, SwitchConfig::default(), |i| PortOptions {
        flood_unknown_unicast: i != 2,
        ..PortOptions::default()
    });
    r.send(0, &frame(mac(7), mac(1), 60));
    assert!(r.sent(2).is_empty());
    assert_eq!(r.sent(1).len(), 1);
    r.send(0, &frame(MacAddr::BROADCAST, mac(1), 60));
    assert_eq!(r.sent(2).len(), 1);
}

#[test]
fn counters_match_traffic() {
    let mut r = Rig::new(2);
    for _ in 0..10 {
        r.send(0, &frame(MacAddr::BROADCAST, mac(1), 100));
    }
    let c0 = r.counters(0);
    let c1 = r.counters(1);
    assert_eq!((c0.rx_packets, c0.rx_bytes), (10, 1000));
    assert_eq!((c1.tx_packets, c1.tx_bytes), (10, 1000));
    assert_eq!(c0.total_drops() + c1.total_drops(), 0);
}

#[test]
fn full_destination_drops_and_counts_instead_of_blocking() {
    let mut sw = Switch::new(
        "br0",
        SwitchConfig {
            batch_size: 256,
            ..SwitchConfig::default()
        },
    )
    .unwrap();
    let (rx0, tx0, h0) = memory_port(PortCaps::plain(1500), 1024);
    let (rx1, tx1, h1) = memory_port(PortCaps::plain(1500), 5);
    let p0 = sw
        .add_port(
            "a",
            Some(Box::new(rx0)),
            Box::new(tx0),
            PortOptions::default(),
        )
        .unwrap();
    let p1 = sw
        .add_port(
            "b",
            Some(Box::new(rx1)),
            Box::new(tx1),
            PortOptions::default(),
        )
        .unwrap();
    for _ in 0..20 {
        h0.inject(&frame(MacAddr::BROADCAST, mac(1), 60));
    }
    assert_eq!(sw.poll(p0, T0), 20);
    assert_eq!(h1.take_sent().len(), 5);
    let c = sw.port_counters(p1).unwrap().snapshot();
    assert_eq!(c.tx_packets, 5);
    assert_eq!(c.drops(DropReason::TxQueueFull), 15);
}

#[test]
fn access_ports_only_talk_within_their_vlan_and_trunk_tags() {
    // p0, p1 access VLAN 10; p2 access VLAN 20; p3 trunk {10, 20}.
    let modes = [
        PortVlanMode::access(10).unwrap(),
        PortVlanMode::access(10).unwrap(),
        PortVlanMode::access(20).unwrap(),
        PortVlanMode::trunk([10, 20], None).unwrap(),
    ];
    let mut r = Rig::with(4, SwitchConfig::default(), |i| PortOptions {
        vlan: modes[i].clone(),
        ..PortOptions::default()
    });
    let f = frame(MacAddr::BROADCAST, mac(1), 60);
    r.send(0, &f);
    assert_eq!(r.sent(1), vec![f.clone()], "same access VLAN, untagged");
    assert!(r.sent(2).is_empty(), "other VLAN");
    let on_trunk = r.sent(3);
    assert_eq!(on_trunk.len(), 1);
    assert_eq!(vlan_of(&on_trunk[0]), Some(10));
    assert_eq!(on_trunk[0], tagged(MacAddr::BROADCAST, mac(1), 10, 60));

    // Tagged VLAN 20 from the trunk reaches p2 untagged.
    let t20 = tagged(MacAddr::BROADCAST, mac(3), 20, 64);
    r.send(3, &t20);
    let mut untagged = t20.clone();
    untagged.drain(12..16);
    assert_eq!(r.sent(2), vec![untagged]);
    assert!(r.sent(0).is_empty() && r.sent(1).is_empty());

    // The trunk drops untagged (no native VLAN) and VLANs it does not carry.
    r.send(3, &frame(MacAddr::BROADCAST, mac(3), 60));
    r.send(3, &tagged(MacAddr::BROADCAST, mac(3), 30, 64));
    r.send(0, &tagged(MacAddr::BROADCAST, mac(1), 20, 64));
    assert_eq!(r.counters(3).drops(DropReason::VlanIngressDenied), 2);
    assert_eq!(r.counters(0).drops(DropReason::TaggedOnAccessPort), 1);
}

#[test]
fn access_ports_drop_tagged_and_double_tagged_frames_so_no_guest_hops_vlans() {
    // p0 access VLAN 10; p1 trunk {10, 20}; p2 access VLAN 20.
    let modes = [
        PortVlanMode::access(10).unwrap(),
        PortVlanMode::trunk([10, 20], None).unwrap(),
        PortVlanMode::access(20).unwrap(),
    ];
    let mut r = Rig::with(3, SwitchConfig::default(), |i| PortOptions {
        vlan: modes[i].clone(),
        ..PortOptions::default()
    });
    // [10][20] from the access-10 port: stripping the outer tag would put it on VLAN 20.
    let mut double = tagged(MacAddr::BROADCAST, mac(1), 20, 64);
    double.splice(12..12, [0x81, 0x00, 0x00, 0x0a]);
    r.send(0, &double);
    // Its own VLAN's tag, and a priority tag hiding a VLAN 20 tag.
    r.send(0, &tagged(MacAddr::BROADCAST, mac(1), 10, 64));
    let mut priority_then_20 = tagged(MacAddr::BROADCAST, mac(1), 20, 64);
    priority_then_20.splice(12..12, [0x81, 0x00, 0x00, 0x00]);
    r.send(0, &priority_then_20);
    assert!(
        r.sent(1).is_empty() && r.sent(2).is_empty(),
        "nothing left p0"
    );
    assert_eq!(r.counters(0).drops(DropReason::TaggedOnAccessPort), 3);
    assert!(r.sw.fdb().is_empty(), "a dropped frame teaches nothing");

    // A priority tag alone is 802.1p, not a VLAN: the frame is in VLAN 10.
    r.send(0, &tagged(MacAddr::BROADCAST, mac(1), 0, 64));
    let on_trunk = r.sent(1);
    assert_eq!(on_trunk.len(), 1);
    assert_eq!(vlan_of(&on_trunk[0]), Some(10));
}

#[test]
fn fdb_is_separate_per_vlan() {
    let mut r = Rig::new(3);
    // mac(5) is learned on p1 in VLAN 7 only.
    r.send(1, &tagged(MacAddr::BROADCAST, mac(5), 7, 64));
    r.sent(0);
    r.sent(2);
    r.send(0, &frame(mac(5), mac(1), 60));
    assert_eq!(r.sent(1).len(), 1);
    assert_eq!(
        r.sent(2).len(),
        1,
        "untagged traffic to mac(5) is unknown unicast"
    );
}

#[test]
fn plain_ports_pass_tagged_frames_unchanged() {
    let mut r = Rig::new(2);
    let f = tagged(MacAddr::BROADCAST, mac(1), 42, 80);
    r.send(0, &f);
    assert_eq!(r.sent(1), vec![f]);
}

pub(super) fn rule(priority: u16, matches: FlowMatch, actions: &[Action]) -> FlowRule {
    FlowRule {
        priority,
        matches,
        actions: ActionList::from_slice(actions).unwrap(),
        cookie: 0,
    }
}

#[test]
fn flow_rule_output_overrides_the_bridge_and_priority_decides() {
    let mut r = Rig::new(3);
    let m = FlowMatch {
        in_port: Some(r.ports[0].0),
        ..FlowMatch::default()
    };
    r.sw.add_rule(rule(10, m, &[Action::Output(r.ports[2].0)]))
        .unwrap();
    let f = frame(MacAddr::BROADCAST, mac(1), 60);
    r.send(0, &f);
    assert!(r.sent(1).is_empty());
    assert_eq!(r.sent(2), vec![f.clone()]);
    let id = r.sw.add_rule(rule(20, m, &[Action::Drop])).unwrap();
    r.send(0, &f);
    assert!(r.sent(2).is_empty());
    assert_eq!(r.counters(0).drops(DropReason::FlowRuleDrop), 1);
    r.sw.remove_rule(id);
    r.send(0, &f);
    assert_eq!(r.sent(2).len(), 1, "the cache forgot the removed rule");
}

#[test]
fn rule_hits_count_every_packet_and_byte_cached_or_not() {
    let mut r = Rig::new(3);
    let from0 = FlowMatch {
        in_port: Some(r.ports[0].0),
        ..FlowMatch::default()
    };
    let from1 = FlowMatch {
        in_port: Some(r.ports[1].0),
        ..FlowMatch::default()
    };
    let a =
        r.sw.add_rule(rule(10, from0, &[Action::Output(r.ports[2].0)]))
            .unwrap();
    let b = r.sw.add_rule(rule(10, from1, &[Action::Drop])).unwrap();
    // The first packet of each flow misses the cache, the rest hit it.
    for len in [60, 100, 60] {
        r.send(0, &frame(mac(2), mac(1), len));
    }
    r.send(1, &frame(mac(1), mac(2), 80));
    let stats = |id| r.sw.flow_table().stats(id).unwrap();
    assert_eq!((stats(a).packets, stats(a).bytes), (3, 220));
    assert_eq!((stats(b).packets, stats(b).bytes), (1, 80));
}

#[test]
fn push_and_pop_vlan_actions_rewrite_the_tag() {
    let mut r = Rig::new(3);
    let from0 = FlowMatch {
        in_port: Some(r.ports[0].0),
        ..FlowMatch::default()
    };
    let from1 = FlowMatch {
        in_port: Some(r.ports[1].0),
        ..FlowMatch::default()
    };
    r.sw.add_rule(rule(
        1,
        from0,
        &[Action::PushVlan(100), Action::Output(r.ports[1].0)],
    ))
    .unwrap();
    r.sw.add_rule(rule(
        1,
        from1,
        &[Action::PopVlan, Action::Output(r.ports[2].0)],
    ))
    .unwrap();
    r.send(0, &frame(mac(2), mac(1), 60));
    let out = r.sent(1);
    assert_eq!(out, vec![tagged(mac(2), mac(1), 100, 60)]);
    r.send(1, &out[0]);
    assert_eq!(r.sent(2), vec![frame(mac(2), mac(1), 60)]);
}

#[test]
fn controller_action_queues_an_upcall_and_counts_when_full() {
    let config = SwitchConfig {
        upcall_queue_len: 2,
        ..SwitchConfig::default()
    };
    let mut r = Rig::with(2, config, |_| PortOptions::default());
    r.sw.add_rule(rule(1, FlowMatch::default(), &[Action::Controller]))
        .unwrap();
    for _ in 0..3 {
        r.send(0, &frame(mac(2), mac(1), 60));
    }
    assert!(r.sent(1).is_empty());
    assert_eq!(r.counters(0).drops(DropReason::UpcallQueueFull), 1);
    let mut n = 0;
    r.sw.drain_upcalls(|u| {
        assert_eq!(u.key.src_mac, mac(1));
        assert_eq!(u.orig_len, 60);
        n += 1;
    });
    assert_eq!(n, 2);
}

#[test]
fn removing_a_port_forgets_its_macs() {
    let mut r = Rig::new(3);
    r.send(1, &frame(MacAddr::BROADCAST, mac(5), 60));
    r.sw.remove_port(r.ports[1].0).unwrap();
    assert_eq!(r.sw.fdb().lookup(0, mac(5), T0), None);
    r.sent(2);
    r.send(0, &frame(mac(5), mac(1), 60));
    assert_eq!(r.sent(2).len(), 1, "flooded again");
}

#[test]
fn oversized_frame_is_dropped_as_too_big() {
    let mut r = Rig::new(2);
    r.send(0, &frame(MacAddr::BROADCAST, mac(1), 1600));
    assert_eq!(r.counters(1).drops(DropReason::FrameTooBig), 1);
}

#[test]
fn arrival_order_is_kept_per_destination_across_unicast_and_flood() {
    let mut r = Rig::new(3);
    r.send(1, &frame(MacAddr::BROADCAST, mac(2), 60));
    r.sent(0);
    r.sent(2);
    let frames: Vec<Vec<u8>> = (0..40u8)
        .map(|i| {
            let dst = if i % 3 == 0 {
                MacAddr::BROADCAST
            } else {
                mac(2)
            };
            let mut f = frame(dst, mac(1), 60);
            f[20] = i;
            f
        })
        .collect();
    for f in &frames {
        assert!(r.ports[0].1.inject(f));
    }
    assert_eq!(r.sw.poll(r.ports[0].0, T0), 40);
    assert_eq!(r.sent(1), frames);
}

#[test]
fn bad_batch_size_is_rejected() {
    assert!(matches!(
        Switch::new(
            "x",
            SwitchConfig {
                batch_size: 0,
                ..SwitchConfig::default()
            }
        ),
        Err(SwitchError::BadBatchSize(0))
    ));
}

#[test]
fn cache_generation_changes_with_ports() {
    let mut r = Rig::new(1);
    let g = r.sw.generation();
    let (rx, tx, _h) = memory_port(PortCaps::plain(1500), 4);
    r.sw.add_port(
        "new",
        Some(Box::new(rx)),
        Box::new(tx),
        PortOptions::default(),
    )
    .unwrap();
    assert_ne!(g, r.sw.generation());
}

#[test]
fn gso_metadata_on_a_non_ip_frame_is_dropped_at_ingress() {
    // A "TCP/IPv4 super-frame" whose EtherType is not IPv4: refused before forwarding.
    let mut r = Rig::new(2);
    let f = frame(MacAddr::BROADCAST, mac(1), 3000);
    let o = OffloadInfo {
        gso: GsoKind::TcpV4,
        gso_size: 1400,
        needs_csum: true,
        csum_start: 34,
        csum_offset: 16,
        hdr_len: 54,
        data_valid: false,
    };
    assert!(r.ports[0].1.inject_with(&f, o));
    r.sw.poll(r.ports[0].0, T0);
    assert!(r.sent(1).is_empty());
    assert_eq!(r.counters(0).drops(DropReason::BadOffload), 1);
}

#[test]
fn capture_copies_received_and_sent_frames_as_they_went() {
    use crate::capture::{CaptureBuffer, CaptureDirection};
    use std::sync::Arc;
    let modes = [
        PortVlanMode::access(10).unwrap(),
        PortVlanMode::trunk([10], None).unwrap(),
    ];
    let mut r = Rig::with(2, SwitchConfig::default(), |i| PortOptions {
        vlan: modes[i].clone(),
        ..PortOptions::default()
    });
    let on_access = Arc::new(CaptureBuffer::new(16, 65535));
    let on_trunk_out = Arc::new(CaptureBuffer::new(16, 65535));
    r.sw.start_capture(r.ports[0].0, CaptureDirection::Both, Arc::clone(&on_access))
        .unwrap();
    r.sw.start_capture(
        r.ports[1].0,
        CaptureDirection::Out,
        Arc::clone(&on_trunk_out),
    )
    .unwrap();
    let f = frame(MacAddr::BROADCAST, mac(1), 60);
    r.send(0, &f);
    let mut got = Vec::new();
    on_access.drain(10, |c| got.push((c.direction, c.data.to_vec())));
    assert_eq!(got, vec![(CaptureDirection::In, f.clone())]);
    let mut out = Vec::new();
    on_trunk_out.drain(10, |c| out.push((c.direction, c.orig_len, c.data.to_vec())));
    let t = tagged(MacAddr::BROADCAST, mac(1), 10, 60);
    assert_eq!(
        out,
        vec![(CaptureDirection::Out, t.len(), t)],
        "captured as sent: tagged"
    );
    assert!(r.sw.stop_capture(r.ports[1].0, &on_trunk_out));
    r.send(0, &f);
    assert!(on_trunk_out.is_empty(), "stopped");
    assert_eq!(on_access.len(), 1);
}

/// A transmit half whose caps change later, as a vhost-user port's do once its guest has
/// negotiated offloads.
struct LateCaps {
    inner: crate::memory_port::MemoryTx,
    caps: std::sync::Arc<std::sync::Mutex<(PortCaps, u64)>>,
}

impl crate::port::PortTx for LateCaps {
    fn caps(&self) -> PortCaps {
        self.caps.lock().unwrap().0
    }
    fn transmit(&mut self, frames: &[crate::port::TxFrame<'_>]) -> usize {
        self.inner.transmit(frames)
    }
    fn caps_generation(&self) -> u64 {
        self.caps.lock().unwrap().1
    }
}

#[test]
fn caps_are_read_again_when_the_port_says_they_changed() {
    let mut sw = Switch::new("br0", SwitchConfig::default()).unwrap();
    let (rx0, tx0, h0) = memory_port(PortCaps::plain(9000), 16);
    let (_rx1, tx1, h1) = memory_port(PortCaps::plain(9000), 16);
    let caps = std::sync::Arc::new(std::sync::Mutex::new((PortCaps::plain(1500), 0)));
    let late = LateCaps {
        inner: tx1,
        caps: std::sync::Arc::clone(&caps),
    };
    let p0 = sw
        .add_port(
            "a",
            Some(Box::new(rx0)),
            Box::new(tx0),
            PortOptions::default(),
        )
        .unwrap();
    let p1 = sw
        .add_port("b", None, Box::new(late), PortOptions::default())
        .unwrap();
    let jumbo = frame(MacAddr::BROADCAST, mac(1), 4000);
    h0.inject(&jumbo);
    sw.poll(p0, T0);
    assert!(h1.take_sent().is_empty());
    assert_eq!(
        sw.port_counters(p1)
            .unwrap()
            .snapshot()
            .drops(DropReason::FrameTooBig),
        1
    );
    *caps.lock().unwrap() = (PortCaps::plain(9000), 1);
    h0.inject(&jumbo);
    sw.poll(p0, T0);
    assert_eq!(
        h1.take_sent().len(),
        1,
        "the new MTU applies without re-adding the port"
    );
}

/// A batch whose packets all go to one port takes stage 3's straight path; one packet to
/// another port sends the same batch through the per-destination lists. Both deliver in
/// order and count the same: packets and bytes of what the port took, and what it refused.
#[test]
fn a_batch_to_one_port_counts_and_orders_like_a_mixed_one() {
    let run = |mixed: bool| {
        let mut r = Rig::build(&[1024, 5, 1024], SwitchConfig::default(), |_| {
            PortOptions::default()
        });
        // Stations 2 and 3 are learned behind p1 and p2.
        for (port, station) in [(1, 2), (2, 3)] {
            r.send(port, &frame(MacAddr::BROADCAST, mac(station), 60));
        }
        for p in 0..3 {
            r.sent(p);
        }
        let before = r.counters(1);
        let sizes = [60, 61, 200, 1514, 64, 100, 90];
        let mut to_p1 = Vec::new();
        for (k, len) in sizes.into_iter().enumerate() {
            let dst = if mixed && k == 3 { mac(3) } else { mac(2) };
            let f = frame(dst, mac(1), len);
            assert!(r.ports[0].1.inject(&f));
            if dst == mac(2) {
                to_p1.push(f);
            }
        }
        assert_eq!(r.sw.poll(r.ports[0].0, T0), sizes.len(), "one batch");
        let got = r.sent(1);
        assert_eq!(got, to_p1[..5].to_vec(), "the first five, in order");
        let c = r.counters(1);
        let bytes: u64 = got.iter().map(|f| f.len() as u64).sum();
        assert_eq!(c.tx_bytes - before.tx_bytes, bytes, "bytes of what p1 took");
        (
            c.tx_packets - before.tx_packets,
            bytes,
            c.drops(DropReason::TxQueueFull) - before.drops(DropReason::TxQueueFull),
        )
    };
    // All seven to p1: it takes five and refuses two.
    assert_eq!(run(false), (5, 60 + 61 + 200 + 1514 + 64, 2));
    // The 1514 B frame to p2: p1 takes the first five of its six and refuses one.
    assert_eq!(run(true), (5, 60 + 61 + 200 + 64 + 100, 1));
}

/// A receive half that records what it is told its peers accept.
struct PeersSeen {
    inner: crate::memory_port::MemoryRx,
    seen: std::sync::Arc<std::sync::Mutex<Vec<PortCaps>>>,
}

impl crate::port::PortRx for PeersSeen {
    fn receive(&mut self, batch: &mut crate::port::RxBatch) {
        self.inner.receive(batch);
    }
    fn frame(&self, handle: crate::port::FrameHandle) -> crate::port::RxFrame<'_> {
        self.inner.frame(handle)
    }
    fn finish(&mut self) {
        self.inner.finish();
    }
    fn peers_accept(&mut self, peers: &PortCaps) {
        self.seen.lock().unwrap().push(*peers);
    }
}

#[test]
fn a_port_is_told_what_all_its_peers_accept_when_ports_come_go_or_renegotiate() {
    let mut sw = Switch::new("br0", SwitchConfig::default()).unwrap();
    let (rx0, tx0, h0) = memory_port(PortCaps::full_offload(9000), 16);
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let watcher = PeersSeen {
        inner: rx0,
        seen: std::sync::Arc::clone(&seen),
    };
    let p0 = sw
        .add_port(
            "a",
            Some(Box::new(watcher)),
            Box::new(tx0),
            PortOptions::default(),
        )
        .unwrap();
    let last = || *seen.lock().unwrap().last().unwrap();
    sw.poll(p0, T0);
    assert!(last().uso && last().tso4, "no peers: nothing would be cut");
    // Two peers: one takes everything at MTU 1500, one takes TSO only at MTU 9000.
    let (_r, full, _h) = memory_port(PortCaps::full_offload(1500), 16);
    sw.add_port("b", None, Box::new(full), PortOptions::default())
        .unwrap();
    let caps = std::sync::Arc::new(std::sync::Mutex::new((
        PortCaps {
            uso: false,
            ..PortCaps::full_offload(9000)
        },
        0,
    )));
    let (_r, inner, _h) = memory_port(PortCaps::plain(9000), 16);
    let late = LateCaps {
        inner,
        caps: std::sync::Arc::clone(&caps),
    };
    sw.add_port("c", None, Box::new(late), PortOptions::default())
        .unwrap();
    sw.poll(p0, T0);
    let peers = last();
    assert!(peers.tso4 && peers.tso6 && !peers.uso);
    assert_eq!(peers.mtu, 1500);
    let told = seen.lock().unwrap().len();
    sw.poll(p0, T0);
    assert_eq!(
        seen.lock().unwrap().len(),
        told,
        "told again only on a change"
    );
    // c renegotiates and takes USO too: found when traffic reaches it, told on the next poll.
    *caps.lock().unwrap() = (PortCaps::full_offload(9000), 1);
    h0.inject(&frame(MacAddr::BROADCAST, mac(1), 100));
    sw.poll(p0, T0);
    sw.poll(p0, T0);
    assert!(last().uso, "{:?}", last());
    // Without b, the smallest MTU is c's.
    sw.remove_port(sw.port_id("b").unwrap()).unwrap();
    sw.poll(p0, T0);
    assert_eq!(last().mtu, 9000);
}

#[test]
fn a_mac_restored_from_another_process_is_known_with_its_age_and_frames_to_it_are_unicast() {
    let mut r = Rig::new(3);
    let now = Timestamp::from_secs(100);
    let seen = Timestamp::from_secs(70);
    assert!(r.sw.restore_learned(0, mac(5), r.ports[1].0, seen));
    let entry =
        r.sw.fdb()
            .entries()
            .find(|e| e.mac == mac(5))
            .expect("restored");
    assert_eq!(entry.age(now), Some(std::time::Duration::from_secs(30)));
    assert!(!entry.is_static);
    r.send(0, &frame(mac(5), mac(1), 60));
    assert_eq!(r.sent(1).len(), 1);
    assert!(
        r.sent(2).is_empty(),
        "flooded to a MAC the switch was told about"
    );
}

#[test]
fn a_mac_restored_on_a_port_the_switch_does_not_have_is_not_learned() {
    let mut r = Rig::new(2);
    assert!(!r.sw.restore_learned(0, mac(5), PortId(9), T0));
    assert!(!r
        .sw
        .restore_learned(0, MacAddr::BROADCAST, r.ports[0].0, T0));
    assert_eq!(r.sw.fdb().lookup(0, mac(5), T0), None);
}

/// A frame to its own source, twice in one batch, before the switch knows the source: the
/// first is flooded and teaches the FDB that the source is behind the ingress port, so the
/// second goes nowhere. Without rules (the bridge loop) and with them (the flow loop, whose
/// next packets of a flow otherwise take the first one's verdict).
#[test]
fn a_frame_to_its_own_source_floods_once_then_is_dropped_within_one_batch() {
    for with_rules in [false, true] {
        let mut r = Rig::new(2);
        if with_rules {
            r.sw.add_rule(rule(0, FlowMatch::ANY, &[Action::Normal]))
                .unwrap();
        }
        let mut f = Vec::new();
        etherparse::PacketBuilder::ethernet2(mac(1).0, mac(1).0)
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .udp(1000, 2000)
            .write(&mut f, &[0x5a; 18])
            .unwrap();
        let (p0, h0) = r.ports[0].clone();
        assert!(h0.inject(&f) && h0.inject(&f));
        assert_eq!(r.sw.poll(p0, T0), 2, "one batch of two");
        assert_eq!(r.sent(1), vec![f], "rules: {with_rules}");
        assert_eq!(
            r.counters(0).drops(DropReason::SamePort),
            1,
            "rules: {with_rules}"
        );
    }
}
