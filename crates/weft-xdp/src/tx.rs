//! The transmit half: frames copied into free transmit chunks and handed over through the
//! tx ring, chunks reclaimed from the completion ring.

use std::sync::Arc;

use weft_switch::{PortCaps, PortTx, TxFrame};
use xdpilone::xdp::XdpDesc;
use xdpilone::{CompletionQueue, RingTx};

use crate::chunks::{Layout, TxChunks};
use crate::device::Keep;
use crate::options::CHUNK_SIZE;
use crate::stats::{XdpDrop, XdpStats};
use crate::umem::UmemArea;

/// Descriptors the kernel sends per wake-up in copy mode (`TX_BATCH_SIZE`, net/xdp/xsk.c):
/// a burst of `n` needs `n / 32` more wake-ups than one.
const COPY_MODE_KICK_BUDGET: u32 = 32;

/// The transmit half of an AF_XDP port.
///
/// Ownership: whoever delivers to the port (the daemon puts it behind one lock per port).
pub struct XdpTx {
    tx: RingTx,
    completion: CompletionQueue,
    chunks: TxChunks,
    layout: Layout,
    caps: PortCaps,
    stats: Arc<XdpStats>,
    area: Arc<UmemArea>,
    _keep: Arc<Keep>,
}

impl XdpTx {
    pub(crate) fn new(
        tx: RingTx,
        completion: CompletionQueue,
        layout: Layout,
        caps: PortCaps,
        stats: Arc<XdpStats>,
        area: Arc<UmemArea>,
        keep: Arc<Keep>,
    ) -> XdpTx {
        XdpTx {
            tx,
            completion,
            chunks: TxChunks::new(layout),
            layout,
            caps,
            stats,
            area,
            _keep: keep,
        }
    }

    /// The port's counters.
    pub fn stats(&self) -> &Arc<XdpStats> {
        &self.stats
    }

    /// Transmit chunks free now.
    pub fn free_chunks(&self) -> usize {
        self.chunks.free()
    }

    /// Takes back every chunk the kernel finished sending.
    pub fn reclaim(&mut self) {
        let available = self.completion.available();
        if available == 0 {
            return;
        }
        let mut read = self.completion.complete(available);
        let mut bad = 0u64;
        while let Some(addr) = read.read() {
            if !self.chunks.completed(&self.layout, addr) {
                bad += 1;
            }
        }
        read.release();
        drop(read);
        self.stats.tx_bad_completions.add(bad);
    }

    /// Wakes the kernel when it asks (always in copy mode, where the `sendto` sends): once,
    /// and again while each wake-up moved the ring on and descriptors remain (copy mode
    /// sends at most [`COPY_MODE_KICK_BUDGET`] per call). Descriptors a busy device left in
    /// the ring go with the next burst's wake-up.
    fn kick(&mut self, queued: u32) {
        if !self.tx.needs_wakeup() {
            return;
        }
        let budget = queued / COPY_MODE_KICK_BUDGET + 1;
        let mut kicks = 0u64;
        let mut pending = self.tx.pending();
        while pending > 0 && kicks < u64::from(budget) {
            self.tx.wake();
            kicks += 1;
            let now = self.tx.pending();
            if now >= pending {
                break;
            }
            pending = now;
        }
        self.stats.tx_kicks.add(kicks);
    }
}

impl PortTx for XdpTx {
    fn caps(&self) -> PortCaps {
        self.caps
    }

    fn transmit(&mut self, frames: &[TxFrame<'_>]) -> usize {
        self.reclaim();
        let want = frames.len().min(self.chunks.free());
        let mut taken = 0;
        let mut queued = 0u32;
        if want > 0 {
            let want = u32::try_from(want).unwrap_or(u32::MAX);
            let mut w = self.tx.transmit(want);
            let slots = w.capacity();
            for frame in frames {
                if frame.len() > CHUNK_SIZE as usize {
                    // The core sends nothing longer than the MTU allows, which fits a chunk;
                    // anything else is counted and not sent, never split.
                    self.stats.drop_one(XdpDrop::TxTooBig);
                    taken += 1;
                    continue;
                }
                if queued == slots {
                    break;
                }
                let Some(chunk) = self.chunks.alloc() else {
                    break;
                };
                let addr = Layout::chunk_addr(chunk);
                let start = usize::try_from(addr).unwrap_or(usize::MAX);
                // SAFETY: `chunk` came from the free list: it is in neither the tx ring nor
                // awaiting completion, so the kernel does not read it, the receive half never
                // touches transmit chunks, and no other slice over it exists.
                let copied = unsafe { self.area.bytes_mut(start, CHUNK_SIZE as usize) }
                    .and_then(|buf| frame.copy_to(buf));
                let Some(len) = copied.and_then(|n| u32::try_from(n).ok()) else {
                    self.chunks.unalloc(chunk);
                    self.stats.drop_one(XdpDrop::TxTooBig);
                    taken += 1;
                    continue;
                };
                if !w.insert_once(XdpDesc {
                    addr,
                    len,
                    options: 0,
                }) {
                    self.chunks.unalloc(chunk);
                    break;
                }
                self.chunks.sent(chunk);
                queued += 1;
                taken += 1;
            }
            w.commit();
        } else {
            // No chunk free: only frames too big to ever send are taken (and counted).
            for frame in frames {
                if frame.len() <= CHUNK_SIZE as usize {
                    break;
                }
                self.stats.drop_one(XdpDrop::TxTooBig);
                taken += 1;
            }
        }
        self.stats.tx_frames.add(u64::from(queued));
        if queued > 0 {
            self.kick(queued);
        }
        taken
    }
}
