//! Frames a controller sends (OpenFlow's packet-out): out of one port as they are
//! ([`Switch::send_out`]), or into the switch as if a port had received them
//! ([`Switch::inject`]): through the rules, or, as OpenFlow's `NORMAL` output, straight to
//! the learning bridge ([`Pipeline::Normal`]) — how a controller lets a frame that its own
//! rule sent up go on as the switch would have sent it, without meeting that rule again. Either runs on the lane's thread between batches, and goes through
//! the same counters, captures and MTU checks as forwarded frames.

use weft_packet::OffloadInfo;

use crate::port::{FrameHandle, PortRx, RxBatch, RxDesc, RxFrame, TxFrame};
use crate::types::{PortId, Timestamp};

use super::{fits, Outbox, CHUNK};
use crate::switch::{PortSlot, Switch};

/// The shortest frame sent or injected: an Ethernet header.
const MIN_FRAME: usize = 14;

/// Why a packet-out was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PacketOutError {
    /// No such port on the switch.
    #[error("no port {0:?} on the switch")]
    NoSuchPort(PortId),
    /// Shorter than an Ethernet header.
    #[error("a frame of {0} bytes is shorter than an Ethernet header ({MIN_FRAME} bytes)")]
    TooShort(usize),
    /// Larger than the port takes.
    #[error("a frame of {len} bytes is larger than the port takes (MTU {mtu}, at most {max_frame} bytes with its headers)")]
    TooBig {
        /// The frame's length.
        len: usize,
        /// The port's MTU.
        mtu: usize,
        /// The largest frame it takes.
        max_frame: usize,
    },
    /// The port's transmit queue was full (counted as its `tx_queue_full` drop).
    #[error("the port's transmit queue is full")]
    TxQueueFull,
}

/// Which part of the switch an injected frame goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pipeline {
    /// The rules, then the learning bridge, as a received frame.
    Rules,
    /// The learning bridge only (OpenFlow's `NORMAL`): no rule sees the frame.
    Normal,
}

/// What controllers sent through one lane.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PacketOutStats {
    /// Frames sent out of a port.
    pub sent: u64,
    /// Frames run through the pipeline.
    pub injected: u64,
    /// Frames refused (too short, too big, no port, queue full).
    pub refused: u64,
}

impl PacketOutStats {
    /// Adds another lane's counters.
    pub fn add(&mut self, other: &PacketOutStats) {
        self.sent += other.sent;
        self.injected += other.injected;
        self.refused += other.refused;
    }
}

/// Where the L3 header starts: after the Ethernet header and up to two VLAN tags, so that
/// a tagged frame of exactly the MTU fits as it does when forwarded.
fn l3_offset(frame: &[u8]) -> usize {
    let mut at = 12;
    for _ in 0..2 {
        match frame.get(at..at + 2) {
            Some([0x81, 0x00]) | Some([0x88, 0xa8]) if frame.len() >= at + 6 => at += 4,
            _ => break,
        }
    }
    at + 2
}

/// Checks `frame` against what `slot`'s port takes.
fn check(slot: &PortSlot, frame: &[u8]) -> Result<(), PacketOutError> {
    if frame.len() < MIN_FRAME {
        return Err(PacketOutError::TooShort(frame.len()));
    }
    if !fits(
        &slot.caps,
        frame.len(),
        &OffloadInfo::default(),
        l3_offset(frame),
    ) {
        return Err(PacketOutError::TooBig {
            len: frame.len(),
            mtu: slot.caps.mtu,
            max_frame: slot.caps.max_frame_len,
        });
    }
    Ok(())
}

/// A receive half that yields one frame, as the port's own: forwarded, never learned from.
struct Injected<'a> {
    frame: &'a [u8],
}

impl PortRx for Injected<'_> {
    fn receive(&mut self, batch: &mut RxBatch) {
        let _ = batch.push_own(RxDesc {
            handle: FrameHandle(0),
            offload: OffloadInfo::default(),
        });
    }

    fn frame(&self, _handle: FrameHandle) -> RxFrame<'_> {
        RxFrame::local(self.frame)
    }

    fn finish(&mut self) {}
}

impl Switch {
    /// Sends `frame` out of `port` exactly as it is (no VLAN rewrite, no learning): counted
    /// as the port's transmit and seen by its captures.
    pub fn send_out(
        &mut self,
        port: PortId,
        frame: &[u8],
        now: Timestamp,
    ) -> Result<(), PacketOutError> {
        let result = self.send_out_inner(port, frame, now);
        match result {
            Ok(()) => self.packet_out.sent += 1,
            Err(_) => self.packet_out.refused += 1,
        }
        result
    }

    fn send_out_inner(
        &mut self,
        port: PortId,
        frame: &[u8],
        now: Timestamp,
    ) -> Result<(), PacketOutError> {
        let slot = self
            .ports
            .get_mut(port.index())
            .and_then(Option::as_mut)
            .ok_or(PacketOutError::NoSuchPort(port))?;
        super::refresh_caps(slot);
        check(slot, frame)?;
        let mut chunk = arrayvec::ArrayVec::<TxFrame<'_>, CHUNK>::new();
        let mut out = Outbox::new(&mut chunk, now);
        out.push(
            slot,
            TxFrame::of(RxFrame::local(frame), OffloadInfo::default()),
        );
        let accepted = out.flush(slot);
        out.drops.flush(&slot.counters.drops);
        if accepted == 0 {
            return Err(PacketOutError::TxQueueFull);
        }
        Ok(())
    }

    /// Runs `frame` through `pipeline` as if `in_port` had received it (captures and
    /// counters too: it counts as the port's receive), as the port's own frame: the switch
    /// does not learn its source address, so a controller cannot move a station in the FDB
    /// by sending in its name.
    pub fn inject(
        &mut self,
        in_port: PortId,
        frame: &[u8],
        pipeline: Pipeline,
        now: Timestamp,
    ) -> Result<(), PacketOutError> {
        let checked = match self.ports.get(in_port.index()).and_then(Option::as_ref) {
            Some(slot) => check(slot, frame),
            None => Err(PacketOutError::NoSuchPort(in_port)),
        };
        if let Err(e) = checked {
            self.packet_out.refused += 1;
            return Err(e);
        }
        self.tell_peers_if_changed();
        let mut rx = Injected { frame };
        self.rules_bypassed = pipeline == Pipeline::Normal;
        self.process(in_port, &mut rx, now);
        self.rules_bypassed = false;
        self.packet_out.injected += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_l3_offset_skips_up_to_two_tags() {
        let mut f = vec![0u8; 64];
        assert_eq!(l3_offset(&f), 14);
        f[12] = 0x81;
        assert_eq!(l3_offset(&f), 18);
        f[16] = 0x88;
        f[17] = 0xa8;
        assert_eq!(l3_offset(&f), 22);
        assert_eq!(
            l3_offset(&[0x81; 14]),
            14,
            "a tag with no room after it is not one"
        );
    }
}
