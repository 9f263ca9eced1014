//! Per-port policy in the pipeline: storm control, MAC limits, flap dampening, and that
//! whatever a check or a rule drops never teaches the FDB.

use core::time::Duration;

use weft_packet::MacAddr;

use super::tests::{frame, mac};
use super::*;
use crate::counters::DropReason;
use crate::flow_match::{FlowMatch, MacMatch};
use crate::flow_table::{Action, ActionList, FlowRule};
use crate::memory_port::{memory_port, MemoryPortHandle};
use crate::policy::{MacLimit, MacLimitAction, RateLimit, StormControl, StormPolicy};
use crate::port::PortCaps;

const SECOND: u64 = 1_000_000_000;

struct Bench {
    sw: Switch,
    ports: Vec<(PortId, MemoryPortHandle)>,
}

impl Bench {
    fn new(config: SwitchConfig, options: Vec<PortOptions>) -> Bench {
        let mut sw = Switch::new("br0", config).unwrap();
        let ports = options
            .into_iter()
            .enumerate()
            .map(|(i, o)| {
                let (rx, tx, h) = memory_port(PortCaps::plain(1500), 4096);
                let id = sw
                    .add_port(&format!("p{i}"), Some(Box::new(rx)), Box::new(tx), o)
                    .unwrap();
                (id, h)
            })
            .collect();
        Bench { sw, ports }
    }

    /// Sends `frames` from `port` as batches at time `t` (ns).
    fn send(&mut self, port: usize, frames: &[Vec<u8>], t: u64) {
        for f in frames {
            assert!(self.ports[port].1.inject(f));
        }
        while self.sw.poll(self.ports[port].0, Timestamp(t)) > 0 {}
    }

    fn sent(&self, port: usize) -> usize {
        self.ports[port].1.take_sent().len()
    }

    fn drops(&self, port: usize, reason: DropReason) -> u64 {
        self.sw
            .port_counters(self.ports[port].0)
            .unwrap()
            .snapshot()
            .drops(reason)
    }

    fn where_is(&self, m: MacAddr, t: u64) -> Option<PortId> {
        self.sw.fdb().lookup(0, m, Timestamp(t))
    }
}

fn storm(control: StormControl) -> PortOptions {
    PortOptions {
        storm: StormPolicy::new(control).unwrap(),
        ..PortOptions::default()
    }
}

/// A port whose broadcast is limited to `pps` (100 ms burst).
fn broadcast_pps(pps: u64) -> PortOptions {
    storm(StormControl {
        broadcast: Some(RateLimit {
            pps: Some(pps),
            bps: None,
        }),
        ..StormControl::default()
    })
}

fn copies(f: Vec<u8>, n: usize) -> Vec<Vec<u8>> {
    vec![f; n]
}

#[test]
fn broadcast_beyond_the_storm_rate_is_dropped_and_the_bucket_refills_with_time() {
    // 100 pps with a 100 ms burst: 10 frames at once, then 100 per second.
    let limited = broadcast_pps(100);
    let mut b = Bench::new(
        SwitchConfig::default(),
        vec![limited, PortOptions::default()],
    );
    let bcast = frame(MacAddr::BROADCAST, mac(1), 60);
    b.send(0, &copies(bcast.clone(), 50), SECOND);
    assert_eq!(b.sent(1), 10);
    assert_eq!(b.drops(0, DropReason::StormBroadcast), 40);
    // 50 ms later: 5 more tokens.
    b.send(0, &copies(bcast.clone(), 50), SECOND + SECOND / 20);
    assert_eq!(b.sent(1), 5);
    // Over 10 s of steady sending, what passes stays at the rate (plus the one burst).
    let mut passed = 0;
    for step in 1..=100u64 {
        b.send(
            0,
            &copies(bcast.clone(), 20),
            2 * SECOND + step * SECOND / 10,
        );
        passed += b.sent(1);
    }
    assert!(
        (1000..=1010).contains(&passed),
        "{passed} in 10 s at 100 pps"
    );
}

#[test]
fn storm_control_leaves_known_unicast_alone_and_counts_each_kind_apart() {
    let rate = Some(RateLimit {
        pps: Some(10),
        bps: None,
    });
    let limited = storm(StormControl {
        broadcast: rate,
        multicast: rate,
        unknown_unicast: rate,
        burst: Duration::from_millis(100),
    });
    let mut b = Bench::new(
        SwitchConfig::default(),
        vec![limited, PortOptions::default()],
    );
    // p1 is known as mac(2).
    b.send(1, &[frame(mac(1), mac(2), 60)], SECOND);
    b.send(0, &copies(frame(mac(2), mac(1), 60), 500), SECOND);
    assert_eq!(b.sent(1), 500, "known unicast is never limited");
    let group = MacAddr([0x01, 0, 0x5e, 0, 0, 1]);
    b.send(0, &copies(frame(MacAddr::BROADCAST, mac(1), 60), 5), SECOND);
    b.send(0, &copies(frame(group, mac(1), 60), 5), SECOND);
    b.send(0, &copies(frame(mac(77), mac(1), 60), 5), SECOND);
    // One token each (10 pps × 100 ms).
    assert_eq!(b.sent(1), 3);
    assert_eq!(b.drops(0, DropReason::StormBroadcast), 4);
    assert_eq!(b.drops(0, DropReason::StormMulticast), 4);
    assert_eq!(b.drops(0, DropReason::StormUnknownUnicast), 4);
}

#[test]
fn a_bit_rate_limits_bytes_of_flooding() {
    // 800 kbit/s = 100 kB/s; a 100 ms burst is at least one 64 KiB frame's worth.
    let limited = storm(StormControl {
        broadcast: Some(RateLimit {
            pps: None,
            bps: Some(800_000),
        }),
        ..StormControl::default()
    });
    let mut b = Bench::new(
        SwitchConfig::default(),
        vec![limited, PortOptions::default()],
    );
    let big = frame(MacAddr::BROADCAST, mac(1), 1000);
    b.send(0, &copies(big.clone(), 100), SECOND);
    // 65558 bytes of burst: 65 frames of 1000 bytes.
    assert_eq!(b.sent(1), 65);
    // Sending on for 10 s: 100 kB each second, 1000 frames (a full bucket holds no more
    // than the burst, whatever the pause before).
    let mut passed = 0;
    for step in 1..=100u64 {
        b.send(0, &copies(big.clone(), 20), 2 * SECOND + step * SECOND / 10);
        passed += b.sent(1);
    }
    assert!((1000..=1066).contains(&passed), "{passed} frames in 10 s");
}

#[test]
fn lanes_sharing_a_port_share_its_storm_buckets() {
    let limited = broadcast_pps(100);
    // Two copies of one port's options, as every lane of a switch gets.
    let mut lane_a = Bench::new(
        SwitchConfig::default(),
        vec![limited.clone(), PortOptions::default()],
    );
    let mut lane_b = Bench::new(
        SwitchConfig::default(),
        vec![limited, PortOptions::default()],
    );
    let bcast = copies(frame(MacAddr::BROADCAST, mac(1), 60), 8);
    lane_a.send(0, &bcast, SECOND);
    lane_b.send(0, &bcast, SECOND);
    assert_eq!(
        lane_a.sent(1) + lane_b.sent(1),
        10,
        "one burst between them"
    );
}

/// The lowest-priority rule, leaving everything else to the learning bridge.
fn catch_all_normal() -> FlowRule {
    FlowRule::new(0, FlowMatch::ANY, ActionList::single(Action::Normal))
}

fn limited(max: usize, action: MacLimitAction) -> PortOptions {
    PortOptions {
        mac_limit: Some(MacLimit { max, action }),
        ..PortOptions::default()
    }
}

#[test]
fn a_port_over_its_mac_limit_with_drop_loses_frames_from_new_sources_only() {
    let mut b = Bench::new(
        SwitchConfig::default(),
        vec![limited(2, MacLimitAction::Drop), PortOptions::default()],
    );
    for src in 1..=5 {
        b.send(0, &[frame(mac(99), mac(src), 60)], SECOND);
    }
    assert_eq!(b.sent(1), 2);
    assert_eq!(b.drops(0, DropReason::MacLimit), 3);
    assert_eq!(b.where_is(mac(3), SECOND), None);
    // The two it learned still pass.
    b.send(
        0,
        &[frame(mac(99), mac(1), 60), frame(mac(99), mac(2), 60)],
        SECOND,
    );
    assert_eq!(b.sent(1), 2);
}

#[test]
fn a_port_over_its_mac_limit_with_no_learn_forwards_but_does_not_learn() {
    let mut b = Bench::new(
        SwitchConfig::default(),
        vec![limited(1, MacLimitAction::NoLearn), PortOptions::default()],
    );
    b.send(
        0,
        &[frame(mac(99), mac(1), 60), frame(mac(99), mac(2), 60)],
        SECOND,
    );
    assert_eq!(b.sent(1), 2);
    assert_eq!(b.drops(0, DropReason::MacLimit), 0);
    assert_eq!(b.where_is(mac(1), SECOND), Some(b.ports[0].0));
    assert_eq!(b.where_is(mac(2), SECOND), None);
}

#[test]
fn a_flapping_mac_is_held_on_its_port_and_its_frames_elsewhere_are_dropped() {
    let config = SwitchConfig {
        fdb: FdbConfig {
            mac_move_limit: 4,
            mac_move_hold: Duration::from_secs(10),
            ..FdbConfig::default()
        },
        ..SwitchConfig::default()
    };
    let options = vec![PortOptions::default(); 3];
    let mut b = Bench::new(config, options);
    // mac(1) bounces between p0 and p1 every millisecond (a loop, or a spoofer).
    for t in 0..20u64 {
        let port = (t % 2) as usize;
        b.send(port, &[frame(mac(9), mac(1), 60)], SECOND + t * 1_000_000);
    }
    let held_on = b.where_is(mac(1), 2 * SECOND).unwrap();
    assert!(b.sw.fdb().is_held(0, mac(1), Timestamp(2 * SECOND)));
    let other = if held_on == b.ports[0].0 { 1 } else { 0 };
    assert!(b.drops(other, DropReason::MacFlapHeld) > 0);
    assert_eq!(b.sw.fdb().stats().flap_episodes, 1);
    let (episodes, _) = b.sw.take_flap_episodes();
    assert_eq!(episodes.len(), 1);
    // Frames to it keep going to the port it is held on.
    b.ports[0].1.take_sent();
    b.ports[1].1.take_sent();
    b.send(2, &[frame(mac(1), mac(3), 60)], 2 * SECOND);
    let to_held = b.ports[held_on.index()].1.take_sent().len();
    assert_eq!(to_held, 1);
}

#[test]
fn a_frame_a_rule_drops_never_moves_its_source_in_the_fdb() {
    let mut b = Bench::new(SwitchConfig::default(), vec![PortOptions::default(); 3]);
    // The victim, mac(1), lives behind p0.
    b.send(0, &[frame(mac(9), mac(1), 60)], SECOND);
    // A rule drops anything from mac(1) arriving on p1; everything else is normal.
    let drop_spoof = FlowRule {
        priority: 10,
        matches: FlowMatch {
            in_port: Some(b.ports[1].0),
            src_mac: Some(MacMatch::exact(mac(1))),
            ..FlowMatch::ANY
        },
        actions: ActionList::from_slice(&[Action::Drop]).unwrap(),
        cookie: 0,
    };
    b.sw.add_rule(drop_spoof).unwrap();
    b.sw.add_rule(catch_all_normal()).unwrap();
    b.send(1, &copies(frame(mac(9), mac(1), 60), 5), SECOND);
    assert_eq!(b.drops(1, DropReason::FlowRuleDrop), 5);
    assert_eq!(b.where_is(mac(1), SECOND), Some(b.ports[0].0));
    // Traffic to the victim still reaches it.
    b.ports[0].1.take_sent();
    b.send(2, &[frame(mac(1), mac(3), 60)], SECOND);
    assert_eq!(b.sent(0), 1);
}

#[test]
fn a_frame_port_security_drops_never_moves_its_source_in_the_fdb() {
    let restricted = PortOptions {
        security: crate::policy::PortSecurity {
            allowed_macs: vec![mac(2)],
            ..Default::default()
        },
        ..PortOptions::default()
    };
    let mut b = Bench::new(
        SwitchConfig::default(),
        vec![PortOptions::default(), restricted, PortOptions::default()],
    );
    b.send(0, &[frame(mac(9), mac(1), 60)], SECOND);
    // p1 may send only as mac(2): as mac(1) it is dropped, in both loops.
    b.send(1, &copies(frame(mac(9), mac(1), 60), 3), SECOND);
    assert_eq!(b.drops(1, DropReason::SpoofedSrcMac), 3);
    assert_eq!(b.where_is(mac(1), SECOND), Some(b.ports[0].0));
    b.send(1, &[frame(mac(9), mac(2), 60)], SECOND);
    assert_eq!(b.where_is(mac(2), SECOND), Some(b.ports[1].0));
    b.sw.add_rule(catch_all_normal()).unwrap();
    b.send(1, &copies(frame(mac(9), mac(1), 60), 3), SECOND);
    assert_eq!(b.drops(1, DropReason::SpoofedSrcMac), 6);
    assert_eq!(b.where_is(mac(1), SECOND), Some(b.ports[0].0));
}
