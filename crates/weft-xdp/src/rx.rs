//! The receive half: frames lent to the switch from where the kernel wrote them in the UMEM.

use std::os::fd::RawFd;
use std::sync::Arc;

use weft_switch::{FrameHandle, PortRx, RxBatch, RxDesc, RxFrame};
use xdpilone::{FillQueue, RingRx};

use crate::chunks::{Layout, RxChunks};
use crate::device::Keep;
use crate::stats::{XdpDrop, XdpStats};
use crate::tx::TxRing;
use crate::umem::UmemArea;

/// The receive half of an AF_XDP port.
///
/// Ownership: the worker polling the port. A frame's chunk is held from the rx ring until
/// `finish`, which alone puts chunks back in the fill ring.
pub struct XdpRx {
    rx: RingRx,
    fill: FillQueue,
    chunks: RxChunks,
    layout: Layout,
    /// The current batch's frames: offset in the UMEM and length, by handle.
    frames: Vec<(usize, usize)>,
    stats: Arc<XdpStats>,
    area: Arc<UmemArea>,
    /// The transmit half's ring, woken from here while the kernel left descriptors in it.
    tx: Arc<TxRing>,
    _keep: Arc<Keep>,
}

impl XdpRx {
    /// The receive half over a freshly bound socket: every receive chunk goes into the fill
    /// ring now.
    pub(crate) fn new(
        rx: RingRx,
        fill: FillQueue,
        layout: Layout,
        stats: Arc<XdpStats>,
        area: Arc<UmemArea>,
        tx: Arc<TxRing>,
        keep: Arc<Keep>,
    ) -> XdpRx {
        let mut port = XdpRx {
            rx,
            fill,
            chunks: RxChunks::new(layout),
            layout,
            frames: Vec::with_capacity(weft_switch::port::MAX_BATCH),
            stats,
            area,
            tx,
            _keep: keep,
        };
        let mut w = port.fill.fill(layout.rx_chunks());
        w.insert((0..layout.rx_chunks()).map(Layout::chunk_addr));
        w.commit();
        drop(w);
        port.wake_fill_if_asked();
        port
    }

    /// The port's counters.
    pub fn stats(&self) -> &Arc<XdpStats> {
        &self.stats
    }

    /// Receive chunks held now (lent, or refused and not yet given back).
    pub fn held_chunks(&self) -> usize {
        self.chunks.held()
    }

    /// A `poll` when the kernel says the fill ring needs one to go on (zero-copy drivers
    /// that ran out of chunks); copy mode never asks.
    fn wake_fill_if_asked(&mut self) {
        if self.fill.needs_wakeup() {
            self.fill.wake();
            self.stats.rx_kicks.add(1);
        }
    }
}

impl PortRx for XdpRx {
    fn receive(&mut self, batch: &mut RxBatch) {
        if self.tx.waiting() {
            self.tx.nudge(&self.stats);
        }
        let room = batch.room().min(self.frames.capacity() - self.frames.len());
        let Ok(room) = u32::try_from(room) else {
            return;
        };
        if room == 0 {
            return;
        }
        let mut received = 0u64;
        let mut read = self.rx.receive(room);
        while let Some(desc) = read.read() {
            // The descriptor is a copy: the rx ring slot can be reused by the kernel once
            // released; the chunk it names stays ours until `finish` fills it back.
            match self.layout.check_rx(desc.addr, desc.len) {
                Ok(slot) => {
                    if !self.chunks.take(slot.chunk) {
                        self.stats.drop_one(XdpDrop::DuplicateChunk);
                        continue;
                    }
                    let Ok(handle) = u32::try_from(self.frames.len()) else {
                        continue;
                    };
                    let desc = RxDesc {
                        handle: FrameHandle(handle),
                        offload: Default::default(),
                    };
                    if batch.push(desc).is_ok() {
                        self.frames.push((slot.start, slot.len));
                        received += 1;
                    }
                }
                Err((reason, chunk)) => {
                    self.stats.drop_one(reason);
                    if let Some(chunk) = chunk {
                        // Back to the fill ring at `finish` (once, even if named twice).
                        self.chunks.take(chunk);
                    }
                }
            }
        }
        read.release();
        drop(read);
        self.stats.rx_frames.add(received);
    }

    fn frame(&self, handle: FrameHandle) -> RxFrame<'_> {
        let Some(&(start, len)) = self.frames.get(handle.0 as usize) else {
            return RxFrame::default();
        };
        // SAFETY: the frame's chunk was taken from the rx ring by `receive` and is held in
        // `self.chunks`; it goes back to the fill ring only in `finish`, which takes
        // `&mut self` and so cannot run while this slice (borrowing `self`) lives. The kernel
        // writes a receive chunk only while it sits in the fill ring (in copy mode it copies
        // into a chunk it takes from there; in zero-copy mode the driver receives into such
        // chunks), and the transmit half never touches receive chunks, so nobody writes
        // these bytes while they are lent.
        let bytes = unsafe { self.area.bytes(start, len) };
        RxFrame::local(bytes.unwrap_or(&[]))
    }

    fn finish(&mut self) {
        self.frames.clear();
        let pending = self.chunks.pending();
        if pending.is_empty() {
            return;
        }
        let want = u32::try_from(pending.len()).unwrap_or(u32::MAX);
        let mut w = self.fill.fill(want);
        let filled = w.insert(pending.iter().map(|&c| Layout::chunk_addr(c)));
        w.commit();
        drop(w);
        // The fill ring holds every receive chunk, so it takes them all; any it did not take
        // stay held and go back at the next `finish`.
        self.chunks.filled(filled as usize);
        self.wake_fill_if_asked();
    }

    fn readiness_fd(&self) -> Option<RawFd> {
        Some(self.rx.as_raw_fd())
    }

    /// While the kernel left transmit descriptors in the ring: nothing else would wake it.
    fn needs_polling(&self) -> bool {
        self.tx.waiting()
    }
}
