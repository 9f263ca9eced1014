//! Stages 1 and 2 of the pipeline: read each packet's headers, learn its source, and decide
//! where it goes (flow cache → flow table → learning bridge).
//!
//! Two loops share the per-packet steps, each in one pass. Without flow rules (the plain
//! learning bridge) only the Ethernet header and tag are read, with no flow key at all. With
//! rules, the full key is built and decisions are cached per key. Both let a packet whose
//! header matches the one before's take its verdict, as packets of one flow mostly come in
//! runs.

use weft_packet::MacAddr;

use crate::counters::DropReason;
use crate::decision::{Decision, Output, Target, VlanState};
use crate::fdb::Fdb;
use crate::flow_key::FlowKey;
use crate::flow_table::{Action, FlowRule, FlowTable, RuleId};
use crate::types::{PortId, Timestamp, VlanId};

use super::{Frames, Switch};

mod policy;
mod read;

use policy::BatchPolicy;
use read::{read_key, read_l2, FlowLayout, PortIngress};

/// What the pipeline keeps per packet between stages (with the port's [`RxDesc`], which
/// holds its offload state). Small, as it is written for every packet.
///
/// [`RxDesc`]: crate::port::RxDesc
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PacketMeta {
    /// The TPID of the frame's outer VLAN tag as received; 0 when it has none (no TPID is 0).
    wire_tpid: u16,
    /// That tag's TCI. A destination that renders the same VLAN keeps this very tag, TPID,
    /// PCP and DEI included.
    wire_tci: u16,
    /// Where the L3 header starts (after every tag): 14, 18 or 22.
    l3_offset: u8,
}

impl PacketMeta {
    /// An untagged frame's.
    const UNTAGGED: PacketMeta = PacketMeta {
        wire_tpid: 0,
        wire_tci: 0,
        l3_offset: 14,
    };

    /// `tag`: the outer tag's TPID and TCI; `l3_offset`: 14, 18 or 22.
    #[inline(always)]
    fn new(tag: Option<(u16, u16)>, l3_offset: usize) -> Self {
        let (wire_tpid, wire_tci) = tag.unwrap_or_default();
        PacketMeta {
            wire_tpid,
            wire_tci,
            l3_offset: u8::try_from(l3_offset).unwrap_or(u8::MAX),
        }
    }

    /// Where the part of the frame sent unchanged starts: after the MAC addresses and the
    /// outer VLAN tag, if any (12 or 16).
    #[inline(always)]
    pub(crate) fn body_offset(&self) -> usize {
        if self.wire_tpid == 0 {
            12
        } else {
            16
        }
    }

    /// Where the L3 header starts.
    #[inline(always)]
    pub(crate) fn l3_offset(&self) -> usize {
        usize::from(self.l3_offset)
    }

    /// The VLAN id of the outer tag as received (0 for a priority tag).
    #[inline(always)]
    pub(crate) fn wire_vid(&self) -> Option<VlanId> {
        (self.wire_tpid != 0).then_some(self.wire_tci & 0x0fff)
    }

    /// The outer tag's TPID (0 when untagged).
    #[inline(always)]
    pub(crate) fn wire_tpid(&self) -> u16 {
        self.wire_tpid
    }

    /// The outer tag's TCI (0 when untagged).
    #[inline(always)]
    pub(crate) fn wire_tci(&self) -> u16 {
        self.wire_tci
    }
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

impl Switch {
    /// Stages 1 and 2 for the batch in `self.batch`, received on `in_port`.
    pub(super) fn classify(&mut self, in_port: PortId, frames: &Frames<'_>, now: Timestamp) {
        self.scratch.clear();
        let rx_bytes = if self.table.is_empty() || self.rules_bypassed {
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
        let (ingress, learning) = (PortIngress::new(&slot.options.vlan), slot.options.learning);
        let mut policy = BatchPolicy::new(&slot.options, now);
        // Frames checked one by one (port security, storm control) never share a verdict.
        let share_verdicts = !policy.checks_frames();
        let s = &mut self.scratch;
        let descs = self.batch.descs();
        // The port's own frames (first in the batch) teach nothing about its stations.
        let own = self.batch.own_frames();
        let n = descs
            .len()
            .min(frames.len())
            .min(s.verdicts.len())
            .min(s.meta.len());
        let all_read = n == descs.len();
        // Cut to one length, so that indexing below needs no bounds checks.
        let (descs, frames) = (&descs[..n], &frames[..n]);
        let (metas, verdicts) = (&mut s.meta[..n], &mut s.verdicts[..n]);
        let mut rx_bytes = 0u64;
        let mut learned = LearnMemo::default();
        // The last destination looked up and the bridge's verdict for it: packets of a
        // batch mostly go where the one before went. Only learning changes the FDB within a
        // batch (it was aged before), so the memo is forgotten when learning changed the
        // FDB. `u64::MAX` is no `vlan_mac_key`.
        let mut generation = self.fdb.generation();
        let mut memo_key = u64::MAX;
        let mut memo = Verdict::Pending;
        // A memo hit repeats a verdict already noted here.
        let mut uniform = UniformOutput::default();
        // The first 14 bytes of the packet before when it was untagged and admitted: a
        // packet that starts with the same (and has no offload to check) has the same meta
        // and verdict, and nothing to learn; the steps below would find just that.
        let mut previous = None;
        for i in 0..n {
            let frame = frames[i];
            rx_bytes += frame.len() as u64;
            let offload = &descs[i].offload;
            let words = l2_words(frame.head);
            if words.is_some() && words == previous && !offload.needs_csum && !offload.is_gso() {
                metas[i] = PacketMeta::UNTAGGED;
                verdicts[i] = verdicts[i - 1];
                continue;
            }
            previous = None;
            let (dst, src, vid) = match read_l2(frame, *offload, &ingress, &mut metas[i])
                .and_then(|l2| policy.check_source(frame).map(|()| l2))
            {
                Ok(l2) => l2,
                Err(reason) => {
                    verdicts[i] = Verdict::Drop(reason);
                    uniform.note(verdicts[i]);
                    continue;
                }
            };
            if share_verdicts && metas[i].wire_tpid == 0 && i >= own {
                previous = words;
            }
            let dst_key = vlan_mac_key(vid, dst);
            if dst_key != memo_key {
                memo_key = dst_key;
                let vlan = VlanState { vid, inner: None };
                memo = match bridge_output(in_port, dst, vlan, &self.fdb, now) {
                    Ok(o) => Verdict::Single(o),
                    Err(reason) => Verdict::Drop(reason),
                };
            }
            let mut verdict = memo;
            if let Verdict::Single(o) = verdict {
                if let Err(reason) = policy.check_flood(dst, frame.len(), &[o]) {
                    verdict = Verdict::Drop(reason);
                }
            }
            // Learning comes last: a frame a check dropped teaches the FDB nothing.
            if learning && i >= own && learns_from(verdict) {
                let refusal = learned.learn(&mut self.fdb, &policy, (vid, src), in_port, now);
                if let Some(reason) = refusal {
                    verdict = Verdict::Drop(reason);
                }
                if self.fdb.generation() != generation {
                    generation = self.fdb.generation();
                    memo_key = u64::MAX;
                    // What this packet taught may change the next one's verdict (a frame
                    // to its own source), so the next is decided afresh.
                    previous = None;
                }
            }
            uniform.note(verdict);
            verdicts[i] = verdict;
        }
        s.len = n;
        s.uniform = uniform.output(all_read);
        rx_bytes
    }

    /// The flow loop: full key, flow cache in front of the rules. Returns the bytes received.
    ///
    /// One pass, as the bridge loop: each packet is read, decided and learned from before the
    /// next (a source learned by one packet is known to the next; one a packet's verdict
    /// dropped is not learned).
    fn classify_flows(&mut self, in_port: PortId, frames: &Frames<'_>, now: Timestamp) -> u64 {
        let Some(slot) = self.ports.get(in_port.index()).and_then(Option::as_ref) else {
            return 0;
        };
        let (ingress, learning) = (PortIngress::new(&slot.options.vlan), slot.options.learning);
        let mut policy = BatchPolicy::new(&slot.options, now);
        // Frames checked one by one (port security, storm control) never share a verdict.
        let share_verdicts = !policy.checks_frames();
        let descs = self.batch.descs();
        let own = self.batch.own_frames();
        let s = &mut self.scratch;
        let n = descs
            .len()
            .min(frames.len())
            .min(s.verdicts.len())
            .min(s.keys.len())
            .min(s.meta.len());
        let all_read = n == descs.len();
        let (descs, frames) = (&descs[..n], &frames[..n]);
        let mut rx_bytes = 0u64;
        let mut learned = LearnMemo::default();
        // Rule hits, summed while consecutive packets hit the same rule.
        let mut hits = RuleHits::default();
        let mut uniform = UniformOutput::default();
        // The last flow decided, for the packets of the same flow after it.
        let mut last: Option<DecidedFlow> = None;
        // The header of the packet before, when its key was read and a packet of the same
        // flow after it has the same key (see `FlowLayout`).
        let mut previous: Option<RepeatableHeader> = None;
        // Set when the packet before's verdict is the next one's if their keys are equal: its
        // rule, if any. Never across a change learning made to the FDB.
        let mut shared: Option<Option<RuleId>> = None;
        let mut generation = super::cache_generation(&self.fdb, &self.table, self.port_generation);
        for i in 0..n {
            let (frame, offload) = (frames[i], descs[i].offload);
            let len = frame.len();
            rx_bytes += len as u64;
            let header = FlowLayout::of(frame.head).map(|layout| RepeatableHeader {
                layout,
                head_len: frame.head.len(),
                len,
                offload,
            });
            let repeat = i > 0
                && matches!((&header, &previous), (Some(h), Some(p)) if h == p
                    && h.layout.same_words(frames[i - 1].head, frame.head));
            if repeat {
                if let Some(rule) = shared {
                    // The same key, meta and verdict as the packet before; nothing to learn.
                    // Decided by a cached decision: counted as the cache's hit.
                    self.cache.note_repeated_hit();
                    self.scratch.meta[i] = self.scratch.meta[i - 1];
                    self.scratch.verdicts[i] = self.scratch.verdicts[i - 1];
                    if let Some(rule) = rule {
                        hits.add(rule, len as u64, &mut self.table);
                    }
                    continue;
                }
                self.scratch.keys[i] = self.scratch.keys[i - 1];
                self.scratch.meta[i] = self.scratch.meta[i - 1];
            } else {
                previous = None;
                let read = read_key(in_port, frame, offload, &ingress, &mut self.scratch.meta[i]);
                match read {
                    Ok(k) => {
                        self.scratch.keys[i] = k;
                        previous = header;
                    }
                    Err((k, reason)) => {
                        self.scratch.keys[i] = k;
                        self.scratch.verdicts[i] = Verdict::Drop(reason);
                        uniform.note(Verdict::Drop(reason));
                        shared = None;
                        continue;
                    }
                }
            }
            shared = None;
            if let Err(reason) = policy.check_source(frame) {
                self.scratch.verdicts[i] = Verdict::Drop(reason);
                uniform.note(Verdict::Drop(reason));
                continue;
            }
            let key = self.scratch.keys[i];
            let flow = match last {
                Some(flow) if flow.generation == generation && flow.key == key => {
                    // What the cache would have answered: counted as its hit.
                    self.cache.note_repeated_hit();
                    flow
                }
                _ => {
                    let d = match self.cache.get(&key, generation) {
                        Some(d) => {
                            // Tests check the cache against the uncached decision.
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
                    let flow = DecidedFlow {
                        key,
                        generation,
                        verdict: self.scratch.verdict_of(d),
                        rule: d.rule,
                        goes_out: d.drop.is_none(),
                    };
                    // A `Multi` verdict's outputs are one packet's entry in `multi`.
                    last = (!matches!(flow.verdict, Verdict::Multi(_))).then_some(flow);
                    flow
                }
            };
            if let Some(rule) = flow.rule {
                hits.add(rule, len as u64, &mut self.table);
            }
            let mut verdict = flow.verdict;
            if flow.goes_out {
                let outputs = match verdict {
                    Verdict::Single(ref o) => core::slice::from_ref(o),
                    Verdict::Multi(k) => self
                        .scratch
                        .multi
                        .get(usize::from(k))
                        .map_or(&[][..], |d| d.outputs()),
                    _ => &[],
                };
                if let Err(reason) = policy.check_flood(key.dst_mac, len, outputs) {
                    verdict = Verdict::Drop(reason);
                }
            }
            if learning && i >= own && learns_from(verdict) {
                let source = (key.vlan, key.src_mac);
                if let Some(reason) = learned.learn(&mut self.fdb, &policy, source, in_port, now) {
                    verdict = Verdict::Drop(reason);
                }
                let now_generation =
                    super::cache_generation(&self.fdb, &self.table, self.port_generation);
                if now_generation != generation {
                    generation = now_generation;
                    // What this packet taught may change the next one's verdict.
                    previous = None;
                }
            }
            // The next packet of this flow may take this verdict when nothing about it was
            // one packet's own: not a `Multi` (its entry in `multi`), not checked frame by
            // frame, not an own frame (which teaches nothing; the next may).
            if share_verdicts && i >= own && !matches!(verdict, Verdict::Multi(_)) {
                shared = Some(flow.rule);
            }
            self.scratch.verdicts[i] = verdict;
            uniform.note(verdict);
        }
        self.scratch.len = n;
        hits.flush(&mut self.table);
        self.scratch.uniform = uniform.output(all_read);
        rx_bytes
    }
}

/// A flow's decision as the flow loop applies it, kept for the flow's next packets.
#[derive(Clone, Copy)]
struct DecidedFlow {
    key: FlowKey,
    /// The cache generation it was decided under.
    generation: u64,
    /// A `Single` or a `Drop` (a `Multi` is never kept).
    verdict: Verdict,
    rule: Option<RuleId>,
    /// Not dropped by the decision: storm control looks at its outputs.
    goes_out: bool,
}

/// Besides its flow words, what decided a frame's key (see `FlowLayout`): two frames
/// with equal `RepeatableHeader`s and equal flow words get the same key.
#[derive(Clone, Copy, PartialEq, Eq)]
struct RepeatableHeader {
    layout: FlowLayout,
    head_len: usize,
    len: usize,
    offload: weft_packet::OffloadInfo,
}

/// Whether every verdict of a batch is one and the same output, which lets stage 3 send
/// the batch straight through.
struct UniformOutput {
    first: Option<Output>,
    /// False once two outputs differ, or a verdict is not a single output.
    all_same: bool,
}

impl Default for UniformOutput {
    fn default() -> Self {
        UniformOutput {
            first: None,
            all_same: true,
        }
    }
}

impl UniformOutput {
    #[inline(always)]
    fn note(&mut self, verdict: Verdict) {
        match (verdict, self.first) {
            (Verdict::Single(o), None) => self.first = Some(o),
            (Verdict::Single(o), Some(first)) => self.all_same &= first == o,
            _ => self.all_same = false,
        }
    }

    /// The one output, if every packet had it and every packet of the batch was read
    /// (`all_read`).
    fn output(&self, all_read: bool) -> Option<Output> {
        self.first.filter(|_| self.all_same && all_read)
    }
}

/// Whether a packet with this verdict teaches the FDB its source: every packet that goes
/// somewhere, and one the bridge does not send back out of the port it came from (its
/// source is behind that port all the same); none that a check or a rule dropped.
#[inline(always)]
fn learns_from(verdict: Verdict) -> bool {
    !matches!(verdict, Verdict::Drop(reason) if reason != DropReason::SamePort)
}

/// The source learned last in a batch and what learning it called for: a batch's packets
/// mostly come from one station, which is learned once.
struct LearnMemo {
    source: u64,
    refusal: Option<DropReason>,
}

impl Default for LearnMemo {
    fn default() -> Self {
        // `u64::MAX` is no `vlan_mac_key`.
        LearnMemo {
            source: u64::MAX,
            refusal: None,
        }
    }
}

impl LearnMemo {
    /// Learns `(vid, src)` on `in_port` unless it was the last source learned; returns the
    /// drop learning's refusal calls for.
    #[inline(always)]
    fn learn(
        &mut self,
        fdb: &mut Fdb,
        policy: &BatchPolicy<'_>,
        (vid, src): (VlanId, MacAddr),
        in_port: PortId,
        now: Timestamp,
    ) -> Option<DropReason> {
        let key = vlan_mac_key(vid, src);
        if key != self.source {
            self.source = key;
            self.refusal = policy.learn_refusal(fdb.learn(vid, src, in_port, now));
        }
        self.refusal
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

/// A frame's first 14 bytes (addresses and EtherType or TPID) as two overlapping words, to
/// compare them at once.
#[inline(always)]
fn l2_words(frame: &[u8]) -> Option<(u64, u64)> {
    let head = frame.get(..14)?;
    let word = |at: usize| -> Option<u64> {
        let bytes: [u8; 8] = head.get(at..at + 8)?.try_into().ok()?;
        Some(u64::from_ne_bytes(bytes))
    };
    Some((word(0)?, word(6)?))
}

/// VLAN and MAC in one word, for cheap comparisons.
#[inline]
fn vlan_mac_key(vid: VlanId, mac: MacAddr) -> u64 {
    (u64::from(vid) << 48) | mac.to_u64()
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
