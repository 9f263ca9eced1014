//! The receive half of one or more TAP queues: one `read` per frame into preallocated
//! buffers.
//!
//! A multi-queue TAP spread over a switch's lanes gives each lane the queues `q` with
//! `q % lanes` its own; one half reads them all, starting each batch at the next queue so
//! that none is left behind, and its readiness descriptor is an epoll set over them.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::Arc;

use weft_switch::{FrameHandle, PortRx, RxBatch, RxDesc, RxFrame};
use weft_sys::event::{epoll_add, Epoll, EventSet};

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

/// One queue a receive half reads, with the counters of that queue.
pub(crate) struct RxQueue {
    pub(crate) file: Arc<File>,
    pub(crate) stats: Arc<PortStats>,
}

/// The receive half of one or more TAP queues.
///
/// Ownership: the worker polling the queues. Frames stay in their buffers from `receive`
/// until `finish`.
pub struct TapRx {
    queues: Vec<RxQueue>,
    /// The queue the next batch starts at.
    next: usize,
    /// With several queues, an epoll set over them (one queue is its own readiness).
    readiness: Option<Epoll>,
    /// One arena holding every buffer, [`RX_BUF_STRIDE`] bytes apart, shared by the queues.
    arena: Box<[u8]>,
    /// Bytes read into each buffer of the current batch (header included).
    lens: Vec<usize>,
    mtu: usize,
}

impl TapRx {
    pub(super) fn new(file: Arc<File>, mtu: usize, frames: usize, stats: Arc<PortStats>) -> Self {
        TapRx {
            queues: vec![RxQueue { file, stats }],
            next: 0,
            readiness: None,
            arena: vec![0u8; frames * RX_BUF_STRIDE].into_boxed_slice(),
            lens: Vec::with_capacity(frames),
            mtu,
        }
    }

    /// A half reading every queue of `queues` (at least one) into one set of `frames`
    /// buffers, each queue counting into its own counters.
    pub(crate) fn over(queues: Vec<RxQueue>, mtu: usize, frames: usize) -> io::Result<Self> {
        let readiness = if queues.len() > 1 {
            let epoll = Epoll::new()?;
            for (index, q) in queues.iter().enumerate() {
                epoll_add(&epoll, q.file.as_fd(), EventSet::IN, index as u64)?;
            }
            Some(epoll)
        } else {
            None
        };
        Ok(TapRx {
            queues,
            next: 0,
            readiness,
            arena: vec![0u8; frames * RX_BUF_STRIDE].into_boxed_slice(),
            lens: Vec::with_capacity(frames),
            mtu,
        })
    }

    /// The counters of the first queue it reads (the only one of a one-queue TAP).
    pub fn stats(&self) -> Option<&Arc<PortStats>> {
        self.queues.first().map(|q| &q.stats)
    }

    fn buffers(&self) -> usize {
        self.arena.len() / RX_BUF_STRIDE
    }
}

impl PortRx for TapRx {
    fn receive(&mut self, batch: &mut RxBatch) {
        let count = self.queues.len();
        let start = self.next;
        self.next = if count == 0 { 0 } else { (start + 1) % count };
        for offset in 0..count {
            if batch.room() == 0 || self.lens.len() >= self.buffers() {
                break;
            }
            self.receive_from((start + offset) % count, batch);
        }
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
        match &self.readiness {
            Some(epoll) => Some(epoll.as_raw_fd()),
            None => self.queues.first().map(|q| q.file.as_raw_fd()),
        }
    }
}

impl TapRx {
    /// Reads queue `queue` until it is empty, the batch is full or the buffers are used.
    fn receive_from(&mut self, queue: usize, batch: &mut RxBatch) {
        let Some(RxQueue { file, stats }) = self.queues.get(queue) else {
            return;
        };
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
            let n = match (&**file).read(buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if super::is_would_block(&e) => break,
                Err(_) => {
                    stats.drop_one(PortDrop::RxError);
                    break;
                }
            };
            if n == 0 || n >= RX_BUF_LEN {
                stats.drop_one(PortDrop::Truncated);
                continue;
            }
            let offload = match vnet::parse_rx(&buf[..n], TAP_HDR_LEN, self.mtu) {
                Ok(o) => o,
                Err(reject) => {
                    stats.drop_one(reject.reason());
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
        stats.rx_frames.add(frames);
        stats.rx_gso_frames.add(gso);
        stats.rx_csum_partial.add(partial);
    }
}
