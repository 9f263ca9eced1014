//! The receive half: one `recvmmsg` per receive call into fixed slots, each datagram
//! decapsulated in place and its inner frame lent to the switch. With UDP GRO on, a slot may
//! hold many datagrams of one flow (one 64 KB buffer for what a peer sent with one
//! `UDP_SEGMENT` call): they are cut apart ([`crate::vxlan::gro`]) and drained into the switch's
//! batches, across receive calls when one batch cannot take them all; no new datagram is read
//! until the slots received before are drained.

use std::net::IpAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use weft_packet::MacAddr;
use weft_switch::{FrameHandle, PortCaps, PortRx, RxBatch, RxDesc, RxFrame};
use weft_sys::{IoVecMut, MmsgBatch};

use crate::handover::RxParking;
use crate::vxlan::decap::{decapsulate, remote_allowed, DecapRules};
use crate::vxlan::flood_list::FloodCopy;
use crate::vxlan::gro::{read_control, GroError};
use crate::vxlan::port::lock;
use crate::vxlan::remote_fdb::RemoteFdb;
use crate::vxlan::rx_coalesce::{coalesce, MergeKinds};
pub(crate) use crate::vxlan::rx_handover::RxLeftover;
use crate::vxlan::stats::{DecapDrop, OverlayStats};
use crate::vxlan::too_big::{TooBigQueue, TooBigShared};

/// Where a received frame lies in `buffers`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lent {
    start: usize,
    len: usize,
    /// In `answers` (an ICMP answer to an oversize frame), not in `buffers`.
    answer: bool,
}

/// A received buffer (one datagram, or several coalesced by GRO) not yet fully drained.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Received {
    /// Start of its slot in `buffers`.
    pub(crate) start: usize,
    pub(crate) len: usize,
    /// Length of each datagram in it (the last may be shorter).
    pub(crate) segment: usize,
    pub(crate) truncated: bool,
    pub(crate) source: IpAddr,
}

/// The receive half.
pub struct VxlanRx {
    pub(crate) socket: Arc<std::net::UdpSocket>,
    pub(crate) rules: DecapRules,
    /// The flood list (sorted): whom datagrams are taken from without learning.
    pub(crate) flood: FloodCopy,
    pub(crate) learning: bool,
    pub(crate) gro: bool,
    /// The super-frames inner GRO may make: what the switch's other ports all take whole.
    pub(crate) merge: MergeKinds,
    /// The socket's drop count (`SO_RXQ_OVFL`) as last reported.
    pub(crate) socket_drops_seen: u32,
    pub(crate) fdb: Arc<Mutex<RemoteFdb>>,
    pub(crate) stats: Arc<OverlayStats>,
    pub(crate) slot_len: usize,
    pub(crate) buffers: Vec<u8>,
    /// Frames lent since the last `finish`; a handle indexes this.
    pub(crate) lent: Vec<Lent>,
    /// Buffer slots filled and not yet free (reset by `finish` once all are drained).
    pub(crate) slots_used: usize,
    pub(crate) received: Vec<Received>,
    /// The next datagram to drain: index in `received`, offset in that buffer.
    pub(crate) next: (usize, usize),
    /// The `recvmmsg` headers, addresses and control buffers, kept from call to call.
    pub(crate) scratch: MmsgBatch,
    pub(crate) batch: usize,
    /// ICMP answers the transmit half queued, and those taken from it until `finish`.
    pub(crate) too_big: Option<Arc<TooBigShared>>,
    pub(crate) answers: TooBigQueue,
    /// Where `buffers`, `received` and `next` wait between batches when some datagrams are
    /// not drained yet (`parked` then).
    pub(crate) parking: Arc<RxParking<RxLeftover>>,
    pub(crate) parked: bool,
}

impl VxlanRx {
    fn drained(&self) -> bool {
        self.next.0 >= self.received.len()
    }

    /// Reads up to `want` buffers into the free slots; records the ones from allowed remotes
    /// with trustworthy control data in `received`.
    fn receive_into(&mut self, want: usize) {
        self.received.clear();
        self.next = (0, 0);
        let first = self.slots_used;
        let n = want.min(self.batch - first);
        if n == 0 {
            return;
        }
        let region = &mut self.buffers[first * self.slot_len..(first + n) * self.slot_len];
        let mut input = self.scratch.receiving();
        for slot in region.chunks_exact_mut(self.slot_len) {
            input.push(IoVecMut::new(slot));
        }
        let got = match input.receive(&self.socket) {
            Ok(got) => got.min(n),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
            Err(_) => {
                self.stats.rx_error();
                0
            }
        };
        self.slots_used += got;
        for i in 0..got {
            self.record(first + i, i);
        }
    }

    /// Checks message `i` of the last `recvmmsg` (in slot `slot`) and records it.
    fn record(&mut self, slot: usize, i: usize) {
        let Some(msg) = self.scratch.received(i) else {
            return;
        };
        let len = msg.len.min(self.slot_len);
        let flags = msg.flags;
        let Some(source) = msg.source.map(|a| a.ip()) else {
            self.stats.rx_drop(DecapDrop::UnknownRemote);
            return;
        };
        if !remote_allowed(source, self.flood.remotes(), self.learning) {
            self.stats.rx_drop(DecapDrop::UnknownRemote);
            return;
        }
        let control = read_control(msg.control);
        if let Some(seen) = control.ok().and_then(|c| c.socket_drops) {
            // Cumulative since the socket opened: count what is new since the last look.
            let new = seen.wrapping_sub(self.socket_drops_seen);
            self.socket_drops_seen = seen;
            self.stats.rx_socket_overflow(u64::from(new));
        }
        let segment = if self.gro {
            match control.map(|c| c.gro_segment) {
                // A cut control message may have hidden the segment size.
                Ok(None) if flags & libc::MSG_CTRUNC != 0 => Err(GroError::BadControl),
                other => other,
            }
        } else {
            Ok(None)
        };
        let segment = match segment {
            Ok(size) => size.map_or(len, usize::from).max(1),
            Err(_) => {
                self.stats.rx_drop(DecapDrop::BadGro);
                return;
            }
        };
        if segment < len {
            self.stats.rx_coalesced();
        }
        self.received.push(Received {
            start: slot * self.slot_len,
            len,
            segment,
            truncated: flags & libc::MSG_TRUNC != 0,
            source,
        });
    }

    /// Decapsulates received datagrams into `batch` until it is full or all are drained.
    fn drain(&mut self, batch: &mut RxBatch) {
        let mut fdb = self.learning.then(|| lock(&self.fdb));
        if let Some(fdb) = fdb.as_mut() {
            // Learned remotes age out (swept at most every few seconds, see RemoteFdb).
            fdb.tick(std::time::Instant::now());
        }
        let mut accepted = 0;
        while batch.room() > 0 {
            let (index, offset) = self.next;
            let Some(r) = self.received.get(index).copied() else {
                break;
            };
            if offset == 0 && r.segment < r.len && !r.truncated {
                if let Some(m) = self
                    .buffers
                    .get_mut(r.start..r.start + r.len)
                    .and_then(|buf| coalesce(buf, r.segment, &self.rules, self.merge))
                {
                    self.next = (index + 1, 0);
                    let src = self
                        .buffers
                        .get(r.start + m.start + 6..r.start + m.start + 12);
                    if let (Some(fdb), Some(mac)) =
                        (fdb.as_mut(), src.and_then(MacAddr::from_bytes))
                    {
                        self.stats.learn(fdb.learn(mac, r.source));
                    }
                    let handle = FrameHandle(u32::try_from(self.lent.len()).unwrap_or(u32::MAX));
                    if batch
                        .push(RxDesc {
                            handle,
                            offload: m.offload,
                        })
                        .is_err()
                    {
                        break; // Cannot happen: the loop runs while there is room.
                    }
                    self.lent.push(Lent {
                        start: r.start + m.start,
                        len: m.len,
                        answer: false,
                    });
                    self.stats.rx_merged();
                    accepted += 1;
                    continue;
                }
            }
            let end = offset.saturating_add(r.segment).min(r.len);
            self.next = if end >= r.len {
                (index + 1, 0)
            } else {
                (index, end)
            };
            let Some(datagram) = self.buffers.get(r.start + offset..r.start + end) else {
                continue;
            };
            let d = match decapsulate(datagram, r.truncated, &self.rules) {
                Ok(d) => d,
                Err(reason) => {
                    self.stats.rx_drop(reason);
                    continue;
                }
            };
            if let Some(fdb) = fdb.as_mut() {
                self.stats.learn(fdb.learn(d.inner_src, r.source));
            }
            let handle = FrameHandle(u32::try_from(self.lent.len()).unwrap_or(u32::MAX));
            if batch
                .push(RxDesc {
                    handle,
                    offload: weft_packet::OffloadInfo::default(),
                })
                .is_err()
            {
                break; // Cannot happen: the loop runs while there is room.
            }
            self.lent.push(Lent {
                start: r.start + offset + d.inner.start,
                len: d.inner.len(),
                answer: false,
            });
            accepted += 1;
        }
        self.stats.rx_frames(accepted);
    }
}

impl VxlanRx {
    /// Hands the switch the ICMP answers the transmit half queued (they look like frames from
    /// the overlay, so the switch sends them to the oversize frame's sender).
    fn take_answers(&mut self, batch: &mut RxBatch) {
        let Some(shared) = &self.too_big else {
            return;
        };
        if !self.answers.is_empty() || !shared.pending.load(Ordering::Acquire) {
            return;
        }
        let mut queue = shared
            .queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        shared.pending.store(false, Ordering::Release);
        queue.drain_into(&mut self.answers);
        drop(queue);
        for (i, frame) in self.answers.frames().enumerate() {
            let handle = FrameHandle(u32::try_from(self.lent.len()).unwrap_or(u32::MAX));
            let offload = weft_packet::OffloadInfo::default();
            // The port's own: the switch must not learn the answer's source (the remote
            // destination's address, which a guest chose) as a station behind the overlay.
            if batch.push_own(RxDesc { handle, offload }).is_err() {
                break; // Answers that do not fit are dropped: the sender will retry.
            }
            self.lent.push(Lent {
                start: i,
                len: frame.len(),
                answer: true,
            });
            self.stats.rx_frames(1);
        }
    }
}

impl PortRx for VxlanRx {
    fn receive(&mut self, batch: &mut RxBatch) {
        self.unpark();
        self.take_answers(batch);
        if self.drained() {
            // Before reading: the datagrams of this burst are checked against the list.
            self.flood.refresh();
            self.receive_into(batch.room());
        }
        self.drain(batch);
    }

    fn frame(&self, handle: FrameHandle) -> RxFrame<'_> {
        let Ok(i) = usize::try_from(handle.0) else {
            return RxFrame::default();
        };
        RxFrame::local(match self.lent.get(i) {
            Some(l) if l.answer => self.answers.frames().nth(l.start).unwrap_or(&[]),
            Some(l) => self.buffers.get(l.start..l.start + l.len).unwrap_or(&[]),
            None => &[],
        })
    }

    fn finish(&mut self) {
        self.lent.clear();
        self.answers.clear();
        if self.drained() {
            self.slots_used = 0;
            self.parking.idle();
        } else {
            self.parking.park(RxLeftover {
                buffers: std::mem::take(&mut self.buffers),
                received: std::mem::take(&mut self.received),
                next: self.next,
            });
            self.parked = true;
        }
    }

    fn needs_polling(&self) -> bool {
        // Datagrams received before wait for room in a batch, whatever the socket says.
        self.parked || !self.drained()
    }

    fn readiness_fd(&self) -> Option<RawFd> {
        Some(self.socket.as_raw_fd())
    }

    fn peers_accept(&mut self, peers: &PortCaps) {
        self.merge = MergeKinds::taken_by(peers);
    }
}
