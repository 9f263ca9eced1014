//! The receive half of an AF_PACKET port: frames read in place from the `TPACKET_V3` ring.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use weft_packet::OffloadInfo;
use weft_switch::{FrameHandle, PortRx, RxBatch, RxDesc, RxFrame};

use crate::ring::{
    BlockHeader, PacketHeader, RxRing, TP_STATUS_VLAN_TPID_VALID, TP_STATUS_VLAN_VALID,
};
use crate::stats::{PortDrop, PortStats};
use crate::sys;
use crate::vnet::{self, PACKET_HDR_LEN};

/// Where reading stands in the ring.
#[derive(Debug, Clone, Copy, Default)]
struct Cursor {
    block: usize,
    /// Packets of `block` already read; `None` before its header was read.
    next_pkt: Option<u32>,
    next_offset: usize,
}

/// When to read the kernel's ring drops (`PACKET_STATISTICS`, a system call: never per
/// frame, nor per poll of an idle port). The kernel drops only while every block is ours,
/// and those blocks come back through `finish`; so a read is due once blocks came back and
/// the ring ran dry, or after a whole turn of the ring under sustained load.
#[derive(Debug, Default)]
struct RingDropsCadence {
    released_since_read: usize,
}

impl RingDropsCadence {
    fn released(&mut self, blocks: usize) {
        self.released_since_read = self.released_since_read.saturating_add(blocks);
    }

    /// True when the statistics should be read now (and counts the read as done).
    fn due(&mut self, ring_dry: bool, block_count: usize) -> bool {
        let due =
            self.released_since_read > 0 && (ring_dry || self.released_since_read >= block_count);
        if due {
            self.released_since_read = 0;
        }
        due
    }
}

/// The receive half of an AF_PACKET port.
///
/// Ownership: the worker polling the port. Frames stay in their ring blocks from `receive`
/// until `finish`, which gives fully read blocks back to the kernel.
pub struct AfPacketRx {
    fd: Arc<OwnedFd>,
    ring: RxRing,
    cursor: Cursor,
    /// Blocks read to the end and not yet given back, in ring order.
    consumed: Vec<usize>,
    /// Per block: read to the end, not yet given back.
    held: Vec<bool>,
    /// The current batch's frames: offset in the ring and length.
    frames: Vec<(usize, usize)>,
    mtu: usize,
    /// Skip frames marked `PACKET_OUTGOING` (the kernel cannot filter them).
    skip_outgoing: bool,
    ring_drops: RingDropsCadence,
    stats: Arc<PortStats>,
}

impl AfPacketRx {
    pub(super) fn new(
        fd: Arc<OwnedFd>,
        ring: RxRing,
        mtu: usize,
        skip_outgoing: bool,
        stats: Arc<PortStats>,
    ) -> Self {
        let blocks = ring.block_count();
        AfPacketRx {
            fd,
            ring,
            cursor: Cursor::default(),
            consumed: Vec::with_capacity(blocks),
            held: vec![false; blocks],
            frames: Vec::with_capacity(weft_switch::port::MAX_BATCH),
            mtu,
            skip_outgoing,
            ring_drops: RingDropsCadence::default(),
            stats,
        }
    }

    /// The port's counters.
    pub fn stats(&self) -> &Arc<PortStats> {
        &self.stats
    }

    /// Adds the frames the kernel dropped for want of a free block since the last read (it
    /// resets its counter on every read, so each read is a delta).
    fn count_ring_drops(&self) {
        // A failed read loses nothing: the kernel keeps counting until the next one.
        if let Ok(drops) = sys::packet_ring_drops(&*self.fd) {
            self.stats.drop_many(PortDrop::RingFull, u64::from(drops));
        }
    }

    fn next_block(&mut self) {
        let b = self.cursor.block;
        if let Some(h) = self.held.get_mut(b) {
            *h = true;
        }
        self.consumed.push(b);
        self.cursor = Cursor {
            block: (b + 1) % self.ring.block_count(),
            ..Cursor::default()
        };
    }
}

impl PortRx for AfPacketRx {
    fn receive(&mut self, batch: &mut RxBatch) {
        let block_size = self.ring.block_size();
        let (mut frames, mut gso, mut partial, mut own) = (0u64, 0u64, 0u64, 0u64);
        let mut ring_dry = false;
        while batch.room() > 0 && self.frames.len() < self.frames.capacity() {
            let b = self.cursor.block;
            if self.held.get(b).copied().unwrap_or(true) {
                break;
            }
            let Some(block) = self.ring.block_mut(b) else {
                // The kernel fills blocks in order: if this one is still its, none is ready.
                ring_dry = true;
                break;
            };
            let Some(header) = BlockHeader::read(block) else {
                // The kernel never writes such a block; give it back rather than stall.
                self.stats.drop_one(PortDrop::RxError);
                self.next_block();
                continue;
            };
            let mut done = self.cursor.next_pkt.unwrap_or(0);
            let mut offset = match self.cursor.next_pkt {
                Some(_) => self.cursor.next_offset,
                None => header.first_offset,
            };
            while done < header.num_pkts && batch.room() > 0 {
                let Some(pkt) = PacketHeader::read(block, offset) else {
                    self.stats.drop_one(PortDrop::RxError);
                    done = header.num_pkts;
                    break;
                };
                done += 1;
                offset = offset.saturating_add(pkt.next_offset);
                match accept(block, &pkt, self.mtu, self.skip_outgoing) {
                    Ok((start, len, offload)) => {
                        let Ok(handle) = u32::try_from(self.frames.len()) else {
                            break;
                        };
                        if batch
                            .push(RxDesc {
                                handle: FrameHandle(handle),
                                offload,
                            })
                            .is_err()
                        {
                            break;
                        }
                        self.frames.push((b * block_size + start, len));
                        frames += 1;
                        gso += u64::from(offload.is_gso());
                        partial += u64::from(offload.needs_csum);
                    }
                    Err(Some(reason)) => self.stats.drop_one(reason),
                    Err(None) => own += 1,
                }
            }
            if done >= header.num_pkts {
                self.next_block();
            } else {
                self.cursor.next_pkt = Some(done);
                self.cursor.next_offset = offset;
            }
        }
        self.stats.rx_frames.add(frames);
        self.stats.rx_gso_frames.add(gso);
        self.stats.rx_csum_partial.add(partial);
        self.stats.rx_own_skipped.add(own);
        if self.ring_drops.due(ring_dry, self.ring.block_count()) {
            self.count_ring_drops();
        }
    }

    fn frame(&self, handle: FrameHandle) -> RxFrame<'_> {
        RxFrame::local(
            self.frames
                .get(handle.0 as usize)
                .and_then(|&(offset, len)| self.ring.bytes(offset, len))
                .unwrap_or(&[]),
        )
    }

    fn finish(&mut self) {
        self.frames.clear();
        self.ring_drops.released(self.consumed.len());
        for b in self.consumed.drain(..) {
            self.ring.release(b);
            if let Some(h) = self.held.get_mut(b) {
                *h = false;
            }
        }
    }

    fn readiness_fd(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }
}

/// Checks one packet of a user-owned block and puts its VLAN tag back in front of the
/// payload when the kernel took it out (the header area before the frame has room).
/// Returns the frame's start and length in the block and its offload state; `Err(None)`
/// for the port's own outgoing frames, `Err(Some(reason))` for a drop.
pub(crate) fn accept(
    block: &mut [u8],
    pkt: &PacketHeader,
    mtu: usize,
    skip_outgoing: bool,
) -> Result<(usize, usize, OffloadInfo), Option<PortDrop>> {
    if skip_outgoing && pkt.pkttype == libc::PACKET_OUTGOING {
        return Err(None);
    }
    if pkt.snaplen < pkt.len {
        return Err(Some(PortDrop::Truncated));
    }
    let header_start = pkt
        .mac
        .checked_sub(PACKET_HDR_LEN)
        .filter(|&s| s >= pkt.data_floor())
        .ok_or(Some(PortDrop::RxError))?;
    let end = pkt.mac + pkt.snaplen;
    let raw = block
        .get(header_start..end)
        .ok_or(Some(PortDrop::RxError))?;
    let offload =
        vnet::parse_rx(raw, PACKET_HDR_LEN, mtu).map_err(|reject| Some(reject.reason()))?;
    if pkt.status & TP_STATUS_VLAN_VALID == 0 {
        return Ok((pkt.mac, pkt.snaplen, offload));
    }
    // The tag goes between the MAC addresses and the EtherType: move the addresses 4 bytes
    // down (into the virtio-net header, already read) and write the tag behind them.
    let start = pkt
        .mac
        .checked_sub(4)
        .filter(|&s| s >= pkt.data_floor())
        .ok_or(Some(PortDrop::RxError))?;
    let tpid = if pkt.status & TP_STATUS_VLAN_TPID_VALID != 0 && pkt.vlan_tpid != 0 {
        pkt.vlan_tpid
    } else {
        0x8100
    };
    block.copy_within(pkt.mac..pkt.mac + 12, start);
    block[start + 12..start + 14].copy_from_slice(&tpid.to_be_bytes());
    block[start + 14..start + 16].copy_from_slice(&pkt.vlan_tci.to_be_bytes());
    let offload = shift_offload(offload, 4).ok_or(Some(PortDrop::BadVnetHeader))?;
    Ok((start, pkt.snaplen + 4, offload))
}

/// The offload offsets of a frame that grew by `by` bytes in front of its L3 header.
fn shift_offload(mut o: OffloadInfo, by: u16) -> Option<OffloadInfo> {
    if o.needs_csum {
        o.csum_start = o.csum_start.checked_add(by)?;
    }
    if o.is_gso() {
        o.hdr_len = o.hdr_len.checked_add(by)?;
    }
    Some(o)
}

#[cfg(test)]
mod tests;
