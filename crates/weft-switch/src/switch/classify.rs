//! Stages 1 and 2 of the pipeline: read each packet's headers into its key, learn its
//! source, and decide where it goes (flow cache → flow table → learning bridge).

use weft_packet::{FrameSummary, L3Summary, L4Summary, OffloadInfo};

use crate::counters::DropReason;
use crate::decision::{Decision, Target, VlanState};
use crate::fdb::Fdb;
use crate::flow_key::FlowKey;
use crate::flow_table::{Action, FlowRule};
use crate::port::PortRx;
use crate::types::{PortId, Timestamp, VlanId};
use crate::vlan::Ingress;

use super::Switch;

/// What the pipeline keeps per packet between stages.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PacketMeta {
    /// Where the part of the frame sent unchanged starts: after the MAC addresses and the
    /// outer VLAN tag, if any.
    pub(crate) body_offset: usize,
    /// Priority bits of the outer tag, kept when the packet is tagged again.
    pub(crate) pcp: u8,
    /// Offload state from the receiving port.
    pub(crate) offload: OffloadInfo,
}

/// Per-batch working memory, allocated once per switch.
pub struct BatchScratch {
    pub(crate) keys: Vec<FlowKey>,
    pub(crate) meta: Vec<PacketMeta>,
    pub(crate) decisions: Vec<Decision>,
}

impl BatchScratch {
    /// Room for batches of `capacity` packets.
    pub fn new(capacity: usize) -> Self {
        BatchScratch {
            keys: Vec::with_capacity(capacity),
            meta: Vec::with_capacity(capacity),
            decisions: Vec::with_capacity(capacity),
        }
    }
}

impl Switch {
    /// Stages 1 and 2 for the batch in `self.batch`, received on `in_port`.
    pub(super) fn classify(&mut self, in_port: PortId, rx: &dyn PortRx, now: Timestamp) {
        let Some(slot) = self.ports.get(in_port.index()).and_then(Option::as_ref) else {
            return;
        };
        let vlan_mode = &slot.options.vlan;
        let learning = slot.options.learning;
        let s = &mut self.scratch;
        s.keys.clear();
        s.meta.clear();
        s.decisions.clear();

        // Stage 1: read every header first (VALE's prefetch stage: the loop touches each
        // frame's first cache lines while they are hot).
        let mut rx_bytes = 0u64;
        for desc in self.batch.descs() {
            let frame = rx.frame(desc.handle);
            rx_bytes += frame.len() as u64;
            let (key, meta, verdict) = read_packet(in_port, frame, desc.offload, vlan_mode);
            s.keys.push(key);
            s.meta.push(meta);
            s.decisions
                .push(verdict.map_or(Decision::empty(), Decision::dropped));
        }
        slot.counters.rx_packets.add(self.batch.len() as u64);
        slot.counters.rx_bytes.add(rx_bytes);
        slot.counters.rx_batches.add(1);

        // Stage 2: learn and decide, in arrival order (a source learned by one packet is
        // known to the next).
        let rules_present = !self.table.is_empty();
        let mut last_learned: Option<(VlanId, weft_packet::MacAddr)> = None;
        for i in 0..s.keys.len() {
            if s.decisions[i].drop.is_some() {
                continue;
            }
            let key = s.keys[i];
            if learning && last_learned != Some((key.vlan, key.src_mac)) {
                self.fdb.learn(key.vlan, key.src_mac, in_port, now);
                last_learned = Some((key.vlan, key.src_mac));
            }
            s.decisions[i] = if rules_present {
                let generation =
                    super::cache_generation(&self.fdb, &self.table, self.port_generation);
                match self.cache.get(&key, generation) {
                    Some(d) => {
                        // Tests check the cache against the uncached decision, packet by packet.
                        #[cfg(test)]
                        if d != decide(&key, &self.fdb, &self.table, now) {
                            self.cache_mismatches += 1;
                        }
                        d
                    }
                    None => {
                        let d = decide(&key, &self.fdb, &self.table, now);
                        self.cache.insert(key, generation, d);
                        d
                    }
                }
            } else {
                bridge(
                    &key,
                    VlanState {
                        vid: key.vlan,
                        inner: None,
                    },
                    &self.fdb,
                    now,
                )
            };
        }
    }
}

/// Stage 1 for one frame: its key, what delivery needs, and a drop reason if it cannot go on.
fn read_packet(
    in_port: PortId,
    frame: &[u8],
    offload: OffloadInfo,
    vlan_mode: &crate::vlan::PortVlanMode,
) -> (FlowKey, PacketMeta, Option<DropReason>) {
    let mut key = FlowKey {
        in_port,
        ..FlowKey::default()
    };
    let mut meta = PacketMeta {
        body_offset: 12,
        pcp: 0,
        offload,
    };
    let Ok(sum) = FrameSummary::parse(frame) else {
        return (key, meta, Some(DropReason::Malformed));
    };
    key.dst_mac = sum.dst;
    key.src_mac = sum.src;
    if !sum.src.is_unicast() {
        return (key, meta, Some(DropReason::InvalidSourceMac));
    }
    let tag = sum.outer_vlan;
    if let Some(t) = tag {
        meta.body_offset = 16;
        meta.pcp = t.pcp();
    }
    match vlan_mode.ingress(tag.map(|t| t.vid())) {
        Ingress::Vlan(v) => key.vlan = v,
        Ingress::Denied => return (key, meta, Some(DropReason::VlanIngressDenied)),
    }
    key.ethertype = sum.ethertype;
    match sum.l3 {
        L3Summary::Ipv4 {
            src, dst, protocol, ..
        } => {
            key.ip_src = Some(src.into());
            key.ip_dst = Some(dst.into());
            key.ip_proto = protocol;
        }
        L3Summary::Ipv6 {
            src,
            dst,
            next_header,
            ..
        } => {
            key.ip_src = Some(src.into());
            key.ip_dst = Some(dst.into());
            key.ip_proto = next_header;
        }
        _ => {}
    }
    match sum.l4 {
        L4Summary::Ports { src, dst } => {
            key.l4_src = src;
            key.l4_dst = dst;
        }
        L4Summary::Icmp { ty, code } => {
            key.l4_src = u16::from(ty);
            key.l4_dst = u16::from(code);
        }
        _ => {}
    }
    // Offload offsets must lie past the part of the frame the switch rewrites, or shifting
    // them for a new head would point them into the MAC addresses.
    if (offload.needs_csum || offload.is_gso())
        && usize::from(offload.csum_start) < usize::from(sum.l3_offset)
    {
        return (key, meta, Some(DropReason::BadOffload));
    }
    (key, meta, None)
}

/// The learning bridge's verdict (the `normal` action) for a packet with VLAN state `vlan`.
pub(crate) fn bridge(key: &FlowKey, vlan: VlanState, fdb: &Fdb, now: Timestamp) -> Decision {
    if key.dst_mac.is_multicast() {
        return Decision::single(
            Target::Flood {
                unknown_unicast: false,
            },
            vlan,
        );
    }
    match fdb.lookup(vlan.vid, key.dst_mac, now) {
        Some(p) if p == key.in_port => Decision::dropped(DropReason::SamePort),
        Some(p) => Decision::single(Target::Port(p), vlan),
        None => Decision::single(
            Target::Flood {
                unknown_unicast: true,
            },
            vlan,
        ),
    }
}

/// The full uncached decision: the highest-priority matching rule's actions, or the
/// learning bridge when no rule matches.
pub(crate) fn decide(
    key: &FlowKey,
    fdb: &Fdb,
    table: &crate::flow_table::FlowTable,
    now: Timestamp,
) -> Decision {
    match table.lookup(key) {
        None => bridge(
            key,
            VlanState {
                vid: key.vlan,
                inner: None,
            },
            fdb,
            now,
        ),
        Some((_, rule)) => apply_actions(key, rule, fdb, now),
    }
}

fn apply_actions(key: &FlowKey, rule: &FlowRule, fdb: &Fdb, now: Timestamp) -> Decision {
    let mut d = Decision::empty();
    let mut vlan = VlanState {
        vid: key.vlan,
        inner: None,
    };
    let mut why_none = None;
    for action in rule.actions.iter() {
        match *action {
            Action::Output(p) if p == key.in_port => why_none = Some(DropReason::SamePort),
            Action::Output(p) => {
                d.push(Target::Port(p), vlan);
            }
            Action::Flood => {
                d.push(
                    Target::Flood {
                        unknown_unicast: false,
                    },
                    vlan,
                );
            }
            Action::Normal => {
                let b = bridge(key, vlan, fdb, now);
                match b.outputs().first() {
                    Some(o) => {
                        d.push(o.target, o.vlan);
                    }
                    None => why_none = b.drop,
                }
            }
            Action::Drop => why_none = Some(DropReason::FlowRuleDrop),
            Action::PushVlan(v) => vlan = vlan.push(v),
            Action::PopVlan => vlan = vlan.pop(),
            Action::Controller => d.to_controller = true,
        }
    }
    if d.outputs().is_empty() && !d.to_controller {
        d.drop = Some(why_none.unwrap_or(DropReason::NoDestination));
    }
    d
}
