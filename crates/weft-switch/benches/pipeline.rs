//! Micro-benchmarks of the switch pipeline: ns per packet through `Switch::poll`.
//!
//! One iteration is one `Switch::poll` of the ingress port `p0`: one batch received from a
//! replay port (no lock, no copy on receive), read and classified, then delivered, each
//! frame copied once into the destination's fixed ring of slots. Criterion's throughput is
//! the batch size, so its "elements" are packets.
//!
//! The matrix varies one dimension at a time around the headline case (learning bridge,
//! 64 B unicast, batch 64, 2 ports, no flow rules), plus broadcast and a flow cache
//! hit/miss pair and a port-to-port rule (IPv4 and IPv6). `scripts/bench-core` runs it and prints the table in
//! `docs/PERFORMANCE.md`. Every case checks, before and after it is measured, that the
//! traffic does what its name says (no flooding in unicast cases, every packet delivered,
//! no drops, cache hits or misses as intended), so a number never describes a different
//! path than the one it is reported for.

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput};
use weft_packet::MacAddr;
use weft_switch::memory_port::replay_port;
use weft_switch::{
    Action, ActionList, FlowMatch, FlowRule, PortCaps, PortId, PortOptions, Switch, SwitchConfig,
    Timestamp,
};

/// The pipeline is handed a fixed time: the FDB's once-a-second refresh and ageing never
/// fire while measuring (a daemon would read its clock once per batch, outside the core).
const NOW: Timestamp = Timestamp::from_secs(1);

/// Distinct frame buffers the ingress port cycles through, like a NIC or virtio ring.
const RING: usize = 256;

/// Distinct UDP flows in the flow-cache-hit case (all stay cached).
const FEW_FLOWS: usize = 4;

/// Distinct UDP flows in the flow-cache-miss case: 16 times the cache's 4096 entries.
const MANY_FLOWS: usize = 65_536;

/// What the ingress port sends.
#[derive(Clone, Copy, Debug)]
enum Traffic {
    /// Every frame to one learned station behind `p1`.
    Unicast,
    /// Frames to learned stations behind every other port in turn.
    UnicastSpread,
    /// Every frame to ff:ff:ff:ff:ff:ff: flooded to every other port.
    Broadcast,
    /// Unicast to `p1`, UDP source ports cycling over `flows` values; a flow rule is
    /// installed (matching nothing of this traffic) so the flow cache path is taken.
    CachedFlows { flows: usize },
    /// Every frame to one learned station behind `p1`, forwarded by the rule
    /// `in_port=p0 actions=output:p1` (a switch programmed port to port by a controller).
    PortRule,
    /// As `PortRule`, the frames UDP over IPv6.
    PortRuleV6,
}

/// One benchmark case.
#[derive(Clone, Copy, Debug)]
struct Case {
    kind: &'static str,
    frame_len: usize,
    batch: usize,
    ports: usize,
    traffic: Traffic,
}

impl Case {
    const HEADLINE: Case = Case {
        kind: "unicast",
        frame_len: 64,
        batch: 64,
        ports: 2,
        traffic: Traffic::Unicast,
    };

    /// Frame size, batch and ports, as `64B_b64_p2` (the table script parses it).
    fn parameter(&self) -> String {
        format!("{}B_b{}_p{}", self.frame_len, self.batch, self.ports)
    }

    fn id(&self) -> BenchmarkId {
        BenchmarkId::new(self.kind, self.parameter())
    }

    /// Copies delivered per received packet.
    fn fanout(&self) -> u64 {
        match self.traffic {
            Traffic::Broadcast => u64::try_from(self.ports - 1).unwrap(),
            _ => 1,
        }
    }
}

/// The matrix: one dimension at a time around the headline.
fn cases() -> Vec<Case> {
    let h = Case::HEADLINE;
    let mut v = vec![h];
    v.push(Case {
        frame_len: 1514,
        ..h
    });
    for batch in [1, 8, 256] {
        v.push(Case { batch, ..h });
    }
    for ports in [8, 64] {
        v.push(Case { ports, ..h });
    }
    for ports in [8, 64] {
        v.push(Case {
            kind: "unicast_spread",
            ports,
            traffic: Traffic::UnicastSpread,
            ..h
        });
    }
    v.push(Case {
        kind: "broadcast",
        ports: 8,
        traffic: Traffic::Broadcast,
        ..h
    });
    v.push(Case {
        kind: "cache_hit",
        traffic: Traffic::CachedFlows { flows: FEW_FLOWS },
        ..h
    });
    v.push(Case {
        kind: "cache_miss",
        traffic: Traffic::CachedFlows { flows: MANY_FLOWS },
        ..h
    });
    v.push(Case {
        kind: "port_rule",
        traffic: Traffic::PortRule,
        ..h
    });
    v.push(Case {
        kind: "port_rule_v6",
        traffic: Traffic::PortRuleV6,
        ..h
    });
    v
}

fn station(i: usize) -> MacAddr {
    let [_, _, _, _, _, _, hi, lo] = i.to_be_bytes();
    MacAddr([0x02, 0x00, 0x00, 0x00, hi, lo])
}

/// A UDP frame (over IPv6 when `ipv6`, else IPv4) of exactly `len` bytes (FCS excluded),
/// checksums filled in.
fn udp_frame(dst: MacAddr, src: MacAddr, src_port: u16, len: usize, ipv6: bool) -> Vec<u8> {
    let eth = etherparse::PacketBuilder::ethernet2(src.0, dst.0);
    let ip = if ipv6 {
        let a = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        eth.ipv6(a, [0xfd; 16], 64)
    } else {
        eth.ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
    };
    let builder = ip.udp(src_port, 4791);
    let payload = vec![0x5a; len - builder.size(0)];
    let mut frame = Vec::with_capacity(len);
    builder.write(&mut frame, &payload).unwrap();
    assert_eq!(frame.len(), len);
    frame
}

/// The frames the ingress port replays for `case`.
fn ingress_frames(case: &Case) -> Vec<Vec<u8>> {
    let src = station(0);
    let len = case.frame_len;
    match case.traffic {
        Traffic::Unicast | Traffic::PortRule => (0..RING)
            .map(|_| udp_frame(station(1), src, 1000, len, false))
            .collect(),
        Traffic::PortRuleV6 => (0..RING)
            .map(|_| udp_frame(station(1), src, 1000, len, true))
            .collect(),
        Traffic::UnicastSpread => (0..RING)
            .map(|i| udp_frame(station(1 + i % (case.ports - 1)), src, 1000, len, false))
            .collect(),
        Traffic::Broadcast => (0..RING)
            .map(|_| udp_frame(MacAddr::BROADCAST, src, 1000, len, false))
            .collect(),
        Traffic::CachedFlows { flows } => (0..RING.max(flows))
            .map(|i| {
                let port = u16::try_from(i % flows).unwrap();
                udp_frame(station(1), src, port, len, false)
            })
            .collect(),
    }
}

/// A switch with `case.ports` replay ports, every station learned, ready to measure.
fn build(case: &Case) -> (Switch, PortId) {
    let config = SwitchConfig {
        batch_size: case.batch,
        ..SwitchConfig::default()
    };
    let mut sw = Switch::new("bench", config).unwrap();
    let mut ids = Vec::with_capacity(case.ports);
    for i in 0..case.ports {
        let frames = if i == 0 {
            ingress_frames(case)
        } else {
            // Each other port announces its station once, so the bridge learns it.
            vec![udp_frame(station(0), station(i), 1000, 64, false)]
        };
        let (rx, tx) = replay_port(frames, PortCaps::plain(1500));
        let id = sw
            .add_port(
                &format!("p{i}"),
                Some(Box::new(rx)),
                Box::new(tx),
                PortOptions::default(),
            )
            .unwrap();
        ids.push(id);
    }
    if let Traffic::CachedFlows { .. } = case.traffic {
        // A rule no packet of the traffic matches: the table is not empty, so every
        // decision goes through the flow cache, and a miss scans the table.
        let unrelated = FlowMatch {
            in_port: Some(PortId(255)),
            ..FlowMatch::ANY
        };
        sw.add_rule(FlowRule::new(
            1,
            unrelated,
            ActionList::single(Action::Drop),
        ))
        .unwrap();
    }
    if let Traffic::PortRule | Traffic::PortRuleV6 = case.traffic {
        let from_p0 = FlowMatch {
            in_port: Some(ids[0]),
            ..FlowMatch::ANY
        };
        let to_p1 = ActionList::single(Action::Output(ids[1]));
        sw.add_rule(FlowRule::new(10, from_p0, to_p1)).unwrap();
    }
    // Pre-learn: every port speaks once (the ingress port last).
    for &id in ids.iter().skip(1).chain(ids.first()) {
        assert!(sw.poll(id, NOW) > 0);
    }
    for (i, &id) in ids.iter().enumerate() {
        assert_eq!(
            sw.fdb().lookup(0, station(i), NOW),
            Some(id),
            "p{i} not learned"
        );
    }
    let p0 = ids[0];
    // Warm-up, then check the steady state does what the case says.
    for _ in 0..64 {
        sw.poll(p0, NOW);
    }
    let before = Snapshot::take(&sw, p0);
    for _ in 0..64 {
        sw.poll(p0, NOW);
    }
    before.check(&sw, p0, case);
    (sw, p0)
}

/// Totals over every port, to check a measured stretch afterwards.
struct Snapshot {
    rx: u64,
    tx: u64,
    drops: u64,
    cache_hits: u64,
    cache_misses: u64,
}

impl Snapshot {
    fn take(sw: &Switch, p0: PortId) -> Snapshot {
        let mut s = Snapshot {
            rx: sw.port_counters(p0).unwrap().snapshot().rx_packets,
            tx: 0,
            drops: 0,
            cache_hits: sw.stats().flow_cache.hits,
            cache_misses: sw.stats().flow_cache.misses,
        };
        for (id, _) in sw.ports() {
            let c = sw.port_counters(id).unwrap().snapshot();
            s.tx += c.tx_packets;
            s.drops += c.total_drops();
        }
        s
    }

    /// Checks what happened since `self`: every packet received was delivered exactly
    /// `fanout` times (no flooding of unicast), nothing dropped, the cache hit or missed
    /// as the case intends.
    fn check(&self, sw: &Switch, p0: PortId, case: &Case) {
        let now = Snapshot::take(sw, p0);
        let rx = now.rx - self.rx;
        if rx == 0 {
            // Filtered out by the command line: nothing ran.
            return;
        }
        let id = format!("{}/{}", case.kind, case.parameter());
        assert_eq!(now.drops - self.drops, 0, "{id}: packets were dropped");
        assert_eq!(
            now.tx - self.tx,
            rx * case.fanout(),
            "{id}: copies delivered differ from the intended fanout (flooding?)"
        );
        let hits = now.cache_hits - self.cache_hits;
        let misses = now.cache_misses - self.cache_misses;
        match case.traffic {
            Traffic::CachedFlows { flows } if flows == FEW_FLOWS => {
                assert_eq!(misses, 0, "{id}: the flow cache missed");
                assert_eq!(hits, rx, "{id}: not every packet hit the flow cache");
            }
            Traffic::CachedFlows { .. } => {
                assert_eq!(hits + misses, rx, "{id}: packets bypassed the flow cache");
                assert!(
                    misses * 10 >= rx * 9,
                    "{id}: under 90% misses ({misses}/{rx})"
                );
            }
            Traffic::PortRule | Traffic::PortRuleV6 => {
                assert_eq!(hits + misses, rx, "{id}: packets bypassed the flow cache");
                assert_eq!(misses, 0, "{id}: the flow cache missed");
            }
            _ => assert_eq!(hits + misses, 0, "{id}: the flow cache was used"),
        }
    }
}

fn pipeline(c: &mut Criterion) {
    let mut group = c.benchmark_group("pipeline");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    for case in cases() {
        let (mut sw, p0) = build(&case);
        group.throughput(Throughput::Elements(u64::try_from(case.batch).unwrap()));
        let before = Snapshot::take(&sw, p0);
        group.bench_function(case.id(), |b| b.iter(|| sw.poll(p0, NOW)));
        before.check(&sw, p0, &case);
    }
    group.finish();
}

fn main() {
    // What `criterion_group!`/`criterion_main!` expand to, without their undocumented pub fn.
    let mut c = Criterion::default().without_plots().configure_from_args();
    pipeline(&mut c);
    c.final_summary();
}
