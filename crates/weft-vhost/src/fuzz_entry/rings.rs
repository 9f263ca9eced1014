//! The `vhost_rings` fuzz target's body: a guest that writes anything into its memory.
//!
//! The input is decoded into a guest: the features it accepted, its two queues' sizes,
//! descriptor tables (addresses inside and outside memory, across the boundary of its two
//! memory regions, any length and flags, indirect tables, loops), available rings and
//! indexes, virtio-net headers and frames; then a few rounds in which the port's receive
//! half takes what the guest transmits, its transmit half writes those frames (offloads as
//! the guest declared them) into the guest's receive queue, and the guest changes its rings
//! again between rounds.
//!
//! Checks, every round: nothing panics or hangs; no frame handed to the switch is longer
//! than [`MAX_FRAME_LEN`]; the used rings only ever name descriptors of their table and
//! never move by more than a ring's worth; and no chain is lost or reordered: every chain
//! the port took from an available ring is back in the used ring, in the order it was made
//! available (`VIRTIO_F_IN_ORDER`), unless that queue faulted (a broken ring is not written
//! again until the frontend restarts it); and each half reads no more descriptors than its
//! budget allows (`rx/budget.rs`, `tx/budget.rs`: the chains' first descriptors, a quantum
//! or the frames' allowance, and one chain of the cap's length past it).

use std::sync::Arc;

use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};
use weft_switch::{PortRx, PortTx, RxBatch, TxFrame};

use crate::config::{VhostPortConfig, MAX_FRAME_LEN};
use crate::device::{DeviceShared, LaneShare, RingStart};
use crate::features::{offered_features, Features};
use crate::modes::{DispatchMode, NotifyPolicy};
use crate::ring_access::MAX_CHAIN_DESCRIPTORS;
use crate::rx::{receive_quantum, VhostPortRx};
use crate::tx::{transmit_allowance, VhostPortTx};
use crate::vring::{RingLayout, RX_QUEUE, TX_QUEUE};

use super::Input;

/// Guest memory: two adjacent regions of this size from address 0, so that buffers can
/// straddle the boundary between them.
const REGION: u64 = 0x1_0000;
const MEM_END: u64 = 2 * REGION;
/// Where each queue's rings are (room for 256 descriptors and both rings).
const TX_RINGS: u64 = 0x0000;
const RX_RINGS: u64 = 0x2000;
/// Descriptors an indirect descriptor of the input may point at.
const INDIRECT_ZONE: u64 = 0x4000;
/// Buffers: from here to the end of memory, header-and-frame slots of 128 bytes.
const DATA: u64 = 0x5000;
const SLOT: u64 = 128;

const NEXT: u16 = 1;
const WRITE: u16 = 2;
const INDIRECT: u16 = 4;

/// One guest queue as the input lays it out.
struct Queue {
    base: u64,
    size: u16,
    avail_idx: u16,
}

impl Queue {
    fn layout(&self) -> RingLayout {
        RingLayout::contiguous(self.base, self.size)
    }

    fn used_idx(&self, mem: &GuestMemoryMmap) -> u16 {
        let at = GuestAddress(self.layout().used.0 + 2);
        mem.read_obj::<u16>(at).map_or(0, u16::from_le)
    }

    /// Used element `pos`: (id, len).
    fn used_elem(&self, mem: &GuestMemoryMmap, pos: u16) -> (u32, u32) {
        let slot = u64::from(pos % self.size.max(1));
        let at = GuestAddress(self.layout().used.0 + 4 + 8 * slot);
        let id = mem.read_obj::<u32>(at).map_or(0, u32::from_le);
        let len = mem
            .read_obj::<u32>(GuestAddress(at.0 + 4))
            .map_or(0, u32::from_le);
        (id, len)
    }

    /// The head at available-ring position `pos`.
    fn avail_head(&self, mem: &GuestMemoryMmap, pos: u16) -> u16 {
        let slot = u64::from(pos % self.size.max(1));
        let at = GuestAddress(self.layout().avail.0 + 4 + 2 * slot);
        mem.read_obj::<u16>(at).map_or(0, u16::from_le)
    }

    /// Writes descriptor `index` from the input.
    fn write_desc(&self, mem: &GuestMemoryMmap, index: u16, input: &mut Input<'_>) {
        write_desc_at(mem, self.base + 16 * u64::from(index), self.size, input);
    }

    /// The guest makes up to a ring's worth of chains available (heads from the input,
    /// mostly inside the table), and sometimes sets the index as a broken driver would.
    fn publish(&mut self, mem: &GuestMemoryMmap, input: &mut Input<'_>) {
        let layout = self.layout();
        let count = u16::from(input.u8()) % (self.size + 1);
        for _ in 0..count {
            let raw = u16::from(input.u8());
            let head = if raw & 0x80 == 0 {
                raw % self.size
            } else {
                raw
            };
            let slot = u64::from(self.avail_idx % self.size);
            let _ = mem.write_obj(head.to_le(), GuestAddress(layout.avail.0 + 4 + 2 * slot));
            self.avail_idx = self.avail_idx.wrapping_add(1);
        }
        let flags = input.u8();
        if flags & 0x10 != 0 {
            self.avail_idx = input.u16();
        }
        let _ = mem.write_obj(self.avail_idx.to_le(), GuestAddress(layout.avail.0 + 2));
        // The avail flags (NO_INTERRUPT) and used_event, as the driver might set them.
        let _ = mem.write_obj(u16::from(flags & 1).to_le(), layout.avail);
        let used_event = GuestAddress(layout.avail.0 + 4 + 2 * u64::from(self.size));
        let _ = mem.write_obj(input.u16().to_le(), used_event);
    }
}

/// A descriptor decoded from the input at guest address `at`: addresses mostly on buffer
/// slots, sometimes at the end of memory, anywhere, or zero; lengths mostly a frame's.
fn write_desc_at(mem: &GuestMemoryMmap, at: u64, size: u16, input: &mut Input<'_>) {
    let kind = input.u8();
    let addr = match kind % 8 {
        0..=4 => DATA + u64::from(input.u16()) % ((MEM_END - DATA) / SLOT + 8) * SLOT,
        5 => MEM_END - u64::from(input.u8()),
        6 => input.num(8),
        _ => INDIRECT_ZONE,
    };
    let len = match input.u8() % 8 {
        0..=2 => 26 + u32::from(input.u8()),
        3 => 76,
        4 => u32::from(input.u16()),
        5 => 16 * u32::from(input.u8() % 9),
        6 => 1526,
        _ => input.u32(),
    };
    let mut flags = u16::from(kind >> 3) & (NEXT | WRITE);
    if kind >> 5 == 7 {
        flags |= INDIRECT;
    }
    let next = if kind & 0x80 == 0 {
        u16::from(input.u8()) % size.max(1)
    } else {
        input.u16()
    };
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&addr.to_le_bytes());
    bytes[8..12].copy_from_slice(&len.to_le_bytes());
    bytes[12..14].copy_from_slice(&flags.to_le_bytes());
    bytes[14..].copy_from_slice(&next.to_le_bytes());
    let _ = mem.write_slice(&bytes, GuestAddress(at));
}

/// Fills the buffer slots: a virtio-net header (mostly "no offload", else from the input)
/// and an Ethernet frame whose bytes come from the input.
fn write_buffers(mem: &GuestMemoryMmap, input: &mut Input<'_>) {
    let mut slot = [0u8; 128];
    let mut at = DATA;
    while at < MEM_END && !input.0.is_empty() {
        slot.fill(0);
        if input.u8() & 3 == 0 {
            for b in slot.iter_mut().take(12) {
                *b = input.u8();
            }
        }
        slot[12..18].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        slot[18..24].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        for b in slot.iter_mut().skip(24).take(16) {
            *b = input.u8();
        }
        let _ = mem.write_slice(&slot, GuestAddress(at));
        at += SLOT;
    }
}

/// Checks a queue after a round: `taken` chains left its available ring from position
/// `first`. Unless the queue faulted, all come back, in the order they were made available
/// (what `VIRTIO_F_IN_ORDER` promises; weft offers it).
fn check_used(
    q: &Queue,
    mem: &GuestMemoryMmap,
    before: u16,
    first: u16,
    taken: u16,
    faulted: bool,
) {
    let after = q.used_idx(mem);
    let added = after.wrapping_sub(before);
    assert!(
        added <= q.size,
        "used index moved by {added} in a ring of {}",
        q.size
    );
    for k in 0..added {
        let (id, _) = q.used_elem(mem, before.wrapping_add(k));
        assert!(
            id < u32::from(q.size),
            "used entry names descriptor {id} of {}",
            q.size
        );
        if !faulted {
            let head = q.avail_head(mem, first.wrapping_add(k));
            assert_eq!(
                id,
                u32::from(head),
                "chain used out of the order it was made available"
            );
        }
    }
    if !faulted {
        assert_eq!(added, taken, "chains taken but not returned");
    }
}

/// The port's view of one of its queues: next available index and fault.
fn port_view(dev: &DeviceShared, index: usize) -> (u16, bool) {
    let vring = if index == RX_QUEUE {
        dev.rx_vring_of(0)
    } else {
        dev.tx_vring_of(0)
    };
    vring.map_or((0, true), |v| {
        let st = v.lock();
        (
            virtio_queue::QueueT::next_avail(&st.queue),
            st.fault.is_some(),
        )
    })
}

/// What one run got through: frames the port received from the guest, and frames it
/// delivered into the guest's receive queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GuestRun {
    /// Frames handed to the switch.
    pub received: usize,
    /// Frames written into receive chains.
    pub delivered: usize,
}

/// Runs the input as a guest against one port (see the module documentation).
pub fn guest_rings(data: &[u8]) -> GuestRun {
    let mut run = GuestRun::default();
    let mut input = Input(data);
    let options = input.u8();
    let mut config = VhostPortConfig {
        lend_guest_memory: options & 1 == 0,
        bounce_limit: 1 << 20,
        ..VhostPortConfig::default()
    };
    config.dispatch = match (options >> 1) & 3 {
        0 => DispatchMode::GuestDriven,
        1 => DispatchMode::SwitchDriven,
        _ => DispatchMode::default(),
    };
    config.notify = match (options >> 3) & 3 {
        0 => NotifyPolicy::Optimistic,
        1 => NotifyPolicy::Coalesced {
            frames: 4,
            max_delay: std::time::Duration::from_micros(50),
        },
        _ => NotifyPolicy::Immediate,
    };
    let features = Features(offered_features(&config) & input.num(8));
    let region = usize::try_from(REGION).unwrap_or(0);
    let Ok(mem) = GuestMemoryMmap::<()>::from_ranges(&[
        (GuestAddress(0), region),
        (GuestAddress(REGION), region),
    ]) else {
        return run;
    };
    let Ok(dev) = DeviceShared::new(config) else {
        return run;
    };
    dev.set_features(features);
    let mut txq = Queue {
        base: TX_RINGS,
        size: 1 << (input.u8() % 9),
        avail_idx: 0,
    };
    let mut rxq = Queue {
        base: RX_RINGS,
        size: 1 << (input.u8() % 9),
        avail_idx: 0,
    };
    for q in [&txq, &rxq] {
        for index in 0..q.size {
            q.write_desc(&mem, index, &mut input);
        }
    }
    for k in 0..8 {
        write_desc_at(&mem, INDIRECT_ZONE + 16 * k, 8, &mut input);
    }
    let mem = Arc::new(crate::memory::GuardedMemory::unguarded(mem));
    // Bit 5: a live migration in progress, both rings logging what the port writes (the
    // chains walked again to log them are the guest's to make anything of).
    let log = (options & 0x20 != 0)
        .then(|| GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), 4096)]).ok())
        .flatten()
        .map(|m| Arc::new(crate::memory::DirtyLog::from_mapped(m, 8)));
    let log_counters = Arc::new(crate::memory::LogCounters::default());
    let calls = [EventFd::new(EFD_NONBLOCK), EventFd::new(EFD_NONBLOCK)];
    let Ok(kick) = EventFd::new(EFD_NONBLOCK) else {
        return run;
    };
    for ((index, q), call) in [(RX_QUEUE, &rxq), (TX_QUEUE, &txq)].into_iter().zip(calls) {
        let start = RingStart {
            mem: Arc::clone(&mem),
            layout: q.layout(),
            features,
            enabled: true,
            kick: (index == TX_QUEUE).then(|| kick.try_clone().ok()).flatten(),
            call: call.ok(),
        };
        let dirty = log.as_ref().map(|log| crate::memory::RingLog {
            log: Arc::clone(log),
            used: Some(q.layout().used.0),
            counters: Arc::clone(&log_counters),
        });
        if dev.start_ring(index, start, dirty).is_err() {
            return run;
        }
    }
    let Ok(mut rx) = VhostPortRx::new(Arc::clone(&dev), LaneShare::WHOLE) else {
        return run;
    };
    let mut tx = VhostPortTx::new(Arc::clone(&dev), LaneShare::WHOLE);
    let mut batch = RxBatch::new(64);
    let rounds = 1 + input.u8() % 4;
    txq.publish(&mem, &mut input);
    rxq.publish(&mem, &mut input);
    write_buffers(&mem, &mut input);
    for _ in 0..rounds {
        let (tx_used, rx_used) = (txq.used_idx(&mem), rxq.used_idx(&mem));
        let (tx_next, _) = port_view(&dev, TX_QUEUE);
        let (rx_next, _) = port_view(&dev, RX_QUEUE);
        batch.clear();
        let read_before = descriptors_read(&dev);
        rx.receive(&mut batch);
        let read_after = descriptors_read(&dev);
        // Chains' first descriptors (a batch's worth, and as many again topped up after
        // drops), the quantum, and one chain past it.
        let cap = usize::from(MAX_CHAIN_DESCRIPTORS);
        let most = 2 * batch.capacity() + receive_quantum(batch.capacity()) + cap + 1;
        let read = read_after.1 - read_before.1;
        assert!(
            read <= most as u64,
            "{read} descriptors read in one receive"
        );
        {
            let frames: Vec<TxFrame<'_>> = batch
                .descs()
                .iter()
                .map(|d| {
                    let frame = rx.frame(d.handle);
                    assert!(frame.len() <= MAX_FRAME_LEN, "a {} B frame", frame.len());
                    TxFrame::of(frame, d.offload)
                })
                .collect();
            let sent = tx.transmit(&frames);
            assert!(sent <= frames.len());
            let allowance: isize = frames.iter().map(|f| transmit_allowance(f.len())).sum();
            let read = descriptors_read(&dev).0 - read_after.0;
            assert!(
                read <= allowance.unsigned_abs() as u64 + cap as u64 + 1,
                "{read} descriptors read in one transmit of {} frames",
                frames.len()
            );
            run.received += frames.len();
        }
        rx.finish();
        let (tx_after, tx_fault) = port_view(&dev, TX_QUEUE);
        let (rx_after, rx_fault) = port_view(&dev, RX_QUEUE);
        let tx_taken = tx_after.wrapping_sub(tx_next);
        let rx_taken = rx_after.wrapping_sub(rx_next);
        check_used(&txq, &mem, tx_used, tx_next, tx_taken, tx_fault);
        check_used(&rxq, &mem, rx_used, rx_next, rx_taken, rx_fault);
        // The guest moves on: a few descriptors rewritten, more chains made available.
        for _ in 0..input.u8() % 4 {
            let index = u16::from(input.u8()) % txq.size;
            txq.write_desc(&mem, index, &mut input);
        }
        txq.publish(&mem, &mut input);
        rxq.publish(&mem, &mut input);
    }
    run.delivered = dev.rx_vring_of(0).map_or(0, |v| {
        usize::try_from(v.counters.snapshot().frames).unwrap_or(0)
    });
    run
}

/// Descriptors read so far: (the guest's receive queue, its transmit queue).
fn descriptors_read(dev: &DeviceShared) -> (u64, u64) {
    let read = |v: Option<&crate::vring::Vring>| v.map_or(0, |v| v.counters.snapshot().descriptors);
    (read(dev.rx_vring_of(0)), read(dev.tx_vring_of(0)))
}

#[cfg(test)]
mod tests;
