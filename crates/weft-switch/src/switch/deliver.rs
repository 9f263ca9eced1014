//! Stage 3 of the pipeline: hand each destination port its packets, once per batch (one
//! `transmit` per destination per chunk of [`CHUNK`] frames), in arrival order; rewrite VLAN
//! tags on the way by scatter/gather (a new head, the body where it lies); complete
//! checksums or segment super-frames only for destinations that cannot take them.

use weft_packet::OffloadInfo;

use crate::capture::CaptureDirection;
use crate::counters::{BatchDrops, DropReason};
use crate::decision::{Output, Target, VlanState};
use arrayvec::ArrayVec;

use crate::port::{PortCaps, RxDesc, RxFrame, TxFrame};
use crate::types::{PortId, Timestamp, MAX_PORTS};
use crate::upcall::UpcallReason;

use super::classify::Verdict;
use super::{Frames, PortSlot, Switch};

mod packet_out;
mod slow;
mod straight;

pub use packet_out::{PacketOutError, PacketOutStats, Pipeline};

use slow::SlowBuffers;

/// Frames handed to a port per `transmit` call.
pub(crate) const CHUNK: usize = 64;
const NONE: u16 = u16::MAX;

/// Per-destination lists and buffers used by stage 3, allocated once per switch.
pub(crate) struct DeliverScratch {
    /// Next packet in the same destination's unicast list.
    next: Vec<u16>,
    head: Vec<u16>,
    tail: Vec<u16>,
    /// Packets with several outputs or a flood, in arrival order.
    multi: Vec<u16>,
    /// Copies per multi-output packet that a port took or counted as its own drop (a gone
    /// port's `PortGone` included): a packet with none reached no one (`NoDestination`), and
    /// one with some is not counted twice.
    emitted: Vec<u16>,
    /// The slow path's buffers.
    slow: SlowBuffers,
}

impl DeliverScratch {
    pub(crate) fn new(batch: usize) -> Self {
        DeliverScratch {
            next: vec![NONE; batch],
            head: vec![NONE; MAX_PORTS],
            tail: vec![NONE; MAX_PORTS],
            multi: Vec::with_capacity(batch),
            emitted: vec![0; batch],
            slow: SlowBuffers::default(),
        }
    }
}

#[derive(Clone, Copy, Default)]
struct PortBits([u64; MAX_PORTS / 64]);

impl PortBits {
    fn set(&mut self, p: usize) {
        if let Some(w) = self.0.get_mut(p / 64) {
            *w |= 1 << (p % 64);
        }
    }
    fn iter(self) -> impl Iterator<Item = usize> {
        (0..MAX_PORTS / 64).flat_map(move |w| {
            let mut bits = self.0[w];
            core::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                Some(w * 64 + b)
            })
        })
    }
}

impl Switch {
    /// Stage 3 for the batch classified in `self.scratch`.
    pub(super) fn deliver(&mut self, in_port: PortId, frames: &Frames<'_>, now: Timestamp) {
        let uniform = self.scratch.uniform;
        // Tests compare the straight path with the lists on the same batches.
        #[cfg(test)]
        let uniform = uniform.filter(|_| !self.lists_only);
        if let Some(o) = uniform {
            self.deliver_uniform(in_port, o, frames, now);
            return;
        }
        let Switch {
            ports,
            batch,
            scratch,
            deliver: ds,
            upcalls,
            peers_changed,
            ..
        } = self;
        let descs = batch.descs();
        let n = scratch.len;
        let mut in_drops = BatchDrops::default();
        let mut active = PortBits::default();
        let mut flood = false;
        ds.multi.clear();

        // Build the per-destination lists: single-port packets on their port's list, the
        // rest (floods, several outputs) on one shared list.
        for i in 0..n {
            let idx = u16::try_from(i).unwrap_or(NONE);
            let outputs = match scratch.verdicts[i] {
                Verdict::Drop(reason) => {
                    in_drops.note(reason, 1);
                    continue;
                }
                Verdict::Pending => {
                    in_drops.note(DropReason::NoDestination, 1);
                    continue;
                }
                Verdict::Single(Output {
                    target: Target::Port(p),
                    ..
                }) => {
                    let pi = p.index();
                    if ports.get(pi).and_then(Option::as_ref).is_none() {
                        in_drops.note(DropReason::PortGone, 1);
                        continue;
                    }
                    ds.next[i] = NONE;
                    if ds.head[pi] == NONE {
                        ds.head[pi] = idx;
                    } else if let Some(t) = ds.next.get_mut(usize::from(ds.tail[pi])) {
                        *t = idx;
                    }
                    ds.tail[pi] = idx;
                    active.set(pi);
                    continue;
                }
                Verdict::Single(ref o) => core::slice::from_ref(o),
                Verdict::Multi(k) => {
                    let d = &scratch.multi[usize::from(k)];
                    if d.to_controller
                        && !upcalls.offer(
                            &scratch.keys[i],
                            &frames.get(i).copied().unwrap_or_default(),
                            UpcallReason::Action,
                            d.rule,
                        )
                    {
                        in_drops.note(DropReason::UpcallQueueFull, 1);
                    }
                    d.outputs()
                }
            };
            if outputs.is_empty() {
                continue;
            }
            ds.multi.push(idx);
            ds.emitted[i] = 0;
            for o in outputs {
                match o.target {
                    Target::Port(p) if ports.get(p.index()).and_then(Option::as_ref).is_some() => {
                        active.set(p.index())
                    }
                    Target::Port(_) => {
                        in_drops.note(DropReason::PortGone, 1);
                        ds.emitted[i] = ds.emitted[i].saturating_add(1);
                    }
                    Target::Flood { .. } => flood = true,
                }
            }
        }
        if flood {
            for (p, slot) in ports.iter().enumerate() {
                if slot.is_some() && p != in_port.index() {
                    active.set(p);
                }
            }
        }

        // One pass per destination, merging its unicast list with the shared list so that
        // the destination sees packets in arrival order.
        let mut chunk: ArrayVec<TxFrame<'_>, CHUNK> = ArrayVec::new();
        for p in active.iter() {
            let Some(slot) = ports.get_mut(p).and_then(Option::as_mut) else {
                continue;
            };
            *peers_changed |= refresh_caps(slot);
            let mut out = Outbox::new(&mut chunk, now);
            let mut u = ds.head[p];
            let mut m = 0usize;
            loop {
                let next_multi = ds.multi.get(m).copied().unwrap_or(NONE);
                if u == NONE && next_multi == NONE {
                    break;
                }
                if u != NONE && (next_multi == NONE || u < next_multi) {
                    let i = usize::from(u);
                    if let Verdict::Single(o) = scratch.verdicts[i] {
                        let frame = frames.get(i).copied().unwrap_or_default();
                        out.emit(
                            slot,
                            &mut ds.slow,
                            frame,
                            &scratch.meta[i],
                            offload_of(descs, i),
                            Egress::new(slot, o.vlan, true),
                        );
                    }
                    u = ds.next[i];
                } else {
                    let i = usize::from(next_multi);
                    let outputs = match &scratch.verdicts[i] {
                        Verdict::Single(o) => core::slice::from_ref(o),
                        Verdict::Multi(k) => scratch.multi[usize::from(*k)].outputs(),
                        Verdict::Drop(_) | Verdict::Pending => &[],
                    };
                    for o in outputs {
                        if let Some(explicit) = goes_to(o, p, in_port, slot) {
                            let frame = frames.get(i).copied().unwrap_or_default();
                            // Sent, or dropped and counted by this port (`goes_to` only
                            // names ports whose VLAN check `emit` counts): either way the
                            // packet had a destination.
                            out.emit(
                                slot,
                                &mut ds.slow,
                                frame,
                                &scratch.meta[i],
                                offload_of(descs, i),
                                Egress::new(slot, o.vlan, explicit),
                            );
                            ds.emitted[i] = ds.emitted[i].saturating_add(1);
                        }
                    }
                    m += 1;
                }
            }
            out.flush(slot);
            out.drops.flush(&slot.counters.drops);
            ds.head[p] = NONE;
            ds.tail[p] = NONE;
        }

        for &i in &ds.multi {
            let i = usize::from(i);
            let upcalled = matches!(scratch.verdicts[i], Verdict::Multi(k) if scratch.multi[usize::from(k)].to_controller);
            if ds.emitted[i] == 0 && !upcalled {
                in_drops.note(DropReason::NoDestination, 1);
            }
        }
        if let Some(slot) = ports.get(in_port.index()).and_then(Option::as_ref) {
            in_drops.flush(&slot.counters.drops);
        }
    }
}

/// The offload state the receiving port gave packet `i`.
fn offload_of(descs: &[RxDesc], i: usize) -> OffloadInfo {
    descs
        .get(i)
        .map_or_else(OffloadInfo::default, |d| d.offload)
}

/// Picks up a port's capabilities again when it says they changed (a guest renegotiated);
/// true when they did.
fn refresh_caps(slot: &mut PortSlot) -> bool {
    let generation = slot.tx.caps_generation();
    if generation == slot.caps_generation {
        return false;
    }
    slot.caps = slot.tx.caps();
    slot.caps_generation = generation;
    true
}

/// Whether output `o` sends to port `p`: `Some(explicit)` where `explicit` says the port was
/// named (so a VLAN mismatch is a counted drop), `None` when it does not go there.
fn goes_to(o: &Output, p: usize, in_port: PortId, slot: &PortSlot) -> Option<bool> {
    match o.target {
        Target::Port(q) => (q.index() == p).then_some(true),
        Target::Flood { unknown_unicast } => {
            let member = p != in_port.index()
                && slot.options.vlan.admits(o.vlan.vid)
                && (!unknown_unicast || slot.options.flood_unknown_unicast);
            member.then_some(false)
        }
    }
}

/// How packets of one VLAN leave one port: found once per port for a batch sent straight
/// through, once per packet otherwise.
#[derive(Clone, Copy)]
pub(super) struct Egress {
    vlan: VlanState,
    /// The port admits the VLAN.
    admitted: bool,
    /// The port tags it.
    wants_tag: bool,
    /// The port was named (a VLAN mismatch is then a counted drop), not flooded to.
    explicit: bool,
}

impl Egress {
    #[inline(always)]
    pub(super) fn new(slot: &PortSlot, vlan: VlanState, explicit: bool) -> Self {
        let mode = &slot.options.vlan;
        Egress {
            vlan,
            admitted: mode.admits(vlan.vid),
            wants_tag: mode.tags(vlan.vid),
            explicit,
        }
    }

    /// Untagged frames leave as they are.
    #[inline(always)]
    pub(super) fn keeps_untagged(&self) -> bool {
        self.admitted && !self.wants_tag && self.vlan.inner.is_none()
    }
}

/// Frames on their way to one destination.
struct Outbox<'c, 'a> {
    chunk: &'c mut ArrayVec<TxFrame<'a>, CHUNK>,
    /// Bytes of the frames in `chunk` (summed as they go in, not again when counted).
    chunk_bytes: u64,
    drops: BatchDrops,
    now: Timestamp,
}

impl<'c, 'a> Outbox<'c, 'a> {
    fn new(chunk: &'c mut ArrayVec<TxFrame<'a>, CHUNK>, now: Timestamp) -> Self {
        Outbox {
            chunk,
            chunk_bytes: 0,
            drops: BatchDrops::default(),
            now,
        }
    }

    /// Queues `frame` for `slot` as `egress` says. Returns false when it was dropped.
    #[inline(always)]
    fn emit(
        &mut self,
        slot: &mut PortSlot,
        slow: &mut SlowBuffers,
        frame: RxFrame<'a>,
        meta: &super::classify::PacketMeta,
        offload: OffloadInfo,
        egress: Egress,
    ) -> bool {
        let Egress {
            vlan,
            admitted,
            wants_tag,
            explicit,
        } = egress;
        if !admitted {
            if explicit {
                self.drops.note(DropReason::VlanEgressDenied, 1);
            }
            return false;
        }
        // The frame can leave exactly as it came when the destination wants the tag it has
        // (TPID, PCP and DEI kept), or no tag and it has none. A priority tag (VID 0) stays
        // on a port that does not tag VLAN 0.
        let unchanged = vlan.inner.is_none()
            && if wants_tag {
                meta.wire_vid() == Some(vlan.vid)
            } else {
                meta.body_offset() == 12 || (vlan.vid == 0 && meta.wire_vid() == Some(0))
            };
        if unchanged {
            // `queue` spelled out: built before the test, the frame costs ~15 instructions
            // more per packet (callgrind, loop_tests).
            let l3_offset = meta.l3_offset();
            if fits(&slot.caps, frame.len(), &offload, l3_offset) {
                self.push(slot, TxFrame::of(frame, offload));
                return true;
            }
            let tx = TxFrame::of(frame, offload);
            return self.queue_slow(slot, slow, tx, l3_offset);
        }
        let body_offset = meta.body_offset();
        let (Some(macs), Some(body)) = (frame.head.get(..12), frame.head.get(body_offset..)) else {
            self.drops.note(DropReason::Malformed, 1);
            return false;
        };
        let mut head = [0u8; TxFrame::MAX_HEAD];
        head[..12].copy_from_slice(macs);
        let mut head_len = 12;
        if wants_tag {
            // Re-tagging with the VLAN it came with keeps its tag's bits; a new VLAN gets an
            // 802.1Q tag with the old priority.
            let tag = if meta.wire_vid() == Some(vlan.vid) {
                tag_bytes(meta.wire_tpid(), meta.wire_tci())
            } else {
                let pcp_dei = meta.wire_tci() & 0xf000;
                tag_bytes(
                    CTAG,
                    if meta.wire_vid().is_some() {
                        pcp_dei
                    } else {
                        0
                    } | vlan.vid,
                )
            };
            head[head_len..head_len + 4].copy_from_slice(&tag);
            head_len += 4;
        }
        if let Some(inner) = vlan.inner {
            head[head_len..head_len + 4].copy_from_slice(&tag_bytes(CTAG, inner));
            head_len += 4;
        }
        let Some(offload) = shift_offload(offload, body_offset, head_len) else {
            self.drops.note(DropReason::BadOffload, 1);
            return false;
        };
        let l3_offset = meta.l3_offset() - body_offset + head_len;
        let tx = TxFrame::with_head(&head[..head_len], body, offload).with_tail(frame.tail);
        self.queue(slot, slow, tx, l3_offset)
    }

    /// Queues `tx` for `slot` if it can take it as it is, else completes or segments it.
    /// Returns false when it was dropped.
    #[inline(always)]
    fn queue(
        &mut self,
        slot: &mut PortSlot,
        slow: &mut SlowBuffers,
        tx: TxFrame<'a>,
        l3_offset: usize,
    ) -> bool {
        if fits(&slot.caps, tx.len(), &tx.offload, l3_offset) {
            self.push(slot, tx);
            return true;
        }
        self.queue_slow(slot, slow, tx, l3_offset)
    }

    /// Queues `tx`, which `slot` takes as it is.
    #[inline(always)]
    fn push(&mut self, slot: &mut PortSlot, tx: TxFrame<'a>) {
        if self.chunk.is_full() {
            self.flush(slot);
        }
        let len = tx.len();
        // Room was just made if there was none.
        let _ = self.chunk.try_push(tx);
        self.chunk_bytes += len as u64;
    }

    /// Transmits what is queued, counting what the port accepted and refused. Returns how
    /// many it accepted.
    fn flush(&mut self, slot: &mut PortSlot) -> usize {
        if self.chunk.is_empty() {
            return 0;
        }
        let frames = self.chunk.as_slice();
        let accepted = slot.tx.transmit(frames).min(frames.len());
        let sent = &frames[..accepted];
        let bytes = if accepted == frames.len() {
            self.chunk_bytes
        } else {
            bytes_of(sent)
        };
        count_tx(slot, sent, bytes, self.now);
        self.drops
            .note(DropReason::TxQueueFull, (frames.len() - accepted) as u64);
        self.chunk.clear();
        self.chunk_bytes = 0;
        accepted
    }
}

fn bytes_of(frames: &[TxFrame<'_>]) -> u64 {
    frames.iter().map(|f| f.len() as u64).sum()
}

/// Counts frames a port accepted (`bytes` in all), and copies them into its send-side
/// captures.
fn count_tx(slot: &PortSlot, frames: &[TxFrame<'_>], bytes: u64, now: Timestamp) {
    let counters = &slot.counters;
    counters.tx_packets.add(frames.len() as u64);
    counters.tx_bytes.add(bytes);
    for (direction, buffer) in &slot.captures {
        if direction.takes(CaptureDirection::Out) {
            let mut w = buffer.writer();
            for f in frames {
                w.push(now, CaptureDirection::Out, [f.head(), f.body], f.tail);
            }
        }
    }
}

/// Whether a port with `caps` takes a frame of `len` bytes, its L3 header at `l3_offset`, as
/// it is.
#[inline(always)]
fn fits(caps: &PortCaps, len: usize, offload: &OffloadInfo, l3_offset: usize) -> bool {
    if offload.is_gso() {
        caps.accepts_gso(offload.gso)
            && len <= caps.max_gso_frame_len
            && datagrams_fit(offload, len, l3_offset, caps.mtu)
    } else {
        len <= caps.max_frame_len
            && len.saturating_sub(l3_offset) <= caps.mtu
            && (!offload.needs_csum || caps.partial_csum)
    }
}

/// Whether every datagram of a UDP super-frame (`gso_size` payload bytes behind its IP and
/// 8-byte UDP headers, the UDP header at `csum_start`, checked at ingress) is an L3 packet of
/// at most `mtu` bytes; true for every other frame.
fn datagrams_fit(o: &OffloadInfo, len: usize, l3_offset: usize, mtu: usize) -> bool {
    if o.gso != weft_packet::GsoKind::UdpL4 {
        return true;
    }
    let headers_end = usize::from(o.csum_start) + weft_packet::udp::HEADER_LEN;
    let datagram = usize::from(o.gso_size).min(len.saturating_sub(headers_end));
    headers_end.saturating_sub(l3_offset) + datagram <= mtu
}

const CTAG: u16 = 0x8100;

fn tag_bytes(tpid: u16, tci: u16) -> [u8; 4] {
    let [a, b] = tpid.to_be_bytes();
    let [c, d] = tci.to_be_bytes();
    [a, b, c, d]
}

/// Moves the offload offsets by the difference between the old head (`old_len` bytes) and the
/// new one. `None` when they would fall before the end of the new head.
fn shift_offload(mut o: OffloadInfo, old_len: usize, new_len: usize) -> Option<OffloadInfo> {
    if !o.needs_csum && !o.is_gso() {
        return Some(o);
    }
    let shift = |v: u16| -> Option<u16> {
        let v = usize::from(v).checked_sub(old_len)?.checked_add(new_len)?;
        u16::try_from(v).ok()
    };
    o.csum_start = shift(o.csum_start)?;
    if o.is_gso() {
        o.hdr_len = shift(o.hdr_len).unwrap_or(o.hdr_len);
    }
    Some(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_bits_iterate_in_order() {
        let mut b = PortBits::default();
        for p in [200, 3, 64, 0, 255] {
            b.set(p);
        }
        assert_eq!(b.iter().collect::<Vec<_>>(), vec![0, 3, 64, 200, 255]);
    }

    #[test]
    fn offload_offsets_follow_the_new_head() {
        let o = OffloadInfo {
            needs_csum: true,
            csum_start: 34,
            csum_offset: 16,
            ..OffloadInfo::default()
        };
        assert_eq!(shift_offload(o, 12, 16).map(|o| o.csum_start), Some(38));
        assert_eq!(shift_offload(o, 16, 12).map(|o| o.csum_start), Some(30));
        let bad = OffloadInfo { csum_start: 4, ..o };
        assert_eq!(shift_offload(bad, 12, 16), None);
    }
}
