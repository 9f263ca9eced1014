//! The receive half's side of a hand-over: datagrams a batch left undrained wait in the
//! parking spot between batches ([`crate::handover::RxParking`]), and datagrams carried
//! from another process go first into an adopted port's slots.

use crate::handover::HandoverError;
use crate::vxlan::rx::{Received, VxlanRx};

/// What a batch left undrained (GRO buffers of more datagrams than the batch took), parked
/// between batches so that a hand-over finds it ([`crate::handover::RxParking`]).
#[derive(Debug, Default)]
pub(crate) struct RxLeftover {
    pub(crate) buffers: Vec<u8>,
    pub(crate) received: Vec<Received>,
    pub(crate) next: (usize, usize),
}

impl RxLeftover {
    /// The datagrams not delivered yet: each buffer's rest (from the next datagram on).
    pub(crate) fn pending(&self) -> impl Iterator<Item = (Received, &[u8])> + '_ {
        let (index, offset) = self.next;
        self.received
            .iter()
            .enumerate()
            .skip(index)
            .filter_map(move |(i, r)| {
                let from = if i == index { offset } else { 0 };
                let bytes = self.buffers.get(r.start + from..r.start + r.len)?;
                Some((*r, bytes))
            })
    }
}

impl VxlanRx {
    /// Takes back what the last batch parked.
    pub(crate) fn unpark(&mut self) {
        if let Some(l) = self.parking.unpark() {
            self.buffers = l.buffers;
            self.received = l.received;
            self.next = l.next;
        }
        self.parked = false;
    }

    /// Puts datagrams a hand-over carried in the first slots, to be drained first. Refused
    /// (nothing changed) when they do not fit the slots.
    pub(crate) fn restore(&mut self, pending: &[(Received, &[u8])]) -> Result<(), HandoverError> {
        use HandoverError::BadState;
        if pending.len() > self.batch {
            return Err(BadState(format!(
                "{} pending datagram buffers, the port has {} slots",
                pending.len(),
                self.batch
            )));
        }
        if let Some((_, b)) = pending.iter().find(|(_, b)| b.len() > self.slot_len) {
            return Err(BadState(format!(
                "a pending datagram buffer of {} bytes, slots of {}",
                b.len(),
                self.slot_len
            )));
        }
        self.received.clear();
        for (slot, (r, bytes)) in pending.iter().enumerate() {
            let start = slot * self.slot_len;
            let Some(to) = self.buffers.get_mut(start..start + bytes.len()) else {
                return Err(BadState("pending datagrams beyond the slots".into()));
            };
            to.copy_from_slice(bytes);
            self.received.push(Received {
                start,
                len: bytes.len(),
                segment: r.segment.max(1),
                truncated: r.truncated,
                source: r.source,
            });
        }
        self.next = (0, 0);
        self.slots_used = pending.len();
        Ok(())
    }
}
