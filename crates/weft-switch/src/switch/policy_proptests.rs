//! The invariant behind "learn after the verdict": with random rules, port policies and
//! flap dampening, a frame that a check or a rule drops never changes the FDB.

use core::time::Duration;
use std::collections::BTreeSet;

use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::Config;

use super::proptests::{
    actions, attach_port, build_frame, flow_match, packet_spec, port_options, src_mac, PacketSpec,
    PortSetup,
};
use super::*;
use crate::counters::DropReason;
use crate::flow_match::FlowMatch;
use crate::flow_table::{Action, ActionList, FlowRule};
use crate::memory_port::MemoryPortHandle;
use crate::policy::{MacLimit, MacLimitAction, PortSecurity, RateLimit, StormControl, StormPolicy};
use crate::port::PortCaps;

/// Drops that refuse a frame (as opposed to finding it nowhere to go: `same_port`,
/// `no_destination`, and the egress side's reasons): none of them may teach the FDB.
const REFUSALS: [DropReason; 18] = [
    DropReason::Malformed,
    DropReason::InvalidSourceMac,
    DropReason::VlanIngressDenied,
    DropReason::TaggedOnAccessPort,
    DropReason::BadOffload,
    DropReason::FlowRuleDrop,
    DropReason::SpoofedSrcMac,
    DropReason::SpoofedSrcIp,
    DropReason::SpoofedArp,
    DropReason::SpoofedNd,
    DropReason::RogueDhcp,
    DropReason::RogueRa,
    DropReason::StormBroadcast,
    DropReason::StormMulticast,
    DropReason::StormUnknownUnicast,
    DropReason::MacLimit,
    DropReason::MacFlapHeld,
    DropReason::UpcallQueueFull,
];

fn policed_options() -> impl Strategy<Value = PortOptions> {
    let rate = prop::option::weighted(
        0.5,
        (1u64..50).prop_map(|pps| RateLimit {
            pps: Some(pps),
            bps: None,
        }),
    );
    (
        port_options(),
        prop::option::weighted(0.5, prop::collection::vec(0..8usize, 1..3)),
        (rate.clone(), rate.clone(), rate),
        prop::option::weighted(
            0.4,
            (
                1usize..3,
                select(vec![MacLimitAction::NoLearn, MacLimitAction::Drop]),
            ),
        ),
    )
        .prop_map(|(base, allowed, (b, m, u), limit)| PortOptions {
            security: PortSecurity {
                allowed_macs: allowed
                    .unwrap_or_default()
                    .into_iter()
                    .map(src_mac)
                    .collect(),
                ..PortSecurity::default()
            },
            storm: StormPolicy::new(StormControl {
                broadcast: b,
                multicast: m,
                unknown_unicast: u,
                burst: Duration::from_millis(100),
            })
            .unwrap(),
            mac_limit: limit.map(|(max, action)| MacLimit { max, action }),
            ..base
        })
}

#[derive(Debug, Clone)]
struct Case {
    ports: Vec<PortOptions>,
    move_limit: u32,
    rules: Vec<(u16, FlowMatch, Vec<Action>)>,
    /// (sending port, frame, milliseconds since the last frame)
    frames: Vec<(usize, PacketSpec, u64)>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(policed_options(), 2..5),
        prop_oneof![Just(0u32), 1u32..4],
        prop::collection::vec((0u16..4, flow_match(), actions()), 0..4),
        prop::collection::vec((0..4usize, packet_spec(), 0u64..30), 1..60),
    )
        .prop_map(|(ports, move_limit, rules, frames)| Case {
            ports,
            move_limit,
            rules,
            frames,
        })
}

type Entries = BTreeSet<(u16, [u8; 6], u16, bool)>;

fn entries(sw: &Switch) -> Entries {
    sw.fdb()
        .entries()
        .map(|e| (e.vlan, e.mac.0, e.port.0, e.is_static))
        .collect()
}

proptest! {
    #![proptest_config(Config::with_cases(192))]

    #[test]
    fn no_refused_frame_ever_changes_the_fdb(case in case()) {
        let config = SwitchConfig {
            batch_size: 1,
            fdb: FdbConfig {
                mac_move_limit: case.move_limit,
                mac_move_hold: Duration::from_secs(1),
                ..FdbConfig::default()
            },
            ..SwitchConfig::default()
        };
        let mut sw = Switch::new("br0", config).unwrap();
        let ports: Vec<(PortId, MemoryPortHandle)> = case
            .ports
            .iter()
            .enumerate()
            .map(|(slot, options)| {
                let setup = PortSetup { options: options.clone(), tx_queue: 1024 };
                attach_port(&mut sw, slot, &setup, PortCaps::plain(1500))
            })
            .collect();
        if !case.rules.is_empty() {
            for (priority, matches, list) in &case.rules {
                let actions = ActionList::from_slice(list).unwrap();
                let _ = sw.add_rule(FlowRule::new(*priority + 1, *matches, actions));
            }
            let _ = sw.add_rule(FlowRule::new(0, FlowMatch::ANY, ActionList::single(Action::Normal)));
        }
        let mut now = 1_000_000_000u64;
        for (id, (port, spec, gap_ms)) in (0u32..).zip(&case.frames) {
            let (port_id, handle) = &ports[port % ports.len()];
            now += gap_ms * 1_000_000;
            let before = entries(&sw);
            let drops_before = sw.port_counters(*port_id).unwrap().snapshot();
            prop_assert!(handle.inject(&build_frame(spec, id)));
            sw.poll(*port_id, Timestamp(now));
            let drops_after = sw.port_counters(*port_id).unwrap().snapshot();
            let refused = REFUSALS
                .iter()
                .find(|r| drops_after.drops(**r) > drops_before.drops(**r));
            if let Some(reason) = refused {
                prop_assert_eq!(
                    &entries(&sw),
                    &before,
                    "frame {} ({:?}) dropped as {:?} changed the FDB",
                    id,
                    spec,
                    reason
                );
            }
            for (_, h) in &ports {
                h.take_sent();
            }
        }
    }
}
