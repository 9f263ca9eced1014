//! An in-memory port: frames injected by a test (or replayed by a benchmark) come out of its
//! receive half; frames transmitted to it are kept for inspection, or copied into a fixed
//! ring and forgotten (a sink that still pays for the copy, for benchmarks).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use weft_packet::OffloadInfo;

use crate::port::{FrameHandle, PortCaps, PortRx, PortTx, RxBatch, RxDesc, RxFrame, TxFrame};

/// Creates an in-memory port whose queues hold `queue_len` frames each way.
pub fn memory_port(caps: PortCaps, queue_len: usize) -> (MemoryRx, MemoryTx, MemoryPortHandle) {
    let shared = Arc::new(Shared {
        rx: Mutex::new(VecDeque::with_capacity(queue_len)),
        tx: Mutex::new(TxStore::Keep(VecDeque::with_capacity(queue_len))),
        queue_len,
    });
    let rx = MemoryRx {
        source: RxSource::Queue(Arc::clone(&shared)),
        in_flight: Vec::new(),
    };
    let tx = MemoryTx {
        shared: Arc::clone(&shared),
        caps,
    };
    (rx, tx, MemoryPortHandle { shared })
}

/// A receive half that replays `frames` forever, in order, as fast as it is polled (for
/// benchmarks: no locking, no copying on receive), and a transmit half that copies every
/// frame into a fixed ring of `max_frame`-byte slots and forgets it.
pub fn replay_port(frames: Vec<Vec<u8>>, caps: PortCaps) -> (MemoryRx, MemoryTx) {
    let shared = Arc::new(Shared {
        rx: Mutex::new(VecDeque::new()),
        tx: Mutex::new(TxStore::Sink {
            slots: vec![vec![0u8; caps.max_frame_len.max(caps.max_gso_frame_len)]; 256],
            next: 0,
        }),
        queue_len: 0,
    });
    let rx = MemoryRx {
        source: RxSource::Replay { frames, next: 0 },
        in_flight: Vec::new(),
    };
    (rx, MemoryTx { shared, caps })
}

struct Shared {
    rx: Mutex<VecDeque<(Vec<u8>, OffloadInfo)>>,
    tx: Mutex<TxStore>,
    queue_len: usize,
}

enum TxStore {
    Keep(VecDeque<(Vec<u8>, OffloadInfo)>),
    Sink { slots: Vec<Vec<u8>>, next: usize },
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave these queues inconsistent: keep going.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

enum RxSource {
    Queue(Arc<Shared>),
    Replay { frames: Vec<Vec<u8>>, next: usize },
}

/// The receive half of an in-memory port.
pub struct MemoryRx {
    source: RxSource,
    in_flight: Vec<(Vec<u8>, OffloadInfo)>,
}

impl PortRx for MemoryRx {
    fn receive(&mut self, batch: &mut RxBatch) {
        match &mut self.source {
            RxSource::Queue(shared) => {
                self.in_flight.clear();
                let mut q = lock(&shared.rx);
                while batch.room() > 0 {
                    let Some((frame, offload)) = q.pop_front() else {
                        break;
                    };
                    let Ok(handle) = u32::try_from(self.in_flight.len()) else {
                        break;
                    };
                    if batch
                        .push(RxDesc {
                            handle: FrameHandle(handle),
                            offload,
                        })
                        .is_err()
                    {
                        q.push_front((frame, offload));
                        break;
                    }
                    self.in_flight.push((frame, offload));
                }
            }
            RxSource::Replay { frames, next } => {
                if frames.is_empty() {
                    return;
                }
                while batch.room() > 0 {
                    let Ok(handle) = u32::try_from(*next) else {
                        break;
                    };
                    if batch
                        .push(RxDesc {
                            handle: FrameHandle(handle),
                            offload: OffloadInfo::default(),
                        })
                        .is_err()
                    {
                        break;
                    }
                    *next += 1;
                    if *next == frames.len() {
                        *next = 0;
                    }
                }
            }
        }
    }

    fn frame(&self, handle: FrameHandle) -> RxFrame<'_> {
        let i = handle.0 as usize;
        let bytes = match &self.source {
            RxSource::Queue(_) => self.in_flight.get(i).map_or(&[][..], |(f, _)| f.as_slice()),
            RxSource::Replay { frames, .. } => frames.get(i).map_or(&[][..], Vec::as_slice),
        };
        RxFrame::local(bytes)
    }

    fn finish(&mut self) {
        self.in_flight.clear();
    }
}

/// The transmit half of an in-memory port.
pub struct MemoryTx {
    shared: Arc<Shared>,
    caps: PortCaps,
}

impl PortTx for MemoryTx {
    fn caps(&self) -> PortCaps {
        self.caps
    }

    fn transmit(&mut self, frames: &[TxFrame<'_>]) -> usize {
        let mut store = lock(&self.shared.tx);
        match &mut *store {
            TxStore::Keep(q) => {
                let room = self.shared.queue_len.saturating_sub(q.len());
                let n = frames.len().min(room);
                for f in &frames[..n] {
                    let mut bytes = vec![0u8; f.len()];
                    // The buffer is exactly f.len() long, so the copy cannot fail.
                    let _ = f.copy_to(&mut bytes);
                    q.push_back((bytes, f.offload));
                }
                n
            }
            TxStore::Sink { slots, next } => {
                let mut accepted = 0;
                for f in frames {
                    let Some(slot) = slots.get_mut(*next) else {
                        break;
                    };
                    if f.copy_to(slot).is_none() {
                        break;
                    }
                    *next += 1;
                    if *next == slots.len() {
                        *next = 0;
                    }
                    accepted += 1;
                }
                accepted
            }
        }
    }
}

/// The test's side of an in-memory port.
#[derive(Clone)]
pub struct MemoryPortHandle {
    shared: Arc<Shared>,
}

impl MemoryPortHandle {
    /// Queues a frame for the switch to receive. False when the receive queue is full.
    pub fn inject(&self, frame: &[u8]) -> bool {
        self.inject_with(frame, OffloadInfo::default())
    }

    /// Queues a frame with offload metadata. False when the receive queue is full.
    pub fn inject_with(&self, frame: &[u8], offload: OffloadInfo) -> bool {
        let mut q = lock(&self.shared.rx);
        if q.len() >= self.shared.queue_len {
            return false;
        }
        q.push_back((frame.to_vec(), offload));
        true
    }

    /// Takes every frame transmitted to the port so far.
    pub fn take_sent(&self) -> Vec<(Vec<u8>, OffloadInfo)> {
        match &mut *lock(&self.shared.tx) {
            TxStore::Keep(q) => q.drain(..).collect(),
            TxStore::Sink { .. } => Vec::new(),
        }
    }

    /// Frames waiting to be received.
    pub fn pending_rx(&self) -> usize {
        lock(&self.shared.rx).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn injected_frames_come_out_of_receive_in_order() {
        let (mut rx, _tx, h) = memory_port(PortCaps::plain(1500), 8);
        assert!(h.inject(&[1; 60]));
        assert!(h.inject(&[2; 61]));
        let mut b = RxBatch::new(4);
        rx.receive(&mut b);
        assert_eq!(b.len(), 2);
        assert_eq!(rx.frame(b.descs()[0].handle).head, &[1; 60][..]);
        assert_eq!(rx.frame(b.descs()[1].handle).len(), 61);
        assert!(rx.frame(FrameHandle(99)).is_empty());
        rx.finish();
    }

    #[test]
    fn full_receive_queue_refuses_injection() {
        let (_rx, _tx, h) = memory_port(PortCaps::plain(1500), 1);
        assert!(h.inject(&[0; 60]));
        assert!(!h.inject(&[0; 60]));
    }

    #[test]
    fn transmit_accepts_up_to_queue_room() {
        let (_rx, mut tx, h) = memory_port(PortCaps::plain(1500), 2);
        let data = [7u8; 64];
        let frames = [TxFrame::whole(&data, OffloadInfo::default()); 3];
        assert_eq!(tx.transmit(&frames), 2);
        assert_eq!(h.take_sent().len(), 2);
    }
}
