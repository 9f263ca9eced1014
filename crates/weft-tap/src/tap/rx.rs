//! The receive half of a TAP queue: one `read` per frame into preallocated buffers.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use weft_switch::{FrameHandle, PortRx, RxBatch, RxDesc, RxFrame};

use crate::stats::{PortDrop, PortStats};
use crate::vnet::{self, TAP_HDR_LEN};

/// Room for the header and the largest frame a TAP produces (a 64 KiB super-frame), with a
/// spare byte so that a read filling the buffer is known to be cut.
const RX_BUF_LEN: usize = TAP_HDR_LEN + 65_536 + 128;
/// Distance between two buffers in the arena. Not a multiple of the page size: buffers
/// start at different offsets modulo 4 KiB (3 cache lines apart), so the headers of a batch
/// of small frames do not all compete for the same cache sets.
const RX_BUF_STRIDE: usize = 69_824;
const _: () = assert!(RX_BUF_STRIDE >= RX_BUF_LEN && RX_BUF_STRIDE % 4096 == 192);

/// The receive half of a TAP queue.
///
/// Ownership: the worker polling the queue. Frames stay in their buffers from `receive`
/// until `finish`.
pub struct TapRx {
    file: Arc<File>,
    /// One arena holding every buffer, [`RX_BUF_STRIDE`] bytes apart.
    arena: Box<[u8]>,
    /// Bytes read into each buffer of the current batch (header included).
    lens: Vec<usize>,
    mtu: usize,
    stats: Arc<PortStats>,
}

impl TapRx {
    pub(super) fn new(file: Arc<File>, mtu: usize, frames: usize, stats: Arc<PortStats>) -> Self {
        TapRx {
            file,
            arena: vec![0u8; frames * RX_BUF_STRIDE].into_boxed_slice(),
            lens: Vec::with_capacity(frames),
            mtu,
            stats,
        }
    }

    /// The port's counters.
    pub fn stats(&self) -> &Arc<PortStats> {
        &self.stats
    }

    fn buffers(&self) -> usize {
        self.arena.len() / RX_BUF_STRIDE
    }
}

impl PortRx for TapRx {
    fn receive(&mut self, batch: &mut RxBatch) {
        let capacity = self.buffers();
        // Bounded work per call even when every frame is dropped.
        let mut reads_left = 2 * capacity;
        let (mut frames, mut gso, mut partial) = (0u64, 0u64, 0u64);
        while batch.room() > 0 && self.lens.len() < capacity && reads_left > 0 {
            reads_left -= 1;
            let index = self.lens.len();
            let start = index * RX_BUF_STRIDE;
            let Some(buf) = self.arena.get_mut(start..start + RX_BUF_LEN) else {
                break;
            };
            let n = match (&*self.file).read(buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if super::is_would_block(&e) => break,
                Err(_) => {
                    self.stats.drop_one(PortDrop::RxError);
                    break;
                }
            };
            if n == 0 || n >= RX_BUF_LEN {
                self.stats.drop_one(PortDrop::Truncated);
                continue;
            }
            let offload = match vnet::parse_rx(&buf[..n], TAP_HDR_LEN, self.mtu) {
                Ok(o) => o,
                Err(reject) => {
                    self.stats.drop_one(reject.reason());
                    continue;
                }
            };
            let Ok(handle) = u32::try_from(index) else {
                break;
            };
            if batch
                .push(RxDesc {
                    handle: FrameHandle(handle),
                    offload,
                })
                .is_err()
            {
                // Cannot happen (room was checked); the frame is lost, not misattributed.
                break;
            }
            self.lens.push(n);
            frames += 1;
            gso += u64::from(offload.is_gso());
            partial += u64::from(offload.needs_csum);
        }
        self.stats.rx_frames.add(frames);
        self.stats.rx_gso_frames.add(gso);
        self.stats.rx_csum_partial.add(partial);
    }

    fn frame(&self, handle: FrameHandle) -> RxFrame<'_> {
        let index = handle.0 as usize;
        let Some(&len) = self.lens.get(index) else {
            return RxFrame::default();
        };
        let start = index * RX_BUF_STRIDE;
        RxFrame::local(
            self.arena
                .get(start + TAP_HDR_LEN..start + len)
                .unwrap_or(&[]),
        )
    }

    fn finish(&mut self) {
        self.lens.clear();
    }

    fn readiness_fd(&self) -> Option<RawFd> {
        Some(self.file.as_raw_fd())
    }
}
