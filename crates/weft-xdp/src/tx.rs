//! The transmit half: frames copied into free transmit chunks and handed over through the
//! tx ring, chunks reclaimed from the completion ring.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

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

/// The tx ring, shared by the two halves: the transmit half fills it; when the kernel left
/// descriptors in it (a busy device), the receive half, polled by the worker whether or not
/// frames come, wakes the kernel again, so that the last frames of a burst do not wait for
/// the next one.
pub(crate) struct TxRing {
    /// Locked by the transmit half once per burst, and by the receive half only while
    /// `waiting`.
    ring: Mutex<RingTx>,
    /// Descriptors were left in the ring after the last wake-up.
    waiting: AtomicBool,
}

impl TxRing {
    pub(crate) fn new(ring: RingTx) -> TxRing {
        TxRing {
            ring: Mutex::new(ring),
            waiting: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> MutexGuard<'_, RingTx> {
        match self.ring.lock() {
            Ok(ring) => ring,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// True while descriptors wait in the ring for a wake-up.
    pub(crate) fn waiting(&self) -> bool {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Wakes the kernel for what waits in the ring (the receive half's look), unless the
    /// transmit half holds the ring now (it wakes the kernel itself).
    pub(crate) fn nudge(&self, stats: &XdpStats) {
        let Ok(mut ring) = self.ring.try_lock() else {
            return;
        };
        let kicks = wake(&mut ring, 0, &self.waiting);
        stats.tx_kicks.add(kicks);
    }
}

/// Wakes the kernel when it asks (always in copy mode, where the `sendto` sends): once, and
/// again while each wake-up moved the ring on and descriptors remain (copy mode sends at
/// most [`COPY_MODE_KICK_BUDGET`] per call), up to what `queued` more descriptors need.
/// Notes in `waiting` whether some were left (a busy device). Returns the wake-ups.
fn wake(ring: &mut RingTx, queued: u32, waiting: &AtomicBool) -> u64 {
    if !ring.needs_wakeup() {
        waiting.store(false, Ordering::Relaxed);
        return 0;
    }
    let mut pending = ring.pending();
    let budget = u64::from(pending.max(queued) / COPY_MODE_KICK_BUDGET + 1);
    let mut kicks = 0u64;
    while pending > 0 && kicks < budget {
        ring.wake();
        kicks += 1;
        let now = ring.pending();
        if now >= pending {
            break;
        }
        pending = now;
    }
    waiting.store(pending > 0, Ordering::Relaxed);
    kicks
}

/// The transmit half of an AF_XDP port.
///
/// Ownership: whoever delivers to the port (the daemon puts it behind one lock per port).
pub struct XdpTx {
    tx: Arc<TxRing>,
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
        tx: Arc<TxRing>,
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
}

impl PortTx for XdpTx {
    fn caps(&self) -> PortCaps {
        self.caps
    }

    fn transmit(&mut self, frames: &[TxFrame<'_>]) -> usize {
        self.reclaim();
        let shared = Arc::clone(&self.tx);
        let mut ring = shared.lock();
        let want = frames.len().min(self.chunks.free());
        let mut taken = 0;
        let mut queued = 0u32;
        if want > 0 {
            let want = u32::try_from(want).unwrap_or(u32::MAX);
            let mut w = ring.transmit(want);
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
        // Also with nothing queued: descriptors a busy device left must go, or a ring full of
        // them would never drain.
        if queued > 0 || shared.waiting() {
            let kicks = wake(&mut ring, queued, &shared.waiting);
            self.stats.tx_kicks.add(kicks);
        }
        taken
    }
}
