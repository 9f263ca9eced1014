//! The switch's two halves of a TCP link: [`TcpLinkRx`] reads the stream into its
//! reassembly buffer and lends complete frames in place; [`TcpLinkTx`] encodes bursts into
//! the bounded output buffer and writes them.

use std::io::Read;
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use weft_switch::{FrameHandle, PortCaps, PortRx, PortTx, RxBatch, RxDesc, RxFrame, TxFrame};

use super::conn::{lock, ParkedRx, Shared};
use super::framing::{DecodeRules, Decoded, Reassembler};
use super::stats::TcpLinkDrop;
use super::LinkGuard;

/// Reads per `receive` at most (each fills what the buffer's tail has room for).
const READS_PER_BATCH: usize = 4;

/// The receive half.
pub struct TcpLinkRx {
    pub(crate) guard: Arc<LinkGuard>,
    pub(crate) rules: DecodeRules,
    pub(crate) stream: Option<Arc<TcpStream>>,
    pub(crate) generation: u64,
    pub(crate) reasm: Reassembler,
    /// Frames lent since the last `finish`, as ranges of the reassembly buffer.
    pub(crate) lent: Vec<std::ops::Range<usize>>,
    /// A whole frame is buffered (at the last `finish`).
    pub(crate) frame_buffered: bool,
}

impl TcpLinkRx {
    fn shared(&self) -> &Shared {
        &self.guard.shared
    }

    /// Picks up a new connection (or its loss) published by the link thread.
    fn follow_connection(&mut self) {
        let now = self.shared().generation.load(Ordering::Acquire);
        if now != self.generation {
            self.generation = now;
            let stream = lock(&self.guard.shared.current).clone();
            self.stream = stream;
            self.reasm.reset();
        }
    }

    /// Reads what the socket has into the buffer's tail; false when nothing came.
    fn read_more(&mut self) -> bool {
        let Some(stream) = &self.stream else {
            return false;
        };
        let spare = self.reasm.spare();
        if spare.is_empty() {
            return false;
        }
        match (&**stream).read(spare) {
            Ok(0) => {
                // The peer closed: the link thread sees the hang-up and replaces the stream.
                self.stream = None;
                false
            }
            Ok(n) => {
                self.reasm.filled(n);
                true
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => true,
            Err(_) => {
                self.guard.shared.stats.io_error();
                self.cut();
                false
            }
        }
    }

    /// Cuts a connection whose stream cannot be trusted any more.
    fn cut(&mut self) {
        if let Some(s) = self.stream.take() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        self.reasm.reset();
    }
}

impl PortRx for TcpLinkRx {
    fn receive(&mut self, batch: &mut RxBatch) {
        if let Some(parked) = self.guard.shared.rx_parking.unpark() {
            self.reasm = parked.reasm;
        }
        self.follow_connection();
        let mut reads = 0;
        let mut accepted = 0;
        // Frames already buffered are delivered even after the peer closed its side.
        while batch.room() > 0 {
            match self.reasm.next_frame(&self.rules) {
                Ok(Decoded::Frame(range, offload)) => {
                    let handle = FrameHandle(u32::try_from(self.lent.len()).unwrap_or(u32::MAX));
                    if batch.push(RxDesc { handle, offload }).is_err() {
                        break; // Cannot happen: the loop checks for room.
                    }
                    self.lent.push(range);
                    accepted += 1;
                }
                Ok(Decoded::Dropped(reason)) => self.shared().stats.count_drop(reason, 1),
                Ok(Decoded::NeedMore) => {
                    if self.lent.is_empty() {
                        self.reasm.compact();
                    }
                    if reads == READS_PER_BATCH || !self.read_more() {
                        break;
                    }
                    reads += 1;
                }
                Err(reason) => {
                    self.shared().stats.count_drop(reason, 1);
                    self.cut();
                }
            }
        }
        self.shared().stats.rx_frames(accepted);
    }

    fn frame(&self, handle: FrameHandle) -> RxFrame<'_> {
        let Ok(i) = usize::try_from(handle.0) else {
            return RxFrame::default();
        };
        RxFrame::local(
            self.lent
                .get(i)
                .and_then(|r| self.reasm.bytes().get(r.clone()))
                .unwrap_or(&[]),
        )
    }

    fn finish(&mut self) {
        self.lent.clear();
        self.reasm.compact();
        self.frame_buffered = self.reasm.has_frame();
        let parking = &self.guard.shared.rx_parking;
        if self.reasm.pending() == 0 {
            parking.idle();
        } else {
            // Where a hand-over finds these bytes (the next `receive` takes them back).
            parking.park(ParkedRx {
                reasm: std::mem::replace(&mut self.reasm, Reassembler::empty()),
                generation: self.generation,
            });
        }
    }

    fn needs_polling(&self) -> bool {
        // Frames already buffered are delivered whatever the socket says.
        self.frame_buffered
    }

    fn readiness_fd(&self) -> Option<RawFd> {
        Some(self.shared().readiness.as_raw_fd())
    }
}

/// The transmit half.
pub struct TcpLinkTx {
    pub(crate) guard: Arc<LinkGuard>,
    pub(crate) link_id: u32,
    pub(crate) caps: PortCaps,
}

impl PortTx for TcpLinkTx {
    fn caps(&self) -> PortCaps {
        self.caps
    }

    fn transmit(&mut self, frames: &[TxFrame<'_>]) -> usize {
        let shared = &self.guard.shared;
        let mut out = lock(&shared.out);
        if !out.is_connected() {
            shared
                .stats
                .count_drop(TcpLinkDrop::Disconnected, frames.len() as u64);
            return frames.len();
        }
        let was_pending = out.has_pending();
        let mut taken = 0;
        let mut broken = false;
        for frame in frames {
            if !out.push(self.link_id, frame) {
                // Make room with what the socket takes now, then try once more.
                broken = out.flush(&shared.stats).is_err();
                if broken || !out.push(self.link_id, frame) {
                    break;
                }
            }
            taken += 1;
        }
        broken = broken || out.flush(&shared.stats).is_err();
        let pending = out.has_pending();
        drop(out);
        if broken {
            // What went into the buffer died with the connection.
            shared
                .stats
                .count_drop(TcpLinkDrop::Disconnected, frames.len() as u64);
            return frames.len();
        }
        shared.stats.tx_frames(taken as u64);
        if taken < frames.len() {
            // The switch counts the rest as a full queue; say why here too.
            shared
                .stats
                .count_drop(TcpLinkDrop::BufferFull, (frames.len() - taken) as u64);
        }
        if pending && !was_pending {
            shared.wake();
        }
        taken
    }
}
