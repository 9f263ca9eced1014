//! Random operation sequences against a whole switch with in-memory ports.
//!
//! Pins two guarantees of the pipeline:
//!
//! * **Flow cache equivalence**: every cache hit equals the decision computed without the
//!   cache (`Switch::cache_mismatches` stays 0), whatever happens between packets: rules
//!   added and removed, static entries, flushes, ports removed, re-added and reconfigured,
//!   time passing the FDB's ageing, FDB evictions.
//! * **Conservation**: every packet received is delivered to at least one port, handed to
//!   the control plane, or counted as a drop, and counters match what ports saw. Each
//!   injected frame carries a unique id in its last bytes, so outputs are counted per
//!   packet, not per copy.
//!
//! Exact per-packet balance (`rx == delivered + ingress drops`) does not hold by design:
//! a unicast packet refused by its destination is charged to the egress port, and a packet
//! with several outputs may count a drop per refused copy while other copies get through.
//! So the test asserts what does hold: a packet that reached no one was counted somewhere,
//! each port is charged only with drops of its side (ingress or egress), and a packet the
//! ingress stage refused reached no one and was counted exactly once.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use core::time::Duration;
use std::cell::Cell;
use std::collections::BTreeSet;

use etherparse::PacketBuilder;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use weft_packet::ethernet::ethertype;
use weft_packet::MacAddr;

use super::*;
use crate::counters::{DropReason, PortCountersSnapshot};
use crate::fdb::FlushFilter;
use crate::flow_match::{FlowMatch, IpPrefix, MacMatch};
use crate::flow_table::{Action, ActionList, FlowError, FlowRule, RuleId};
use crate::memory_port::{memory_port, MemoryPortHandle};
use crate::port::PortCaps;
use crate::vlan::PortVlanMode;

// ---- Small value pools, so that flows, rules and FDB entries meet often. ----

const MACS: [MacAddr; 8] = [
    MacAddr([0x02, 0, 0, 0, 0, 1]),
    MacAddr([0x02, 0, 0, 0, 0, 2]),
    MacAddr([0x02, 0, 0, 0, 0, 3]),
    MacAddr([0x02, 0, 0, 0, 0, 4]),
    MacAddr([0x02, 0, 0, 0, 0, 5]),
    MacAddr([0x02, 0, 0, 0, 0, 6]),
    MacAddr([0x02, 0, 0, 0, 0, 7]),
    MacAddr([0x02, 0, 0, 0, 0, 8]),
];
const MULTICAST: MacAddr = MacAddr([0x01, 0x00, 0x5e, 0, 0, 1]);
const IP4: [[u8; 4]; 3] = [[10, 0, 0, 1], [10, 0, 0, 2], [10, 0, 1, 1]];
const IP6: [[u8; 16]; 3] = [
    [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
    [0xfd, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1],
];
const L4_PORTS: [u16; 3] = [53, 80, 443];
const VLANS: [u16; 3] = [10, 20, 30];
/// An EtherType the switch knows nothing about (IEEE local experimental).
const OTHER_ETHERTYPE: u16 = 0x88b5;
/// Marks the 8-byte trailer `MAGIC ++ id` every injected frame ends with.
const MAGIC: [u8; 4] = *b"WEFT";
/// Slots a case may use (more than the ports it starts with, for rules naming absent ports).
const SLOTS: u16 = 8;
const T0: Timestamp = Timestamp(1_000_000_000);

/// Source MACs 0..8 are the unicast pool; 8 is a multicast address (an invalid source).
pub(super) fn src_mac(i: usize) -> MacAddr {
    MACS.get(i).copied().unwrap_or(MULTICAST)
}

/// Destination MACs 0..8 are the unicast pool; 8 is broadcast, 9 multicast.
fn dst_mac(i: usize) -> MacAddr {
    match i {
        8 => MacAddr::BROADCAST,
        9 => MULTICAST,
        _ => MACS[i % MACS.len()],
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) enum L4Spec {
    Tcp(usize, usize),
    Udp(usize, usize),
    Icmp,
}

#[derive(Debug, Clone, Copy)]
pub(super) enum L3Spec {
    V4 {
        src: usize,
        dst: usize,
        l4: L4Spec,
    },
    V6 {
        src: usize,
        dst: usize,
        l4: L4Spec,
    },
    Arp {
        spa: usize,
        tpa: usize,
    },
    Other,
    /// Ten bytes: too short for an Ethernet header. Carries no id.
    Runt,
}

/// One frame to inject.
#[derive(Debug, Clone, Copy)]
pub(super) struct PacketSpec {
    pub(super) src: usize,
    pub(super) dst: usize,
    /// 802.1Q tag (VID 0 is a priority tag).
    pub(super) tag: Option<u16>,
    pub(super) l3: L3Spec,
}

fn trailer(id: u32) -> Vec<u8> {
    let mut t = MAGIC.to_vec();
    t.extend_from_slice(&id.to_be_bytes());
    t
}

/// The id in a frame's trailer.
fn id_of(frame: &[u8]) -> Option<u32> {
    let tail = frame.get(frame.len().checked_sub(8)?..)?;
    (tail[..4] == MAGIC).then(|| u32::from_be_bytes([tail[4], tail[5], tail[6], tail[7]]))
}

/// Builds the frame `p` describes, ending with the trailer for `id`.
pub(super) fn build_frame(p: &PacketSpec, id: u32) -> Vec<u8> {
    let (src, dst) = (src_mac(p.src), dst_mac(p.dst));
    let payload = trailer(id);
    let mut f = Vec::new();
    match p.l3 {
        L3Spec::V4 { src: s, dst: d, l4 } => {
            let b = PacketBuilder::ethernet2(src.0, dst.0).ipv4(IP4[s], IP4[d], 64);
            match l4 {
                L4Spec::Tcp(sp, dp) => b
                    .tcp(L4_PORTS[sp], L4_PORTS[dp], 1, 1024)
                    .write(&mut f, &payload),
                L4Spec::Udp(sp, dp) => b.udp(L4_PORTS[sp], L4_PORTS[dp]).write(&mut f, &payload),
                L4Spec::Icmp => b.icmpv4_echo_request(7, 1).write(&mut f, &payload),
            }
            .unwrap();
        }
        L3Spec::V6 { src: s, dst: d, l4 } => {
            let b = PacketBuilder::ethernet2(src.0, dst.0).ipv6(IP6[s], IP6[d], 64);
            match l4 {
                L4Spec::Tcp(sp, dp) => b
                    .tcp(L4_PORTS[sp], L4_PORTS[dp], 1, 1024)
                    .write(&mut f, &payload),
                L4Spec::Udp(sp, dp) => b.udp(L4_PORTS[sp], L4_PORTS[dp]).write(&mut f, &payload),
                L4Spec::Icmp => b.icmpv6_echo_request(7, 1).write(&mut f, &payload),
            }
            .unwrap();
        }
        L3Spec::Arp { spa, tpa } => {
            f.extend_from_slice(&dst.0);
            f.extend_from_slice(&src.0);
            f.extend_from_slice(&ethertype::ARP.to_be_bytes());
            f.extend_from_slice(&[0, 1, 0x08, 0x00, 6, 4, 0, 1]);
            f.extend_from_slice(&src.0);
            f.extend_from_slice(&IP4[spa]);
            f.extend_from_slice(&[0; 6]);
            f.extend_from_slice(&IP4[tpa]);
            f.extend_from_slice(&payload);
        }
        L3Spec::Other => {
            f.extend_from_slice(&dst.0);
            f.extend_from_slice(&src.0);
            f.extend_from_slice(&OTHER_ETHERTYPE.to_be_bytes());
            f.extend_from_slice(&payload);
        }
        L3Spec::Runt => return vec![0x5a; 10],
    }
    if let Some(vid) = p.tag {
        let [a, b] = vid.to_be_bytes();
        f.splice(12..12, [0x81, 0x00, a, b]);
    }
    f
}

// ---- Generators. ----

fn l4_spec() -> impl Strategy<Value = L4Spec> {
    prop_oneof![
        2 => (0..3usize, 0..3usize).prop_map(|(s, d)| L4Spec::Tcp(s, d)),
        2 => (0..3usize, 0..3usize).prop_map(|(s, d)| L4Spec::Udp(s, d)),
        1 => Just(L4Spec::Icmp),
    ]
}

fn l3_spec() -> impl Strategy<Value = L3Spec> {
    prop_oneof![
        4 => (0..3usize, 0..3usize, l4_spec())
            .prop_map(|(src, dst, l4)| L3Spec::V4 { src, dst, l4 }),
        3 => (0..3usize, 0..3usize, l4_spec())
            .prop_map(|(src, dst, l4)| L3Spec::V6 { src, dst, l4 }),
        1 => (0..3usize, 0..3usize).prop_map(|(spa, tpa)| L3Spec::Arp { spa, tpa }),
        2 => Just(L3Spec::Other),
        1 => Just(L3Spec::Runt),
    ]
}

pub(super) fn packet_spec() -> impl Strategy<Value = PacketSpec> {
    (
        prop_oneof![30 => 0..8usize, 1 => Just(8usize)],
        0..10usize,
        prop_oneof![
            3 => Just(None),
            1 => Just(Some(0u16)),
            4 => select(VLANS.to_vec()).prop_map(Some),
        ],
        l3_spec(),
    )
        .prop_map(|(src, dst, tag, l3)| PacketSpec { src, dst, tag, l3 })
}

pub(super) fn vlan_mode() -> impl Strategy<Value = PortVlanMode> {
    prop_oneof![
        3 => Just(PortVlanMode::plain()),
        1 => select(vec![10u16, 20]).prop_map(|v| PortVlanMode::access(v).unwrap()),
        1 => (any::<bool>(), prop::option::of(select(VLANS.to_vec()))).prop_map(|(both, native)| {
            let vids = if both { vec![10, 20] } else { vec![10] };
            PortVlanMode::trunk(vids, native).unwrap()
        }),
    ]
}

pub(super) fn port_options() -> impl Strategy<Value = PortOptions> {
    (
        vlan_mode(),
        prop::bool::weighted(0.75),
        prop::bool::weighted(0.9),
    )
        .prop_map(|(vlan, flood_unknown_unicast, learning)| PortOptions {
            vlan,
            flood_unknown_unicast,
            learning,
            ..PortOptions::default()
        })
}

/// How a port is attached: its options and its transmit queue (a tiny one fills up).
#[derive(Debug, Clone)]
pub(super) struct PortSetup {
    pub(super) options: PortOptions,
    pub(super) tx_queue: usize,
}

/// Adds in-memory port `p{slot}` to `sw`, as `setup` says, with capabilities `caps`.
pub(super) fn attach_port(
    sw: &mut Switch,
    slot: usize,
    setup: &PortSetup,
    caps: PortCaps,
) -> (PortId, MemoryPortHandle) {
    let (rx, tx, handle) = memory_port(caps, setup.tx_queue);
    let options = setup.options.clone();
    let id = sw
        .add_port(
            &format!("p{slot}"),
            Some(Box::new(rx)),
            Box::new(tx),
            options,
        )
        .unwrap();
    (id, handle)
}

pub(super) fn port_setup() -> impl Strategy<Value = PortSetup> {
    (
        port_options(),
        prop_oneof![5 => Just(1024usize), 1 => Just(2usize)],
    )
        .prop_map(|(options, tx_queue)| PortSetup { options, tx_queue })
}

fn mac_match(with_group: bool) -> impl Strategy<Value = MacMatch> {
    let pool: Vec<MacAddr> = if with_group {
        MACS.iter()
            .copied()
            .chain([MacAddr::BROADCAST, MULTICAST])
            .collect()
    } else {
        MACS.to_vec()
    };
    prop_oneof![
        4 => select(pool).prop_map(MacMatch::exact),
        1 => Just(MacMatch::MULTICAST),
        // Odd last byte: MACS 1, 3, 5, 7.
        1 => Just(MacMatch {
            addr: MacAddr([0, 0, 0, 0, 0, 1]),
            mask: MacAddr([0, 0, 0, 0, 0, 1]),
        }),
    ]
}

fn v4_prefix() -> impl Strategy<Value = IpPrefix> {
    select(vec![
        ([10, 0, 0, 1], 32),
        ([10, 0, 0, 2], 32),
        ([10, 0, 0, 0], 24),
        ([10, 0, 1, 0], 24),
        ([0, 0, 0, 0], 0),
    ])
    .prop_map(|(a, len): ([u8; 4], u8)| IpPrefix {
        addr: IpAddr::V4(Ipv4Addr::from(a)),
        len,
    })
}

fn v6_prefix() -> impl Strategy<Value = IpPrefix> {
    select(vec![
        (IP6[0], 128),
        (IP6[1], 128),
        ([0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 64),
        ([0xfd, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0], 64),
        ([0; 16], 0),
    ])
    .prop_map(|(a, len): ([u8; 16], u8)| IpPrefix {
        addr: IpAddr::V6(Ipv6Addr::from(a)),
        len,
    })
}

/// The L3/L4 part of a match, valid by construction (prerequisites included).
#[derive(Debug, Clone, Copy)]
struct L3Match {
    ethertype: Option<u16>,
    ip_src: Option<IpPrefix>,
    ip_dst: Option<IpPrefix>,
    ip_proto: Option<u8>,
    l4_src: Option<u16>,
    l4_dst: Option<u16>,
}

const NO_L3: L3Match = L3Match {
    ethertype: None,
    ip_src: None,
    ip_dst: None,
    ip_proto: None,
    l4_src: None,
    l4_dst: None,
};

fn ip_match(v6: bool) -> impl Strategy<Value = L3Match> {
    let prefix = if v6 {
        v6_prefix().boxed()
    } else {
        v4_prefix().boxed()
    };
    let icmp = if v6 { 58u8 } else { 1 };
    let echo = if v6 { 128u16 } else { 8 };
    let transport = prop_oneof![
        2 => Just(None),
        3 => (
            select(vec![6u8, 17]),
            prop::option::weighted(0.5, select(L4_PORTS.to_vec())),
            prop::option::weighted(0.5, select(L4_PORTS.to_vec())),
        )
            .prop_map(Some),
        1 => (prop::option::of(Just(echo)), prop::option::of(Just(0u16)))
            .prop_map(move |(t, c)| Some((icmp, t, c))),
    ];
    (
        prop::option::weighted(0.4, prefix.clone()),
        prop::option::weighted(0.4, prefix),
        transport,
    )
        .prop_map(move |(ip_src, ip_dst, transport)| L3Match {
            ethertype: Some(if v6 { ethertype::IPV6 } else { ethertype::IPV4 }),
            ip_src,
            ip_dst,
            ip_proto: transport.map(|t| t.0),
            l4_src: transport.and_then(|t| t.1),
            l4_dst: transport.and_then(|t| t.2),
        })
}

fn l3_match() -> impl Strategy<Value = L3Match> {
    prop_oneof![
        4 => Just(NO_L3),
        1 => select(vec![ethertype::ARP, OTHER_ETHERTYPE]).prop_map(|e| L3Match {
            ethertype: Some(e),
            ..NO_L3
        }),
        2 => ip_match(false),
        2 => ip_match(true),
    ]
}

pub(super) fn flow_match() -> impl Strategy<Value = FlowMatch> {
    (
        prop::option::weighted(0.3, (0..SLOTS).prop_map(PortId)),
        prop::option::weighted(0.3, mac_match(false)),
        prop::option::weighted(0.3, mac_match(true)),
        prop::option::weighted(0.3, select(vec![0u16, 10, 20, 30])),
        l3_match(),
    )
        .prop_map(|(in_port, src_mac, dst_mac, vlan, l3)| FlowMatch {
            in_port,
            src_mac,
            dst_mac,
            vlan,
            ethertype: l3.ethertype,
            ip_src: l3.ip_src,
            ip_dst: l3.ip_dst,
            ip_proto: l3.ip_proto,
            l4_src: l3.l4_src,
            l4_dst: l3.l4_dst,
        })
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        // One port id past the slots, for outputs to a port that never exists.
        3 => (0..=SLOTS).prop_map(|p| Action::Output(PortId(p))),
        1 => Just(Action::Flood),
        3 => Just(Action::Normal),
        1 => select(vec![10u16, 20, 30, 40]).prop_map(Action::PushVlan),
        1 => Just(Action::PopVlan),
        1 => Just(Action::Controller),
    ]
}

/// A valid action list: `Drop` alone, or 1..=4 actions with at most one push and one pop.
pub(super) fn actions() -> impl Strategy<Value = Vec<Action>> {
    prop_oneof![
        1 => Just(vec![Action::Drop]),
        6 => prop::collection::vec(action(), 1..=4).prop_map(|list| {
            let (mut pushed, mut popped) = (false, false);
            list.into_iter()
                .filter(|a| match a {
                    Action::PushVlan(_) => !core::mem::replace(&mut pushed, true),
                    Action::PopVlan => !core::mem::replace(&mut popped, true),
                    _ => true,
                })
                .collect()
        }),
    ]
}

/// The lowest-priority rule that leaves everything to the learning bridge.
fn catch_all_normal() -> FlowRule {
    FlowRule::new(0, FlowMatch::ANY, ActionList::single(Action::Normal))
}

#[derive(Debug, Clone)]
enum FlushKind {
    All,
    Dynamic,
    Port(usize),
    DynamicOnPort(usize),
    Vlan(u16),
}

/// A packet of a burst: one of the case's recurring flows, or a one-off.
#[derive(Debug, Clone)]
enum PacketChoice {
    Flow(usize),
    Fresh(PacketSpec),
}

#[derive(Debug, Clone)]
enum Op {
    /// A burst of one recurring flow from its home port (cache hits within the batch).
    SendFlow {
        flow: usize,
        repeat: usize,
    },
    /// One recurring flow, then again after some milliseconds: a cached decision must not
    /// outlive the FDB entry it was made from.
    Revisit {
        flow: usize,
        after: u64,
    },
    /// A burst of mixed packets on one port.
    Send {
        slot: usize,
        packets: Vec<PacketChoice>,
    },
    AddRule {
        priority: u16,
        matches: FlowMatch,
        actions: Vec<Action>,
    },
    RemoveRule(usize),
    ClearRules,
    AddStatic {
        vlan: u16,
        mac: usize,
        slot: usize,
    },
    RemoveMac {
        vlan: u16,
        mac: usize,
    },
    Flush(FlushKind),
    RemovePort(usize),
    AttachPort(usize),
    SetOptions(usize, Box<PortOptions>),
    /// Milliseconds; the FDB ages entries out after 2 s.
    Advance(u64),
    Expire,
}

fn op() -> impl Strategy<Value = Op> {
    let vlan = || select(vec![0u16, 10, 20, 30]);
    let packet_choice = prop_oneof![
        3 => (0..8usize).prop_map(PacketChoice::Flow),
        2 => packet_spec().prop_map(PacketChoice::Fresh),
    ];
    prop_oneof![
        12 => (0..8usize, 1..=3usize).prop_map(|(flow, repeat)| Op::SendFlow { flow, repeat }),
        4 => (0..8usize, select(vec![150u64, 700, 1500]))
            .prop_map(|(flow, after)| Op::Revisit { flow, after }),
        8 => (0..usize::from(SLOTS), prop::collection::vec(packet_choice, 1..=6))
            .prop_map(|(slot, packets)| Op::Send { slot, packets }),
        4 => (0..4u16, flow_match(), actions())
            .prop_map(|(priority, matches, actions)| Op::AddRule {
                priority,
                matches,
                actions,
            }),
        1 => Just(Op::AddRule {
            priority: 0,
            matches: FlowMatch::ANY,
            actions: vec![Action::Normal],
        }),
        2 => any::<usize>().prop_map(Op::RemoveRule),
        1 => Just(Op::ClearRules),
        2 => (vlan(), 0..8usize, 0..usize::from(SLOTS))
            .prop_map(|(vlan, mac, slot)| Op::AddStatic { vlan, mac, slot }),
        1 => (vlan(), 0..8usize).prop_map(|(vlan, mac)| Op::RemoveMac { vlan, mac }),
        1 => prop_oneof![
            Just(FlushKind::All),
            Just(FlushKind::Dynamic),
            (0..usize::from(SLOTS)).prop_map(FlushKind::Port),
            (0..usize::from(SLOTS)).prop_map(FlushKind::DynamicOnPort),
            vlan().prop_map(FlushKind::Vlan),
        ]
        .prop_map(Op::Flush),
        1 => (0..usize::from(SLOTS)).prop_map(Op::RemovePort),
        2 => (0..usize::from(SLOTS)).prop_map(Op::AttachPort),
        1 => (0..usize::from(SLOTS), port_options()).prop_map(|(s, o)| Op::SetOptions(s, Box::new(o))),
        5 => select(vec![1u64, 50, 150, 700, 1500, 2500]).prop_map(Op::Advance),
        1 => Just(Op::Expire),
    ]
}

/// One case: the switch's batch size, the ports it starts with, its recurring flows (home
/// slot and frame) and the operations.
#[derive(Debug, Clone)]
struct Case {
    batch_size: usize,
    setups: Vec<PortSetup>,
    flows: Vec<(usize, PacketSpec)>,
    ops: Vec<Op>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        1..=8usize,
        prop::collection::vec(port_setup(), 4..=8),
        // Flow i sends from MAC i, so that flows' destinations are often learned sources.
        // and mostly in one VLAN.
        prop::collection::vec(
            (
                0..usize::from(SLOTS),
                packet_spec(),
                prop_oneof![4 => Just(None), 1 => Just(Some(10u16))],
            ),
            8,
        )
        .prop_map(|flows| {
            flows
                .into_iter()
                .enumerate()
                .map(|(i, (slot, spec, tag))| {
                    (
                        slot,
                        PacketSpec {
                            src: i,
                            tag,
                            ..spec
                        },
                    )
                })
                .collect()
        }),
        prop::collection::vec(op(), 1..=200),
    )
        .prop_map(|(batch_size, setups, flows, ops)| Case {
            batch_size,
            setups,
            flows,
            ops,
        })
}

// ---- The harness. ----

/// Drop reasons the ingress port may be charged with (no offloads in these frames).
const INGRESS_REASONS: [DropReason; 9] = [
    DropReason::Malformed,
    DropReason::TaggedOnAccessPort,
    DropReason::InvalidSourceMac,
    DropReason::VlanIngressDenied,
    DropReason::FlowRuleDrop,
    DropReason::SamePort,
    DropReason::NoDestination,
    DropReason::UpcallQueueFull,
    DropReason::PortGone,
];
/// Reasons the ingress stage gives for a packet as a whole: it then goes nowhere.
const VERDICT_REASONS: [DropReason; 6] = [
    DropReason::Malformed,
    DropReason::TaggedOnAccessPort,
    DropReason::InvalidSourceMac,
    DropReason::VlanIngressDenied,
    DropReason::FlowRuleDrop,
    DropReason::SamePort,
];
/// Drop reasons a destination port may be charged with (small frames, no offloads).
const EGRESS_REASONS: [DropReason; 2] = [DropReason::VlanEgressDenied, DropReason::TxQueueFull];

fn drop_delta(
    before: &PortCountersSnapshot,
    after: &PortCountersSnapshot,
) -> Vec<(DropReason, u64)> {
    DropReason::ALL
        .iter()
        .map(|&r| (r, after.drops(r) - before.drops(r)))
        .filter(|&(_, n)| n > 0)
        .collect()
}

struct LivePort {
    id: PortId,
    handle: MemoryPortHandle,
}

struct Harness {
    sw: Switch,
    setups: Vec<PortSetup>,
    live: Vec<Option<LivePort>>,
    flows: Vec<(usize, PacketSpec)>,
    rules: Vec<RuleId>,
    now: Timestamp,
    next_id: u32,
}

impl Harness {
    fn new(case: &Case) -> Harness {
        let config = SwitchConfig {
            batch_size: case.batch_size,
            fdb: crate::fdb::FdbConfig {
                max_entries: 12,
                max_per_port: 4,
                ageing: Duration::from_secs(2),
                refresh_granularity: Duration::from_millis(100),
                ..crate::fdb::FdbConfig::default()
            },
            max_rules: 16,
            flow_cache_capacity: 64,
            upcall_queue_len: 3,
            upcall_snaplen: 2048,
        };
        let mut h = Harness {
            sw: Switch::new("br0", config).unwrap(),
            setups: case.setups.clone(),
            live: (0..case.setups.len()).map(|_| None).collect(),
            flows: case.flows.clone(),
            rules: Vec::new(),
            now: T0,
            next_id: 0,
        };
        for slot in 0..case.setups.len() {
            h.attach(slot);
        }
        // The cache is only used when rules exist: start with one that bridges.
        let id = h.sw.add_rule(catch_all_normal()).unwrap();
        h.rules.push(id);
        h
    }

    fn slot(&self, slot: usize) -> usize {
        slot % self.live.len()
    }

    fn port(&self, slot: usize) -> Option<&LivePort> {
        self.live[self.slot(slot)].as_ref()
    }

    fn attach(&mut self, slot: usize) {
        let slot = self.slot(slot);
        if self.live[slot].is_some() {
            return;
        }
        let (id, handle) = attach_port(
            &mut self.sw,
            slot,
            &self.setups[slot],
            PortCaps::plain(1500),
        );
        self.live[slot] = Some(LivePort { id, handle });
    }

    fn run(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match op {
            Op::SendFlow { flow, repeat } => {
                let (slot, spec) = self.flows[flow % self.flows.len()];
                self.send(slot, &vec![spec; *repeat])?;
            }
            Op::Revisit { flow, after } => {
                let (slot, spec) = self.flows[flow % self.flows.len()];
                self.send(slot, &[spec])?;
                self.now = Timestamp(self.now.0 + after * 1_000_000);
                self.send(slot, &[spec])?;
            }
            Op::Send { slot, packets } => {
                let specs: Vec<PacketSpec> = packets
                    .iter()
                    .map(|p| match p {
                        PacketChoice::Flow(i) => self.flows[i % self.flows.len()].1,
                        PacketChoice::Fresh(spec) => *spec,
                    })
                    .collect();
                self.send(*slot, &specs)?;
            }
            Op::AddRule {
                priority,
                matches,
                actions,
            } => {
                let rule = FlowRule::new(
                    *priority,
                    *matches,
                    ActionList::from_slice(actions).unwrap(),
                );
                match self.sw.add_rule(rule) {
                    Ok(id) => self.rules.push(id),
                    Err(SwitchError::Flow(FlowError::TableFull { .. })) => {}
                    Err(e) => prop_assert!(false, "valid rule {rule:?} refused: {e}"),
                }
            }
            Op::RemoveRule(i) => {
                if !self.rules.is_empty() {
                    let id = self.rules.remove(i % self.rules.len());
                    prop_assert!(self.sw.remove_rule(id).is_some());
                }
            }
            Op::ClearRules => {
                self.sw.clear_rules();
                self.rules.clear();
            }
            Op::AddStatic { vlan, mac, slot } => {
                if let Some(id) = self.port(*slot).map(|p| p.id) {
                    match self.sw.add_static_mac(*vlan, MACS[*mac], id) {
                        Ok(()) => prop_assert_eq!(
                            self.sw.fdb().lookup(*vlan, MACS[*mac], self.now),
                            Some(id)
                        ),
                        Err(SwitchError::Fdb(crate::fdb::FdbError::TableFull)) => {}
                        Err(e) => prop_assert!(false, "static entry refused: {e}"),
                    }
                }
            }
            Op::RemoveMac { vlan, mac } => {
                self.sw.remove_mac(*vlan, MACS[*mac]);
            }
            Op::Flush(kind) => {
                let port_of = |h: &Self, s: usize| h.port(s).map_or(PortId(SLOTS), |p| p.id);
                let filter = match kind {
                    FlushKind::All => FlushFilter::All,
                    FlushKind::Dynamic => FlushFilter::Dynamic,
                    FlushKind::Port(s) => FlushFilter::Port(port_of(self, *s)),
                    FlushKind::DynamicOnPort(s) => FlushFilter::DynamicOnPort(port_of(self, *s)),
                    FlushKind::Vlan(v) => FlushFilter::Vlan(*v),
                };
                self.sw.flush_fdb(filter);
            }
            Op::RemovePort(slot) => {
                let slot = self.slot(*slot);
                if let Some(p) = self.live[slot].take() {
                    self.sw.remove_port(p.id).unwrap();
                    prop_assert_eq!(self.sw.fdb().len_for_port(p.id), 0);
                }
            }
            Op::AttachPort(slot) => self.attach(*slot),
            Op::SetOptions(slot, options) => {
                let slot = self.slot(*slot);
                if let Some(id) = self.live[slot].as_ref().map(|p| p.id) {
                    self.sw.set_port_options(id, (**options).clone()).unwrap();
                    self.setups[slot].options = (**options).clone();
                }
            }
            Op::Advance(ms) => self.now = Timestamp(self.now.0 + ms * 1_000_000),
            Op::Expire => {
                self.sw.expire(self.now);
            }
        }
        prop_assert_eq!(self.sw.cache_mismatches, 0, "after {:?}", op);
        Ok(())
    }

    /// Injects `specs` on `slot`, polls until they are all received, and checks where each
    /// went against the counters.
    fn send(&mut self, slot: usize, specs: &[PacketSpec]) -> Result<(), TestCaseError> {
        let slot = self.slot(slot);
        let Some(ingress) = self.live[slot].as_ref() else {
            return Ok(());
        };
        let ingress_id = ingress.id;
        let snapshot = |h: &Self| -> Vec<Option<PortCountersSnapshot>> {
            h.live
                .iter()
                .map(|p| {
                    p.as_ref()
                        .map(|p| h.sw.port_counters(p.id).unwrap().snapshot())
                })
                .collect()
        };
        let before = snapshot(self);
        let upcalls_before = self.sw.stats().upcalls;

        let mut originals = std::collections::BTreeMap::new();
        let mut received = 0;
        let mut poll = |sw: &mut Switch| -> Result<(), TestCaseError> {
            while ingress.handle.pending_rx() > 0 {
                let n = sw.poll(ingress_id, self.now);
                prop_assert!(n > 0, "a port with pending frames received none");
                received += n;
                prop_assert_eq!(sw.cache_mismatches, 0, "sending {:?}", specs);
            }
            Ok(())
        };
        for spec in specs {
            let id = self.next_id;
            self.next_id += 1;
            let frame = build_frame(spec, id);
            // A port's receive queue is as short as its transmit queue: poll when full.
            if !ingress.handle.inject(&frame) {
                poll(&mut self.sw)?;
                prop_assert!(ingress.handle.inject(&frame));
            }
            if id_of(&frame).is_some() {
                originals.insert(id, frame);
            }
        }
        poll(&mut self.sw)?;
        prop_assert_eq!(received, specs.len());

        // Where the frames went.
        let after = snapshot(self);
        let mut delivered = BTreeSet::new();
        for (s, port) in self.live.iter().enumerate() {
            let Some(port) = port else { continue };
            let sent = port.handle.take_sent();
            let (b, a) = (before[s].as_ref().unwrap(), after[s].as_ref().unwrap());
            prop_assert_eq!(a.tx_packets - b.tx_packets, sent.len() as u64);
            for (frame, _) in &sent {
                prop_assert!(s != slot, "a frame went back out of its ingress port");
                let id = id_of(frame);
                let original = id.and_then(|id| originals.get(&id));
                prop_assert!(original.is_some(), "unknown frame {frame:02x?}");
                check_rewrite(original.unwrap(), frame)?;
                delivered.extend(id);
            }
        }
        let mut upcalled = BTreeSet::new();
        let mut upcalls = 0u64;
        self.sw.drain_upcalls(|u| {
            upcalls += 1;
            upcalled.extend(id_of(&u.data));
        });
        let upcall_stats = self.sw.stats().upcalls;
        prop_assert_eq!(upcalls, upcall_stats.queued - upcalls_before.queued);
        prop_assert_eq!(
            upcalled.len() as u64,
            upcalls,
            "one upcall per packet at most"
        );
        prop_assert!(upcalled.iter().all(|id| originals.contains_key(id)));

        // Conservation.
        let (b, a) = (
            before[slot].as_ref().unwrap(),
            after[slot].as_ref().unwrap(),
        );
        prop_assert_eq!(a.rx_packets - b.rx_packets, specs.len() as u64);
        let ingress_drops = drop_delta(b, a);
        for (r, _) in &ingress_drops {
            prop_assert!(INGRESS_REASONS.contains(r), "ingress charged with {r:?}");
        }
        let mut total_drops: u64 = ingress_drops.iter().map(|(_, n)| n).sum();
        for s in (0..self.live.len()).filter(|&s| s != slot) {
            if let (Some(b), Some(a)) = (&before[s], &after[s]) {
                for (r, n) in drop_delta(b, a) {
                    prop_assert!(EGRESS_REASONS.contains(&r), "egress charged with {r:?}");
                    total_drops += n;
                }
            }
        }
        let reached: BTreeSet<u32> = delivered.union(&upcalled).copied().collect();
        let lost = specs.len() - reached.len();
        prop_assert!(
            lost as u64 <= total_drops,
            "{lost} packets reached no one but {total_drops} drops were counted"
        );
        // With one packet every drop is its own: a packet refused as a whole went nowhere
        // and was counted once; one that got through was charged at most with the copies
        // or the upcall that failed.
        if specs.len() == 1 {
            if ingress_drops
                .iter()
                .any(|(r, _)| VERDICT_REASONS.contains(r))
            {
                prop_assert_eq!(total_drops, 1);
                prop_assert!(reached.is_empty());
            }
            // NoDestination means no port was named that could take the packet: never
            // on top of a drop some port counted for it.
            if ingress_drops
                .iter()
                .any(|(r, _)| *r == DropReason::NoDestination)
            {
                prop_assert_eq!(total_drops, 1, "{:?}", ingress_drops);
            }
            if !delivered.is_empty() {
                prop_assert!(ingress_drops
                    .iter()
                    .all(|(r, _)| matches!(r, DropReason::PortGone | DropReason::UpcallQueueFull)));
            }
        }
        Ok(())
    }

    /// Makes sure the cache is used: a rule, a port pair that admits untagged frames, and
    /// one flow sent three times.
    fn use_the_cache(&mut self) -> Result<(), TestCaseError> {
        for slot in 0..2 {
            self.attach(slot);
            let id = self.port(slot).unwrap().id;
            self.sw
                .set_port_options(id, PortOptions::default())
                .unwrap();
            self.setups[slot].options = PortOptions::default();
        }
        self.run(&Op::ClearRules)?;
        self.run(&Op::AddRule {
            priority: 0,
            matches: FlowMatch::ANY,
            actions: vec![Action::Normal],
        })?;
        let spec = PacketSpec {
            src: 0,
            dst: 1,
            tag: None,
            l3: L3Spec::Other,
        };
        for _ in 0..3 {
            self.send(0, &[spec])?;
        }
        Ok(())
    }
}

/// The output is the original with its outer tag (if any) replaced by at most two 802.1Q
/// tags: MAC addresses and everything after the outer tag are untouched.
fn check_rewrite(original: &[u8], out: &[u8]) -> Result<(), TestCaseError> {
    let body_offset = if original[12..14] == [0x81, 0x00] {
        16
    } else {
        12
    };
    let body = &original[body_offset..];
    prop_assert_eq!(&out[..12], &original[..12]);
    prop_assert!(out.ends_with(body), "body changed");
    let head = out.len() - body.len();
    prop_assert!(matches!(head, 12 | 16 | 20), "head of {head} bytes");
    for tag in (12..head).step_by(4) {
        prop_assert_eq!(&out[tag..tag + 2], &[0x81, 0x00][..]);
    }
    Ok(())
}

#[test]
fn cached_decisions_equal_uncached_ones_and_every_packet_is_accounted_for() {
    let mut runner = TestRunner::new(Config {
        cases: 96,
        ..Config::default()
    });
    let cases_with_hits = Cell::new(0u32);
    let cases_run = Cell::new(0u32);
    let result = runner.run(&case(), |case| {
        let mut h = Harness::new(&case);
        for op in &case.ops {
            h.run(op)?;
        }
        cases_run.set(cases_run.get() + 1);
        if h.sw.stats().flow_cache.hits > 0 {
            cases_with_hits.set(cases_with_hits.get() + 1);
        }
        h.use_the_cache()?;
        prop_assert!(h.sw.stats().flow_cache.hits > 0, "the cache was never hit");
        prop_assert_eq!(h.sw.cache_mismatches, 0);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // The random operations alone must exercise the cache in most cases, or the
    // equivalence above would be checked mostly by the fixed epilogue.
    assert!(
        cases_with_hits.get() * 2 > cases_run.get(),
        "only {} of {} cases hit the cache",
        cases_with_hits.get(),
        cases_run.get()
    );
}

proptest! {
    #![proptest_config(Config::with_cases(64))]

    /// Plain ports do no VLAN processing ("tagged frames keep their tag"): a tagged frame
    /// crosses two of them byte for byte, whatever its TPID (802.1Q, 802.1ad, the legacy
    /// 0x9100), priority, drop-eligible bit or VID (0: a priority tag).
    #[test]
    fn plain_ports_forward_tagged_frames_byte_for_byte(
        tpid in select(vec![0x8100u16, 0x88a8, 0x9100]),
        pcp in 0u16..8,
        dei in any::<bool>(),
        vid in 0u16..4095,
    ) {
        let mut sw = Switch::new("br0", SwitchConfig::default()).unwrap();
        let mut handles = Vec::new();
        for name in ["a", "b"] {
            let (rx, tx, h) = memory_port(PortCaps::plain(1500), 8);
            let id = sw
                .add_port(name, Some(Box::new(rx)), Box::new(tx), PortOptions::default())
                .unwrap();
            handles.push((id, h));
        }
        let spec = PacketSpec {
            src: 0,
            dst: 8,
            tag: None,
            l3: L3Spec::V4 { src: 0, dst: 1, l4: L4Spec::Udp(0, 1) },
        };
        let mut frame = build_frame(&spec, 1);
        let tci = (pcp << 13) | (u16::from(dei) << 12) | vid;
        frame.splice(12..12, tpid.to_be_bytes().into_iter().chain(tci.to_be_bytes()));
        prop_assert!(handles[0].1.inject(&frame));
        sw.poll(handles[0].0, T0);
        let out: Vec<Vec<u8>> = handles[1].1.take_sent().into_iter().map(|(f, _)| f).collect();
        prop_assert_eq!(out, vec![frame]);
    }
}
