//! What a memif port counts: frames and bytes each way, frames dropped by reason, peers
//! refused by reason, and connection events. Atomics, written by the data path and the
//! control thread, read by [`MemifPort::stats`](crate::MemifPort::stats) and the
//! `PortDevice` visitor.

use std::sync::atomic::{AtomicU64, Ordering};

use weft_switch::DeviceCounter;

use crate::handshake::Refusal;
use crate::ring::FrameDrop;

/// The port's counters.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) rx_frames: AtomicU64,
    pub(crate) rx_bytes: AtomicU64,
    pub(crate) tx_frames: AtomicU64,
    pub(crate) tx_bytes: AtomicU64,
    pub(crate) rx_bad_descriptor: AtomicU64,
    pub(crate) rx_too_long: AtomicU64,
    pub(crate) rx_bad_chain: AtomicU64,
    pub(crate) tx_ring_full: AtomicU64,
    pub(crate) tx_too_long: AtomicU64,
    pub(crate) tx_not_connected: AtomicU64,
    pub(crate) refused: [AtomicU64; Refusal::ALL.len()],
    pub(crate) ring_faults: AtomicU64,
    pub(crate) memory_truncated: AtomicU64,
    pub(crate) connects: AtomicU64,
    pub(crate) disconnects: AtomicU64,
    pub(crate) interrupts_sent: AtomicU64,
}

/// A copy of a port's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemifStats {
    /// Frames received from the peer and handed to the switch.
    pub rx_frames: u64,
    /// Their bytes.
    pub rx_bytes: u64,
    /// Frames written into the peer's ring.
    pub tx_frames: u64,
    /// Their bytes.
    pub tx_bytes: u64,
    /// Received frames dropped: a descriptor outside its region, over the buffer size, or
    /// empty.
    pub rx_bad_descriptor: u64,
    /// Received frames dropped: longer than the port carries.
    pub rx_too_long: u64,
    /// Received frames dropped: a chain too long or never ending.
    pub rx_bad_chain: u64,
    /// Frames not sent: the peer's ring was full.
    pub tx_ring_full: u64,
    /// Frames not sent: longer than a chain carries.
    pub tx_too_long: u64,
    /// Frames not sent: no peer.
    pub tx_not_connected: u64,
    /// Peers refused or dropped during their handshake, by reason ([`Refusal::ALL`]'s
    /// order).
    pub refused: [u64; Refusal::ALL.len()],
    /// Connected peers dropped for breaking a ring.
    pub ring_faults: u64,
    /// Connected peers dropped for truncating their memory (SIGBUS caught).
    pub memory_truncated: u64,
    /// Peers that completed their handshake.
    pub connects: u64,
    /// Connections that ended, for whatever reason.
    pub disconnects: u64,
    /// Interrupts written to the peer's eventfds.
    pub interrupts_sent: u64,
}

impl MemifStats {
    /// Refusals counted for `reason`.
    pub fn refused(&self, reason: Refusal) -> u64 {
        self.refused[reason.index()]
    }
}

fn get(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

impl Counters {
    pub(crate) fn add(a: &AtomicU64, n: u64) {
        a.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn rx_drop(&self, reason: FrameDrop) {
        Self::add(
            match reason {
                FrameDrop::BadDescriptor => &self.rx_bad_descriptor,
                FrameDrop::TooLong => &self.rx_too_long,
                FrameDrop::BadChain => &self.rx_bad_chain,
            },
            1,
        );
    }

    pub(crate) fn refuse(&self, reason: Refusal) {
        if let Some(c) = self.refused.get(reason.index()) {
            Self::add(c, 1);
        }
    }

    pub(crate) fn snapshot(&self) -> MemifStats {
        let mut refused = [0; Refusal::ALL.len()];
        for (out, c) in refused.iter_mut().zip(&self.refused) {
            *out = get(c);
        }
        MemifStats {
            rx_frames: get(&self.rx_frames),
            rx_bytes: get(&self.rx_bytes),
            tx_frames: get(&self.tx_frames),
            tx_bytes: get(&self.tx_bytes),
            rx_bad_descriptor: get(&self.rx_bad_descriptor),
            rx_too_long: get(&self.rx_too_long),
            rx_bad_chain: get(&self.rx_bad_chain),
            tx_ring_full: get(&self.tx_ring_full),
            tx_too_long: get(&self.tx_too_long),
            tx_not_connected: get(&self.tx_not_connected),
            refused,
            ring_faults: get(&self.ring_faults),
            memory_truncated: get(&self.memory_truncated),
            connects: get(&self.connects),
            disconnects: get(&self.disconnects),
            interrupts_sent: get(&self.interrupts_sent),
        }
    }

    /// Every counter once, zeros included: drops as drops, the rest as events.
    pub(crate) fn visit(&self, visit: &mut dyn FnMut(DeviceCounter<'_>)) {
        let s = self.snapshot();
        for (name, v) in [
            ("memif_rx_bad_descriptor", s.rx_bad_descriptor),
            ("memif_rx_too_long", s.rx_too_long),
            ("memif_rx_bad_chain", s.rx_bad_chain),
            ("memif_tx_ring_full", s.tx_ring_full),
            ("memif_tx_too_long", s.tx_too_long),
            ("memif_tx_not_connected", s.tx_not_connected),
        ] {
            visit(DeviceCounter::drop(name, v));
        }
        for (name, v) in [
            ("memif_rx_frames", s.rx_frames),
            ("memif_rx_bytes", s.rx_bytes),
            ("memif_tx_frames", s.tx_frames),
            ("memif_tx_bytes", s.tx_bytes),
            ("memif_ring_faults", s.ring_faults),
            ("memif_memory_truncated", s.memory_truncated),
            ("memif_connects", s.connects),
            ("memif_disconnects", s.disconnects),
            ("memif_interrupts_sent", s.interrupts_sent),
        ] {
            visit(DeviceCounter::event(name, v));
        }
        for r in Refusal::ALL {
            visit(DeviceCounter::event(r.counter_name(), s.refused(r)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_switch::CounterClass;

    #[test]
    fn every_counter_is_visited_once_under_a_memif_name_with_drops_as_drops() {
        let c = Counters::default();
        c.rx_drop(FrameDrop::BadChain);
        c.refuse(Refusal::Secret);
        Counters::add(&c.tx_ring_full, 3);
        let mut seen = Vec::new();
        c.visit(&mut |d| seen.push((d.name.to_string(), d.value, d.class)));
        let names: std::collections::HashSet<_> = seen.iter().map(|s| s.0.clone()).collect();
        assert_eq!(names.len(), seen.len(), "a counter visited twice");
        assert!(seen.iter().all(|s| s.0.starts_with("memif_")));
        assert!(seen.contains(&("memif_rx_bad_chain".into(), 1, CounterClass::Drop)));
        assert!(seen.contains(&("memif_tx_ring_full".into(), 3, CounterClass::Drop)));
        assert!(seen.contains(&("memif_refused_secret".into(), 1, CounterClass::Event)));
        assert_eq!(c.snapshot().refused(Refusal::Secret), 1);
    }
}
