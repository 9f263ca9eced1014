//! The port's transmit half: frames from the switch, copied once — straight from where the
//! switch found them (usually another guest's memory) into this guest's receive buffers
//! (Hyper-Switch's single copy).
//!
//! Per frame: enough receive chains for header and frame (several with mergeable buffers,
//! `num_buffers` set), the header written from the frame's offload state, the frame's head
//! and body copied. The used ring is updated and the guest notified once per burst, unless
//! its `used_event` (EVENT_IDX) or NO_INTERRUPT flag says it need not be. With no buffer left
//! the burst stops: `transmit` returns what was accepted and never waits.

use std::sync::Arc;

use virtio_queue::{AvailIter, Error as QueueError, QueueOwnedT, QueueT};
use vm_memory::{GuestAddress, GuestMemoryMmap};
use weft_packet::{OffloadInfo, VirtioNetHeader};
use weft_switch::{PortCaps, PortTx, TxFrame};

use crate::chain::{write_rx_chain, ChainError, FrameSource, TableRef};
use crate::config::MAX_FRAME_LEN;
use crate::counters::{FrameDrop, QueueFault};
use crate::device::DeviceShared;
use crate::features::Features;

/// The transmit half of a vhost-user port (see the module documentation).
pub struct VhostPortTx {
    dev: Arc<DeviceShared>,
    /// Chains filled this burst, with the bytes written into each.
    used: Vec<(u16, u32)>,
}

impl std::fmt::Debug for VhostPortTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VhostPortTx")
            .field("caps", &self.dev.caps())
            .finish()
    }
}

/// What the guest is told about a frame: `DATA_VALID` only if it negotiated checksums.
fn offload_for_guest(mut info: OffloadInfo, features: Features) -> OffloadInfo {
    if !features.guest_csum() {
        info.data_valid = false;
    }
    info
}

impl VhostPortTx {
    pub(crate) fn new(dev: Arc<DeviceShared>) -> Self {
        let capacity = usize::from(dev.config.max_queue_size);
        VhostPortTx {
            dev,
            used: Vec::with_capacity(capacity),
        }
    }
}

/// What one burst did.
#[derive(Default)]
struct Burst {
    accepted: usize,
    delivered: u64,
    bytes: u64,
    no_buffers: bool,
    fault: Option<QueueFault>,
    last_drop: Option<FrameDrop>,
}

/// Gives the chains a frame took (from `first` on) back to the available ring.
fn rewind(iter: &mut AvailIter<'_, &GuestMemoryMmap>, used: &mut Vec<(u16, u32)>, first: usize) {
    for _ in first..used.len() {
        iter.go_to_previous_position();
    }
    used.truncate(first);
}

impl PortTx for VhostPortTx {
    fn caps(&self) -> PortCaps {
        self.dev.caps()
    }

    fn transmit(&mut self, frames: &[TxFrame<'_>]) -> usize {
        if frames.is_empty() {
            return 0;
        }
        let dev = Arc::clone(&self.dev);
        let vring = dev.rx_vring();
        let counters = &vring.counters;
        let Some(mut st) = vring.try_lock() else {
            return 0;
        };
        if !st.serving() {
            return 0;
        }
        let Some(mem) = st.mem.clone() else {
            return 0;
        };
        let features = st.features;
        let hdr_len = features.header_len();
        let mergeable = features.mergeable_rx();
        let table = TableRef {
            desc_table: GuestAddress(st.queue.desc_table()),
            size: st.queue.size(),
        };
        let used = &mut self.used;
        used.clear();
        let mut burst = Burst::default();
        let drop_frame = |burst: &mut Burst, reason: FrameDrop| {
            counters.dropped(reason);
            burst.last_drop = Some(reason);
            burst.accepted += 1;
        };
        match st.queue.iter(&*mem) {
            Err(e) => {
                burst.fault = Some(match e {
                    QueueError::InvalidAvailRingIndex => QueueFault::AvailIndexOutOfRange,
                    _ => QueueFault::RingInaccessible,
                });
            }
            Ok(mut iter) => {
                'frames: for f in frames {
                    if f.len() < weft_packet::ethernet::HEADER_LEN {
                        drop_frame(&mut burst, FrameDrop::FrameTooShort);
                        continue;
                    }
                    if f.len() > MAX_FRAME_LEN {
                        drop_frame(&mut burst, FrameDrop::FrameTooLong);
                        continue;
                    }
                    if !features.guest_may_receive(&f.offload) {
                        drop_frame(&mut burst, FrameDrop::GuestRefusesOffload);
                        continue;
                    }
                    let mut src = FrameSource::new(f.head(), f.body);
                    let first = used.len();
                    let mut header = None;
                    loop {
                        let Some(chain) = iter.next() else {
                            rewind(&mut iter, used, first);
                            burst.no_buffers = true;
                            break 'frames;
                        };
                        let is_first = used.len() == first;
                        let want_header = if is_first { hdr_len } else { 0 };
                        match write_rx_chain(chain, &mem, table, want_header, &mut src) {
                            Ok(w) => {
                                if is_first {
                                    header = w.header;
                                }
                                used.push((w.head, w.len));
                            }
                            Err(ChainError::Drop(reason)) => {
                                iter.go_to_previous_position();
                                rewind(&mut iter, used, first);
                                drop_frame(&mut burst, reason);
                                continue 'frames;
                            }
                            Err(ChainError::Fault(fault)) => {
                                used.truncate(first);
                                burst.fault = Some(fault);
                                break 'frames;
                            }
                            Err(ChainError::NoRoom) => {
                                used.truncate(first);
                                burst.fault = Some(QueueFault::MalformedChain);
                                break 'frames;
                            }
                        }
                        if src.remaining() == 0 {
                            break;
                        }
                        if !mergeable || used.len() - first >= usize::from(u16::MAX) {
                            // Without mergeable buffers a frame must fit one chain.
                            rewind(&mut iter, used, first);
                            drop_frame(&mut burst, FrameDrop::GuestBufferTooSmall);
                            continue 'frames;
                        }
                    }
                    let buffers = u16::try_from(used.len() - first).unwrap_or(u16::MAX);
                    let mut hdr =
                        VirtioNetHeader::from_offload_info(&offload_for_guest(f.offload, features));
                    // A 10-byte legacy header has no num_buffers; the 12-byte one always does.
                    let _ = hdr.set_num_buffers(buffers);
                    let bytes = hdr.into_inner();
                    if let (Some(slot), Some(b)) = (header, bytes.get(..hdr_len)) {
                        slot.copy_from(b);
                    }
                    burst.accepted += 1;
                    burst.delivered += 1;
                    burst.bytes += f.len() as u64;
                }
            }
        }
        let mut added = false;
        for (head, len) in used.drain(..) {
            if st.queue.add_used(&*mem, head, len).is_err() {
                burst.fault.get_or_insert(QueueFault::RingInaccessible);
                break;
            }
            added = true;
        }
        if added {
            st.notify_guest(counters);
        }
        counters.add_frames(burst.delivered, burst.bytes);
        if burst.no_buffers {
            counters.no_buffers();
        }
        if let Some(reason) = burst.last_drop {
            st.log_drop(reason, vring.name);
        }
        if let Some(fault) = burst.fault {
            st.fault(fault, counters, vring.name);
        }
        burst.accepted
    }
}

#[cfg(test)]
mod tests;
