//! Our receive ring (virtqueue 0): buffers posted once at setup, frames copied out into a
//! [`RecvBatch`], their buffers posted again, the backend kicked at most once per batch.
//!
//! Why copy out instead of lending frames in place: the backend shares the memory and may
//! write a buffer again at any time (a hostile one would), so handing the caller a `&[u8]`
//! into it would be a data race in Rust's terms. One copy out of the ring — in cache, just
//! after the backend wrote it — is the price of a safe API; the batch arena is reused, so
//! nothing is allocated per frame once it has grown.

use std::time::Duration;

use weft_packet::virtio_net::VirtioNetHeader;
use weft_packet::{GsoKind, OffloadInfo};

use crate::config::{Negotiated, HEADER_LEN};
use crate::error::ClientError;
use crate::memory::SharedMemory;
use crate::notify::Notifier;
use crate::ring::{DriverRing, Used, DESC_F_WRITE};
use crate::stats::RingFault;

/// Where one received frame lies in its batch.
#[derive(Debug, Clone, Copy)]
struct FrameSlot {
    offset: usize,
    len: usize,
    offload: OffloadInfo,
}

/// Received frames, copied out of the ring into one reusable arena.
#[derive(Debug, Default)]
pub struct RecvBatch {
    arena: Vec<u8>,
    filled: usize,
    frames: Vec<FrameSlot>,
}

/// One received frame, lent from a [`RecvBatch`].
#[derive(Debug, Clone, Copy)]
pub struct RxFrame<'a> {
    /// The Ethernet frame (no virtio-net header).
    pub bytes: &'a [u8],
    /// Its offload state: a partial checksum still to be completed, a TCP super-frame
    /// (`gso`, `gso_size`, `hdr_len`), or checksums vouched for (`data_valid`).
    pub offload: OffloadInfo,
}

impl RecvBatch {
    /// An empty batch; it grows to the largest batch received, then stays.
    pub fn new() -> RecvBatch {
        RecvBatch::default()
    }

    /// An empty batch with room for `frames` frames of `bytes` bytes in all.
    pub fn with_capacity(frames: usize, bytes: usize) -> RecvBatch {
        RecvBatch {
            arena: vec![0; bytes],
            filled: 0,
            frames: Vec::with_capacity(frames),
        }
    }

    /// Frames in the batch.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// True when the batch holds no frame.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Frame `i`.
    pub fn get(&self, i: usize) -> Option<RxFrame<'_>> {
        let slot = self.frames.get(i)?;
        let bytes = self.arena.get(slot.offset..slot.offset + slot.len)?;
        Some(RxFrame {
            bytes,
            offload: slot.offload,
        })
    }

    /// The frames, in arrival order.
    pub fn iter(&self) -> impl Iterator<Item = RxFrame<'_>> + '_ {
        (0..self.frames.len()).filter_map(|i| self.get(i))
    }

    /// Empties the batch (keeps its memory).
    pub fn clear(&mut self) {
        self.filled = 0;
        self.frames.clear();
    }

    /// Room for `len` more bytes at the end; returns where they go.
    fn reserve(&mut self, len: usize) -> usize {
        let end = self.filled + len;
        if end > self.arena.len() {
            self.arena.resize(end.max(2 * self.arena.len()), 0);
        }
        self.filled
    }
}

/// The receive queue. Descriptor `i` always points at receive buffer `i`.
#[derive(Debug)]
pub(crate) struct RxQueue {
    pub(crate) ring: DriverRing,
    pub(crate) notifier: Notifier,
    buffers: u64,
    buffer_len: u32,
    max_frame: usize,
    negotiated: Negotiated,
}

impl RxQueue {
    /// Writes every descriptor (device-writable, whole buffer) and makes all available.
    pub(crate) fn new(
        mem: &SharedMemory,
        mut ring: DriverRing,
        notifier: Notifier,
        buffers: u64,
        buffer_len: u32,
        negotiated: Negotiated,
        mtu: usize,
    ) -> Result<RxQueue, ClientError> {
        while let Some(id) = ring.take_free() {
            let at = buffers + u64::from(id) * u64::from(buffer_len);
            ring.write_desc(mem, id, at, buffer_len, DESC_F_WRITE)?;
            ring.push_avail(mem, id)?;
        }
        ring.publish(mem)?;
        ring.set_interrupts(mem, false)?;
        Ok(RxQueue {
            ring,
            notifier,
            buffers,
            buffer_len,
            max_frame: negotiated.max_rx_frame(mtu),
            negotiated,
        })
    }

    fn buffer(&self, id: u16) -> u64 {
        self.buffers + u64::from(id) * u64::from(self.buffer_len)
    }

    /// Copies a used buffer's first `len` bytes from `skip` on into `out`, then posts the
    /// buffer again. False when the length is impossible (counted).
    fn take_buffer(
        &mut self,
        mem: &SharedMemory,
        used: Used,
        skip: usize,
        out: &mut RecvBatch,
    ) -> Result<bool, ClientError> {
        let len = usize::try_from(used.len).unwrap_or(usize::MAX);
        let ok = if used.len > self.buffer_len {
            self.ring.stats.fault(RingFault::UsedLenTooLong);
            false
        } else if len < skip {
            self.ring.stats.fault(RingFault::FrameTooShort);
            false
        } else {
            let n = len - skip;
            let at = out.reserve(n);
            mem.read(
                &mut out.arena[at..at + n],
                self.buffer(used.id) + skip as u64,
            )?;
            out.filled += n;
            true
        };
        self.ring.push_avail(mem, used.id)?;
        Ok(ok)
    }

    fn may_receive(&self, info: &OffloadInfo) -> bool {
        (!info.needs_csum || self.negotiated.rx_partial_csum())
            && match info.gso {
                GsoKind::None => true,
                GsoKind::TcpV4 | GsoKind::TcpV6 => self.negotiated.rx_tso(),
                GsoKind::UdpL4 => self.negotiated.rx_uso(),
            }
    }

    /// Receives up to `max` frames into `out` (cleared first). Returns how many.
    pub(crate) fn recv(
        &mut self,
        mem: &SharedMemory,
        out: &mut RecvBatch,
        max: usize,
    ) -> Result<usize, ClientError> {
        out.clear();
        let mut pending = self.ring.used_pending(mem)?;
        while out.frames.len() < max && pending > 0 {
            // How many buffers the next frame spans, from its header, before taking any.
            let peeked = self.ring.peek_used(mem)?;
            // Only from a buffer we hold, with a plausible length; a bad id or length is
            // counted when taken below, as a one-buffer frame.
            let readable = peeked.filter(|first| {
                usize::try_from(first.len).is_ok_and(|l| l >= HEADER_LEN)
                    && first.len <= self.buffer_len
            });
            let mut header = [0u8; HEADER_LEN];
            if let Some(first) = readable {
                mem.read(&mut header, self.buffer(first.id))?;
            }
            let header = VirtioNetHeader::new_unchecked(header);
            let buffers = match (readable, self.negotiated.mergeable_rx()) {
                (Some(_), true) => header.num_buffers().unwrap_or(0),
                _ => 1,
            };
            if buffers == 0 || buffers > self.ring.layout.size {
                self.ring.stats.fault(RingFault::BadNumBuffers);
                pending -= 1;
                if let Some(first) = self.ring.next_used(mem)? {
                    self.ring.push_avail(mem, first.id)?;
                }
                continue;
            }
            if buffers > pending {
                // The backend has not published the frame's last buffers yet (weft's
                // backend publishes the used index per buffer): take it next time. A
                // backend that never publishes them stalls this ring only — its choice.
                break;
            }
            pending -= buffers;
            let start = out.filled;
            let mut whole = true;
            for i in 0..buffers {
                match self.ring.next_used(mem)? {
                    Some(used) => {
                        let skip = if i == 0 { HEADER_LEN } else { 0 };
                        whole &= self.take_buffer(mem, used, skip, out)?;
                    }
                    None => whole = false,
                }
            }
            let len = out.filled - start;
            if !whole {
                out.filled = start;
                continue;
            }
            if len < 14 {
                self.ring.stats.fault(RingFault::FrameTooShort);
                out.filled = start;
                continue;
            }
            if len > self.max_frame {
                self.ring.stats.fault(RingFault::FrameTooLong);
                out.filled = start;
                continue;
            }
            let offload = match header.to_offload_info(len) {
                Ok(info) if self.may_receive(&info) => info,
                Ok(_) => {
                    self.ring.stats.fault(RingFault::OffloadNotNegotiated);
                    out.filled = start;
                    continue;
                }
                Err(_) => {
                    self.ring.stats.fault(RingFault::BadHeader);
                    out.filled = start;
                    continue;
                }
            };
            out.frames.push(FrameSlot {
                offset: start,
                len,
                offload,
            });
            self.ring.stats.frames += 1;
            self.ring.stats.bytes += len as u64;
        }
        if self.ring.publish(mem)? {
            self.notifier.kick()?;
        }
        if out.frames.is_empty() {
            self.ring.stats.empty += 1;
        }
        if self.ring.is_broken() {
            return Err(ClientError::QueueBroken("receive"));
        }
        Ok(out.frames.len())
    }

    /// True when the backend has published frames we have not read.
    pub(crate) fn ready(&mut self, mem: &SharedMemory) -> Result<bool, ClientError> {
        Ok(self.ring.used_pending(mem)? > 0)
    }

    /// Sleeps on the call eventfd until frames are there or `timeout` passes.
    pub(crate) fn wait(
        &mut self,
        mem: &SharedMemory,
        timeout: Duration,
    ) -> Result<bool, ClientError> {
        if self.ready(mem)? {
            return Ok(true);
        }
        self.ring.set_interrupts(mem, true)?;
        if !self.ready(mem)? {
            self.ring.stats.sleeps += 1;
            self.notifier.wait_call(timeout)?;
        }
        self.ring.set_interrupts(mem, false)?;
        self.ready(mem)
    }
}

#[cfg(test)]
mod tests;
