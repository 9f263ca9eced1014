//! Stage 3 for a batch whose packets all have one output ([`BatchScratch::uniform`]): to
//! one port, or flooded. Each destination takes the whole batch in one pass, with the same
//! sends, drops and counts, in the same order, as the per-destination lists give, without
//! building them. A flood is what a guest sending to stations nobody sends from gets on
//! every frame (DPDK testpmd's traffic, say).
//!
//! [`BatchScratch::uniform`]: crate::switch::BatchScratch

use arrayvec::ArrayVec;

use crate::counters::DropReason;
use crate::decision::{Output, Target};
use crate::port::{RxDesc, TxFrame};
use crate::switch::classify::PacketMeta;
use crate::switch::{Frames, PortSlot, Switch};
use crate::types::{PortId, Timestamp};

use super::{goes_to, refresh_caps, DeliverScratch, Egress, Outbox, CHUNK};

impl Switch {
    /// Stage 3 when every packet of the batch has output `o`.
    pub(in crate::switch) fn deliver_uniform(
        &mut self,
        in_port: PortId,
        o: Output,
        frames: &Frames<'_>,
        now: Timestamp,
    ) {
        let Switch {
            ports,
            batch,
            scratch,
            deliver: ds,
            peers_changed,
            ..
        } = self;
        let metas = scratch.meta.get(..scratch.len).unwrap_or_default();
        let descs = batch.descs().get(..scratch.len).unwrap_or_default();
        let n = scratch.len as u64;
        match o.target {
            Target::Port(to) => {
                let Some(slot) = ports.get_mut(to.index()).and_then(Option::as_mut) else {
                    if let Some(slot) = ports.get(in_port.index()).and_then(Option::as_ref) {
                        slot.counters.drops.add(DropReason::PortGone, n);
                    }
                    return;
                };
                *peers_changed |= refresh_caps(slot);
                let egress = Egress::new(slot, o.vlan, true);
                send_batch(slot, ds, frames, metas, descs, egress, now);
            }
            Target::Flood { .. } => {
                // Every other port in port order, as the lists visit them; each has its
                // capabilities looked at, member of the flood or not.
                let mut reached = false;
                for (p, slot) in ports.iter_mut().enumerate() {
                    let Some(slot) = slot.as_mut().filter(|_| p != in_port.index()) else {
                        continue;
                    };
                    *peers_changed |= refresh_caps(slot);
                    if goes_to(&o, p, in_port, slot).is_some() {
                        reached = true;
                        let egress = Egress::new(slot, o.vlan, false);
                        send_batch(slot, ds, frames, metas, descs, egress, now);
                    }
                }
                // A port that took the packets, or dropped and counted them, was a
                // destination; with none, each packet reached no one.
                if !reached {
                    if let Some(slot) = ports.get(in_port.index()).and_then(Option::as_ref) {
                        slot.counters.drops.add(DropReason::NoDestination, n);
                    }
                }
            }
        }
    }
}

/// Every frame of the batch to one port, as `egress` says.
fn send_batch(
    slot: &mut PortSlot,
    ds: &mut DeliverScratch,
    frames: &Frames<'_>,
    metas: &[PacketMeta],
    descs: &[RxDesc],
    egress: Egress,
    now: Timestamp,
) {
    let mut chunk: ArrayVec<TxFrame<'_>, CHUNK> = ArrayVec::new();
    let mut out = Outbox::new(&mut chunk, now);
    // Where the port sends untagged frames untagged, an untagged frame (its L3 header at 14)
    // with no offload to honour that is no longer than this leaves as it came: what `emit`
    // finds, in one compare.
    let caps = &slot.caps;
    let plain_limit = egress
        .keeps_untagged()
        .then(|| caps.max_frame_len.min(caps.mtu.saturating_add(14)));
    for ((frame, meta), desc) in frames.iter().zip(metas).zip(descs) {
        let offload = desc.offload;
        if let Some(limit) = plain_limit {
            if meta.wire_tpid() == 0
                && !offload.needs_csum
                && !offload.is_gso()
                && frame.len() <= limit
            {
                out.push(slot, TxFrame::of(*frame, offload));
                continue;
            }
        }
        out.emit(slot, &mut ds.slow, *frame, meta, offload, egress);
    }
    out.flush(slot);
    out.drops.flush(&slot.counters.drops);
}
