//! Our transmit ring (virtqueue 1): fill slots, publish once, kick once if the backend wants.

use weft_packet::virtio_net::VirtioNetHeader;
use weft_packet::OffloadInfo;

use crate::config::{Negotiated, HEADER_LEN};
use crate::error::{ClientError, FrameError};
use crate::memory::SharedMemory;
use crate::notify::Notifier;
use crate::ring::DriverRing;

/// A frame to send: the Ethernet frame (no virtio-net header) and its offload state.
#[derive(Debug, Clone, Copy)]
pub struct TxFrame<'a> {
    /// The Ethernet frame.
    pub bytes: &'a [u8],
    /// Checksum / segmentation the backend should do (or pass on); default: nothing.
    pub offload: OffloadInfo,
}

impl<'a> TxFrame<'a> {
    /// A complete frame, at most MTU-sized.
    pub fn plain(bytes: &'a [u8]) -> Self {
        TxFrame {
            bytes,
            offload: OffloadInfo::default(),
        }
    }

    /// A frame with offload state, e.g. a TCP super-frame (`gso`, `gso_size`, `hdr_len`,
    /// `needs_csum` with `csum_start`/`csum_offset` and the pseudo-header sum in place).
    pub fn with_offload(bytes: &'a [u8], offload: OffloadInfo) -> Self {
        TxFrame { bytes, offload }
    }
}

/// The transmit queue. Descriptor `i` always points at transmit buffer `i`.
#[derive(Debug)]
pub(crate) struct TxQueue {
    pub(crate) ring: DriverRing,
    pub(crate) notifier: Notifier,
    buffers: u64,
    buffer_len: u64,
    max_frame: usize,
    mtu_frame: usize,
    negotiated: Negotiated,
}

impl TxQueue {
    pub(crate) fn new(
        ring: DriverRing,
        notifier: Notifier,
        buffers: u64,
        buffer_len: u64,
        negotiated: Negotiated,
        mtu: usize,
    ) -> TxQueue {
        TxQueue {
            ring,
            notifier,
            buffers,
            buffer_len,
            max_frame: negotiated.max_tx_frame(mtu),
            mtu_frame: mtu + 22,
            negotiated,
        }
    }

    fn check(&self, frame: &TxFrame<'_>) -> Result<(), FrameError> {
        let len = frame.bytes.len();
        if len < 14 {
            return Err(FrameError::TooShort(len));
        }
        if len > self.max_frame {
            return Err(FrameError::TooLong {
                len,
                max: self.max_frame,
            });
        }
        if !self.negotiated.may_send(&frame.offload) {
            return Err(FrameError::OffloadNotNegotiated);
        }
        if len > self.mtu_frame && !frame.offload.is_gso() {
            return Err(FrameError::AboveMtu {
                len,
                max: self.mtu_frame,
            });
        }
        Ok(())
    }

    /// Takes back the buffers the backend is done with. Returns how many.
    pub(crate) fn reclaim(&mut self, mem: &SharedMemory) -> Result<usize, ClientError> {
        let pending = self.ring.used_pending(mem)?;
        for _ in 0..pending {
            if let Some(used) = self.ring.next_used(mem)? {
                self.ring.release(used.id);
            }
        }
        if pending > 0 {
            self.ring.set_interrupts(mem, false)?;
        }
        if self.ring.is_broken() {
            return Err(ClientError::QueueBroken("transmit"));
        }
        Ok(usize::from(pending))
    }

    /// Free transmit slots (after reclaiming).
    pub(crate) fn space(&mut self, mem: &SharedMemory) -> Result<usize, ClientError> {
        self.reclaim(mem)?;
        Ok(self.ring.free_count())
    }

    /// Queues as many of `frames` as there are free slots, publishes them with one index
    /// store and kicks at most once. Returns how many were queued (a prefix of `frames`).
    pub(crate) fn send(
        &mut self,
        mem: &SharedMemory,
        frames: &[TxFrame<'_>],
    ) -> Result<usize, ClientError> {
        for (index, frame) in frames.iter().enumerate() {
            self.check(frame)
                .map_err(|reason| ClientError::BadFrame { index, reason })?;
        }
        self.reclaim(mem)?;
        let mut sent = 0;
        for frame in frames {
            let Some(id) = self.ring.take_free() else {
                self.ring.stats.empty += 1;
                break;
            };
            let at = self.buffers + u64::from(id) * self.buffer_len;
            let header = VirtioNetHeader::from_offload_info(&frame.offload).into_inner();
            mem.write(&header, at)?;
            mem.write(frame.bytes, at + HEADER_LEN as u64)?;
            // Checked above: header + frame fits the buffer, far below 4 GB.
            let len = u32::try_from(HEADER_LEN + frame.bytes.len()).unwrap_or(u32::MAX);
            self.ring.write_desc(mem, id, at, len, 0)?;
            self.ring.push_avail(mem, id)?;
            self.ring.stats.frames += 1;
            self.ring.stats.bytes += frame.bytes.len() as u64;
            sent += 1;
        }
        if self.ring.publish(mem)? {
            self.notifier.kick()?;
        }
        Ok(sent)
    }

    /// Sleeps until a slot is free or `timeout` passes. True when one is.
    pub(crate) fn wait_space(
        &mut self,
        mem: &SharedMemory,
        timeout: std::time::Duration,
    ) -> Result<bool, ClientError> {
        if self.space(mem)? > 0 {
            return Ok(true);
        }
        // Wake when three quarters of what is in flight is done, not at the first: one
        // wake-up per large burst instead of one per backend batch.
        let in_flight = usize::from(self.ring.layout.size) - self.ring.free_count();
        let after = u16::try_from(in_flight * 3 / 4).unwrap_or(1).max(1);
        self.ring.arm(mem, Some(after))?;
        if self.space(mem)? == 0 {
            self.ring.stats.sleeps += 1;
            self.notifier.wait_call(timeout)?;
        }
        self.ring.set_interrupts(mem, false)?;
        Ok(self.space(mem)? > 0)
    }
}
