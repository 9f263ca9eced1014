//! Stages 1 and 2 of the pipeline: read each packet's headers, learn its source, and decide
//! where it goes (flow cache → flow table → learning bridge).
//!
//! Two loops share the per-packet steps. Without flow rules (the plain learning bridge) only
//! the Ethernet header and tag are read and the verdict is computed in the same pass, with
//! no flow key at all. With rules, the full key is built, and decisions are cached per key.

use weft_packet::vlan::VlanStack;
use weft_packet::{EthernetFrame, FrameSummary, L3Summary, L4Summary, MacAddr, OffloadInfo};

use crate::counters::DropReason;
use crate::decision::{Decision, Output, Target, VlanState};
use crate::fdb::Fdb;
use crate::flow_key::FlowKey;
use crate::flow_table::{Action, FlowRule, FlowTable, RuleId};
use crate::types::{PortId, Timestamp, VlanId};
use crate::vlan::{Ingress, PortVlanMode};

use super::{Frames, Switch};

/// What the pipeline keeps per packet between stages.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PacketMeta {
    /// Where the part of the frame sent unchanged starts: after the MAC addresses and the
    /// outer VLAN tag, if any (12 or 16).
    pub(crate) body_offset: usize,
    /// Where the L3 header starts (after every tag): 14, 18 or 22.
    pub(crate) l3_offset: usize,
    /// The VLAN id of the frame's outer tag as received (0 for a priority tag): a destination
    /// that renders the same VLAN keeps this very tag, TPID, PCP and DEI included.
    pub(crate) wire_vid: Option<VlanId>,
    /// The outer tag's TPID and TCI as received (meaningful when `wire_vid` is set).
    pub(crate) wire_tpid: u16,
    pub(crate) wire_tci: u16,
    /// Offload state from the receiving port.
    pub(crate) offload: OffloadInfo,
}

/// The verdict for one packet of a batch: most packets have a single output, kept inline;
/// the few with several outputs or an upcall keep their whole [`Decision`] aside.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Verdict {
    /// Dropped, for this reason.
    Drop(DropReason),
    /// One output, no upcall.
    Single(Output),
    /// Index into [`BatchScratch::multi`].
    Multi(u16),
    /// Read in stage 1, to be decided in stage 2 (never left after stage 2).
    Pending,
}

/// Per-batch working memory, allocated once per switch.
///
/// The per-packet arrays are sized once to the batch capacity and written by index (no
/// `push` on the hot path); `len` says how many entries the current batch uses.
pub struct BatchScratch {
    pub(crate) len: usize,
    /// Flow keys (filled only when flow rules are present: upcalls need them).
    pub(crate) keys: Vec<FlowKey>,
    pub(crate) meta: Vec<PacketMeta>,
    pub(crate) verdicts: Vec<Verdict>,
    /// Full decisions of the packets whose verdict is [`Verdict::Multi`].
    pub(crate) multi: Vec<Decision>,
    /// Set when every packet of the batch has this one output (the bridge loop notes it,
    /// and it is the usual case: a burst from one guest to one other): stage 3 then sends
    /// the batch straight through, without per-destination lists.
    pub(crate) uniform: Option<Output>,
}

impl BatchScratch {
    /// Room for batches of `capacity` packets.
    pub fn new(capacity: usize) -> Self {
        BatchScratch {
            len: 0,
            keys: vec![FlowKey::default(); capacity],
            meta: vec![PacketMeta::default(); capacity],
            verdicts: vec![Verdict::Pending; capacity],
            multi: Vec::with_capacity(capacity),
            uniform: None,
        }
    }

    fn clear(&mut self) {
        self.len = 0;
        self.multi.clear();
        self.uniform = None;
    }

    /// The verdict for decision `d`, keeping `d` aside when it has several outputs.
    fn verdict_of(&mut self, d: Decision) -> Verdict {
        match (d.drop, d.outputs(), d.to_controller) {
            (Some(reason), _, _) => Verdict::Drop(reason),
            (None, [one], false) => Verdict::Single(*one),
            _ => match u16::try_from(self.multi.len()) {
                Ok(k) => {
                    self.multi.push(d);
                    Verdict::Multi(k)
                }
                Err(_) => Verdict::Drop(DropReason::NoDestination),
            },
        }
    }
}

/// The last destination looked up in a batch: packets of a batch mostly go where the one
/// before went. Valid while the FDB generation is unchanged.
#[derive(Clone, Copy)]
struct DstMemo {
    /// [`vlan_mac_key`] of the destination.
    key: u64,
    generation: u64,
    verdict: Result<Output, DropReason>,
}

impl Switch {
    /// Stages 1 and 2 for the batch in `self.batch`, received on `in_port`.
    pub(super) fn classify(&mut self, in_port: PortId, frames: &Frames<'_>, now: Timestamp) {
        self.scratch.clear();
        let rx_bytes = if self.table.is_empty() {
            self.classify_bridge(in_port, frames, now)
        } else {
            self.classify_flows(in_port, frames, now)
        };
        let Some(slot) = self.ports.get(in_port.index()).and_then(Option::as_ref) else {
            return;
        };
        slot.counters.rx_packets.add(self.batch.len() as u64);
        slot.counters.rx_bytes.add(rx_bytes);
        slot.counters.rx_batches.add(1);
    }

    /// The learning-bridge loop: L2 header only, one pass. Returns the bytes received.
    fn classify_bridge(&mut self, in_port: PortId, frames: &Frames<'_>, now: Timestamp) -> u64 {
        let Some(slot) = self.ports.get(in_port.index()).and_then(Option::as_ref) else {
            return 0;
        };
        let (vlan_mode, learning) = (&slot.options.vlan, slot.options.learning);
        let s = &mut self.scratch;
        let mut rx_bytes = 0u64;
        let mut last_learned = u64::MAX;
        let mut memo: Option<DstMemo> = None;
        // The output every packet so far has (`None` once two differ or one is dropped).
        let mut uniform: Option<Output> = None;
        let mut all_same = true;
        let descs = self.batch.descs();
        for (((desc, frame), meta), verdict) in descs
            .iter()
            .zip(frames)
            .zip(s.meta.iter_mut())
            .zip(s.verdicts.iter_mut())
        {
            let frame: &[u8] = frame;
            rx_bytes += frame.len() as u64;
            *meta = PacketMeta {
                body_offset: 12,
                offload: desc.offload,
                ..PacketMeta::default()
            };
            *verdict = match read_l2(frame, vlan_mode, meta) {
                Err(reason) => {
                    all_same = false;
                    Verdict::Drop(reason)
                }
                Ok((dst, src, vid)) => {
                    let src_key = vlan_mac_key(vid, src);
                    if learning && last_learned != src_key {
                        self.fdb.learn(vid, src, in_port, now);
                        last_learned = src_key;
                    }
                    let dst_key = vlan_mac_key(vid, dst);
                    let generation = self.fdb.generation();
                    let out = match memo {
                        Some(m) if m.key == dst_key && m.generation == generation => m.verdict,
                        _ => {
                            let v = bridge_output(
                                in_port,
                                dst,
                                VlanState { vid, inner: None },
                                &self.fdb,
                                now,
                            );
                            memo = Some(DstMemo {
                                key: dst_key,
                                generation,
                                verdict: v,
                            });
                            v
                        }
                    };
                    match out {
                        Ok(o) => {
                            match uniform {
                                None => uniform = Some(o),
                                Some(u) => all_same &= u == o,
                            }
                            Verdict::Single(o)
                        }
                        Err(reason) => {
                            all_same = false;
                            Verdict::Drop(reason)
                        }
                    }
                }
            };
        }
        s.len = descs.len().min(frames.len()).min(s.verdicts.len());
        // Only when every packet of the batch was read (the zip stops at the shortest).
        s.uniform = uniform.filter(|_| all_same && s.len == descs.len());
        rx_bytes
    }

    /// The flow loop: full key, flow cache in front of the rules. Returns the bytes received.
    fn classify_flows(&mut self, in_port: PortId, frames: &Frames<'_>, now: Timestamp) -> u64 {
        let Some(slot) = self.ports.get(in_port.index()).and_then(Option::as_ref) else {
            return 0;
        };
        let (vlan_mode, learning) = (&slot.options.vlan, slot.options.learning);
        let mut rx_bytes = 0u64;
        // Stage 1: read every header first (VALE's prefetch stage).
        let s = &mut self.scratch;
        let descs = self.batch.descs();
        for ((((desc, frame), key), meta), verdict) in descs
            .iter()
            .zip(frames)
            .zip(s.keys.iter_mut())
            .zip(s.meta.iter_mut())
            .zip(s.verdicts.iter_mut())
        {
            let frame: &[u8] = frame;
            rx_bytes += frame.len() as u64;
            *meta = PacketMeta {
                body_offset: 12,
                offload: desc.offload,
                ..PacketMeta::default()
            };
            *verdict = match read_key(in_port, frame, vlan_mode, meta) {
                Ok(k) => {
                    *key = k;
                    Verdict::Pending
                }
                Err((k, reason)) => {
                    *key = k;
                    Verdict::Drop(reason)
                }
            };
        }
        s.len = descs.len().min(frames.len()).min(s.verdicts.len());
        // Stage 2: learn and decide, in arrival order (a source learned by one packet is
        // known to the next).
        let mut last_learned = u64::MAX;
        // Rule hits, summed while consecutive packets hit the same rule.
        let mut hits = RuleHits::default();
        for i in 0..self.scratch.len {
            if matches!(self.scratch.verdicts[i], Verdict::Pending) {
                let key = self.scratch.keys[i];
                let src_key = vlan_mac_key(key.vlan, key.src_mac);
                if learning && last_learned != src_key {
                    self.fdb.learn(key.vlan, key.src_mac, in_port, now);
                    last_learned = src_key;
                }
                let generation =
                    super::cache_generation(&self.fdb, &self.table, self.port_generation);
                let d = match self.cache.get(&key, generation) {
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
                };
                if let Some(rule) = d.rule {
                    let len = frames.get(i).map_or(0, |f| f.len() as u64);
                    hits.add(rule, len, &mut self.table);
                }
                self.scratch.verdicts[i] = self.scratch.verdict_of(d);
            }
        }
        hits.flush(&mut self.table);
        rx_bytes
    }
}

/// Hits on one rule not yet added to its counters: a batch adds them once per run of
/// packets that hit the same rule rather than once per packet.
#[derive(Default)]
struct RuleHits {
    rule: Option<RuleId>,
    packets: u64,
    bytes: u64,
}

impl RuleHits {
    fn add(&mut self, rule: RuleId, bytes: u64, table: &mut FlowTable) {
        if self.rule != Some(rule) {
            self.flush(table);
            self.rule = Some(rule);
        }
        self.packets += 1;
        self.bytes += bytes;
    }

    fn flush(&mut self, table: &mut FlowTable) {
        if let Some(rule) = self.rule.take() {
            table.record_hit(rule, self.packets, self.bytes);
        }
        self.packets = 0;
        self.bytes = 0;
    }
}

/// VLAN and MAC in one word, for cheap comparisons.
#[inline]
fn vlan_mac_key(vid: VlanId, mac: MacAddr) -> u64 {
    (u64::from(vid) << 48) | mac.to_u64()
}

/// Ingress checks shared by both loops: a valid source, a VLAN the port admits, offload
/// offsets past the headers the switch may rewrite. Fills `meta`; returns the packet's VLAN.
#[inline]
fn admit(
    src: MacAddr,
    frame_len: usize,
    stack: &VlanStack,
    vlan_mode: &PortVlanMode,
    meta: &mut PacketMeta,
) -> Result<VlanId, DropReason> {
    if !src.is_unicast() {
        return Err(DropReason::InvalidSourceMac);
    }
    let outer = stack.outer;
    meta.l3_offset = stack.payload_offset();
    if let Some(tag) = outer {
        meta.body_offset = 16;
        meta.wire_vid = Some(tag.tci.vid());
        meta.wire_tpid = tag.tpid;
        meta.wire_tci = tag.tci.to_bits();
    }
    if meta.offload.needs_csum || meta.offload.is_gso() {
        check_offload(&meta.offload, stack, frame_len)?;
    }
    match vlan_mode.ingress(outer.map(|t| t.tci.vid())) {
        Ingress::Vlan(v) => Ok(v),
        Ingress::Denied => Err(DropReason::VlanIngressDenied),
    }
}

/// What a port said about a frame's checksum or segmentation, checked against the frame
/// before anyone relies on it: offsets past the headers the switch may rewrite (or
/// shifting them for a new head would point them into the MAC addresses) and inside the
/// frame; a segment size; a GSO kind that fits the EtherType. The rest (that the L4 header
/// is really there) is checked where segmentation or checksumming happens.
#[cold]
fn check_offload(o: &OffloadInfo, stack: &VlanStack, frame_len: usize) -> Result<(), DropReason> {
    use weft_packet::ethernet::ethertype;
    use weft_packet::GsoKind;
    let start = usize::from(o.csum_start);
    let field_end = start + usize::from(o.csum_offset) + 2;
    let kind_fits = match o.gso {
        GsoKind::None => true,
        GsoKind::TcpV4 => stack.ethertype == ethertype::IPV4,
        GsoKind::TcpV6 => stack.ethertype == ethertype::IPV6,
        GsoKind::UdpL4 => matches!(stack.ethertype, ethertype::IPV4 | ethertype::IPV6),
    };
    let ok = start >= stack.payload_offset()
        && field_end <= frame_len
        && kind_fits
        && (!o.is_gso() || (o.needs_csum && o.gso_size != 0));
    if ok {
        Ok(())
    } else {
        Err(DropReason::BadOffload)
    }
}

/// Stage 1 of the bridge loop: destination, source and VLAN.
#[inline]
fn read_l2(
    frame: &[u8],
    vlan_mode: &PortVlanMode,
    meta: &mut PacketMeta,
) -> Result<(MacAddr, MacAddr, VlanId), DropReason> {
    let eth = EthernetFrame::new_checked(frame).map_err(|_| DropReason::Malformed)?;
    let stack = VlanStack::parse(frame).map_err(|_| DropReason::Malformed)?;
    let src = eth.src_addr();
    let vid = admit(src, frame.len(), &stack, vlan_mode, meta)?;
    Ok((eth.dst_addr(), src, vid))
}

/// Stage 1 of the flow loop: the whole key. On a drop, the key read so far and the reason.
fn read_key(
    in_port: PortId,
    frame: &[u8],
    vlan_mode: &PortVlanMode,
    meta: &mut PacketMeta,
) -> Result<FlowKey, (FlowKey, DropReason)> {
    let mut key = FlowKey {
        in_port,
        ..FlowKey::default()
    };
    let (Ok(sum), Ok(stack)) = (FrameSummary::parse(frame), VlanStack::parse(frame)) else {
        return Err((key, DropReason::Malformed));
    };
    key.dst_mac = sum.dst;
    key.src_mac = sum.src;
    key.vlan = admit(sum.src, frame.len(), &stack, vlan_mode, meta).map_err(|r| (key, r))?;
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
    Ok(key)
}

/// The learning bridge (the `normal` action): the one output for a packet to `dst` with
/// VLAN state `vlan`, or why it goes nowhere.
#[inline]
fn bridge_output(
    in_port: PortId,
    dst: MacAddr,
    vlan: VlanState,
    fdb: &Fdb,
    now: Timestamp,
) -> Result<Output, DropReason> {
    let target = if dst.is_multicast() {
        Target::Flood {
            unknown_unicast: false,
        }
    } else {
        match fdb.lookup(vlan.vid, dst, now) {
            Some(p) if p == in_port => return Err(DropReason::SamePort),
            Some(p) => Target::Port(p),
            None => Target::Flood {
                unknown_unicast: true,
            },
        }
    };
    Ok(Output { target, vlan })
}

/// The full uncached decision: the highest-priority matching rule's actions, or the
/// learning bridge when no rule matches.
pub(crate) fn decide(key: &FlowKey, fdb: &Fdb, table: &FlowTable, now: Timestamp) -> Decision {
    match table.lookup(key) {
        None => match bridge_output(
            key.in_port,
            key.dst_mac,
            VlanState {
                vid: key.vlan,
                inner: None,
            },
            fdb,
            now,
        ) {
            Ok(o) => Decision::single(o.target, o.vlan),
            Err(reason) => Decision::dropped(reason),
        },
        Some((id, rule)) => {
            let mut d = apply_actions(key, rule, fdb, now);
            d.rule = Some(id);
            d
        }
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
            Action::Normal => match bridge_output(key.in_port, key.dst_mac, vlan, fdb, now) {
                Ok(o) => {
                    d.push(o.target, o.vlan);
                }
                Err(reason) => why_none = Some(reason),
            },
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
