//! The transmit half of a TAP queue: one `writev` per frame (header, new head, body and
//! tail where they lie; nothing is copied in user space).

use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;

use weft_switch::{PortCaps, PortTx, TxFrame};
use weft_sys::IoVec;

use crate::stats::{PortDrop, PortStats};
use crate::sys;
use crate::vnet::{self, TAP_HDR_LEN};

/// The transmit half of a TAP queue.
///
/// Ownership: whoever delivers to the port (the daemon puts it behind one lock per port).
pub struct TapTx {
    file: Arc<File>,
    caps: PortCaps,
    stats: Arc<PortStats>,
}

impl TapTx {
    pub(crate) fn new(file: Arc<File>, caps: PortCaps, stats: Arc<PortStats>) -> Self {
        TapTx { file, caps, stats }
    }

    /// The port's counters.
    pub fn stats(&self) -> &Arc<PortStats> {
        &self.stats
    }

    /// Writes one frame. `Ok(false)`: the kernel has no room now.
    fn write_frame(&self, frame: &TxFrame<'_>) -> Result<bool, io::Error> {
        let header = vnet::tx_header(&frame.offload);
        let mut iov = [IoVec::EMPTY; sys::FRAME_IOVECS];
        let n = sys::frame_iovecs(&header[..TAP_HDR_LEN], frame, &mut iov);
        loop {
            match sys::writev(self.file.as_fd(), &iov[..n]) {
                Ok(_) => return Ok(true),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if super::is_would_block(&e) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
    }
}

impl PortTx for TapTx {
    fn caps(&self) -> PortCaps {
        self.caps
    }

    fn transmit(&mut self, frames: &[TxFrame<'_>]) -> usize {
        let (mut sent, mut gso, mut partial) = (0u64, 0u64, 0u64);
        let mut accepted = frames.len();
        for (i, frame) in frames.iter().enumerate() {
            match self.write_frame(frame) {
                Ok(true) => {
                    sent += 1;
                    gso += u64::from(frame.offload.is_gso());
                    partial += u64::from(frame.offload.needs_csum);
                }
                Ok(false) => {
                    accepted = i;
                    break;
                }
                // The kernel refused this frame (a header it will not take, the device
                // gone): the port drops it, counts it, and goes on with the next.
                Err(_) => self.stats.drop_one(PortDrop::TxError),
            }
        }
        self.stats.tx_frames.add(sent);
        self.stats.tx_gso_frames.add(gso);
        self.stats.tx_csum_partial.add(partial);
        accepted
    }
}
