//! The transmit half of an AF_PACKET port: bursts of frames in one `sendmmsg`, each message
//! gathered from its virtio-net header, new head and body (no copy in user space).

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use weft_switch::{PortCaps, PortTx, TxFrame};
use weft_sys::{IoVec, MmsgBatch};

use crate::stats::{PortDrop, PortStats};
use crate::sys;
use crate::vnet::{self, PACKET_HDR_LEN, TAP_HDR_LEN};

/// Frames per `sendmmsg` (the core hands over at most this many per call anyway).
const TX_BATCH: usize = 64;

/// The transmit half of an AF_PACKET port.
///
/// Ownership: whoever delivers to the port (the daemon puts it behind one lock per port).
pub struct AfPacketTx {
    fd: Arc<OwnedFd>,
    caps: PortCaps,
    stats: Arc<PortStats>,
    /// The `sendmmsg` headers and iovecs, kept from burst to burst.
    batch: MmsgBatch,
}

impl AfPacketTx {
    pub(super) fn new(fd: Arc<OwnedFd>, caps: PortCaps, stats: Arc<PortStats>) -> Self {
        AfPacketTx {
            fd,
            caps,
            stats,
            batch: MmsgBatch::new(TX_BATCH, TX_BATCH * sys::FRAME_IOVECS),
        }
    }

    /// The port's counters.
    pub fn stats(&self) -> &Arc<PortStats> {
        &self.stats
    }

    /// Sends up to [`TX_BATCH`] frames. Returns how many the kernel took or refused
    /// (refusals are counted); fewer than `frames.len()` only when the socket is full.
    fn send_burst(&mut self, frames: &[TxFrame<'_>]) -> usize {
        let n = frames.len().min(TX_BATCH);
        let frames = &frames[..n];
        let mut headers = [[0u8; TAP_HDR_LEN]; TX_BATCH];
        for (h, f) in headers.iter_mut().zip(frames) {
            *h = vnet::tx_header(&f.offload);
        }
        let mut msgs = self.batch.sending();
        for (h, f) in headers.iter().zip(frames) {
            let mut iov = [IoVec::EMPTY; sys::FRAME_IOVECS];
            let len = sys::frame_iovecs(&h[..PACKET_HDR_LEN], f, &mut iov);
            let iovecs = msgs.add_iovecs(&iov[..len]);
            msgs.push(iovecs, None);
        }
        let mut done = 0;
        while done < n {
            match msgs.send(self.fd.as_fd(), done..n) {
                Ok(0) => break,
                Ok(k) => {
                    count_sent(&self.stats, &frames[done..done + k]);
                    done += k;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // The kernel refused the first remaining frame (too big, a header it will
                // not take, no buffer space on the device): drop it, count it, go on.
                Err(_) => {
                    self.stats.drop_one(PortDrop::TxError);
                    done += 1;
                }
            }
        }
        done
    }
}

fn count_sent(stats: &PortStats, frames: &[TxFrame<'_>]) {
    stats.tx_frames.add(frames.len() as u64);
    stats
        .tx_gso_frames
        .add(frames.iter().filter(|f| f.offload.is_gso()).count() as u64);
    stats
        .tx_csum_partial
        .add(frames.iter().filter(|f| f.offload.needs_csum).count() as u64);
}

impl PortTx for AfPacketTx {
    fn caps(&self) -> PortCaps {
        self.caps
    }

    fn transmit(&mut self, frames: &[TxFrame<'_>]) -> usize {
        let mut accepted = 0;
        while accepted < frames.len() {
            let burst = &frames[accepted..];
            let n = self.send_burst(burst);
            accepted += n;
            if n < burst.len().min(TX_BATCH) {
                break;
            }
        }
        accepted
    }
}
