//! The VXLAN port: [`VxlanPort::open`] gives a receive half ([`VxlanRx`]) and a transmit half
//! ([`VxlanTx`]) for a weft switch, and the port's counters.
//!
//! Thread ownership: each half has one owner (the worker polling the receive half; whoever
//! holds the switch's lock on the transmit half). They share the remote FDB behind a mutex,
//! taken once per burst by the transmit half and, only when learning, once per burst by the
//! receive half (VALE's one critical section per destination per batch).

use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex, MutexGuard};

use weft_switch::{FrameHandle, PortCaps, PortRx, RxBatch, RxDesc};

use crate::config::VxlanConfig;
use crate::decap::{decapsulate, remote_allowed, DecapRules};
use crate::error::OverlayError;
use crate::fdb_handle::RemoteFdbHandle;
use crate::remote_fdb::{LearnOutcome, RemoteFdb};
use crate::stats::{DecapDrop, OverlayStats};
use crate::sys::{self, RawAddr};
use crate::tx::VxlanTx;
use crate::{netns, MAX_REMOTES};

/// An opened VXLAN port, before it is split into halves.
pub struct VxlanPort {
    fdb: Arc<Mutex<RemoteFdb>>,
    rx: VxlanRx,
    tx: VxlanTx,
    stats: Arc<OverlayStats>,
}

impl VxlanPort {
    /// Opens the sockets (inside `config.netns` when set): a UDP socket bound to the local
    /// endpoint for receiving, a raw UDP socket for sending (needs `CAP_NET_RAW`).
    pub fn open(config: &VxlanConfig) -> Result<VxlanPort, OverlayError> {
        config.validate()?;
        if config.remotes.len() > MAX_REMOTES {
            return Err(OverlayError::Config(format!(
                "{} remotes, at most {MAX_REMOTES}",
                config.remotes.len()
            )));
        }
        let mut fdb = RemoteFdb::new(config.max_static, config.max_learned);
        fdb.set_ageing(config.remote_ageing);
        for (mac, ip) in &config.static_fdb {
            fdb.insert_static(*mac, *ip)?;
        }
        let (udp, raw) = netns::run_in(config.netns.as_deref(), || {
            let udp = sys::udp_socket(config.local)?;
            let raw = sys::raw_udp_socket(config.local.ip(), config.ttl, config.dscp)?;
            Ok((udp, raw))
        })?;
        let fdb = Arc::new(Mutex::new(fdb));
        let stats = Arc::new(OverlayStats::default());
        let caps = PortCaps::plain(config.mtu);
        let rules = DecapRules {
            vni: config.vni,
            strict_reserved: config.strict_reserved,
            max_frame_len: caps.max_frame_len,
        };
        let batch = config.batch.clamp(1, weft_switch::port::MAX_BATCH);
        let slot_len = weft_packet::vxlan::HEADER_LEN + caps.max_frame_len;
        let rx = VxlanRx {
            socket: udp,
            rules,
            remotes: config.remotes.clone(),
            learning: config.learning,
            fdb: Arc::clone(&fdb),
            stats: Arc::clone(&stats),
            slot_len,
            buffers: vec![0; slot_len * batch],
            lent: Vec::with_capacity(batch),
            slots_used: 0,
            scratch: RxScratch {
                iovecs: Vec::with_capacity(batch),
                addrs: vec![RawAddr::zeroed(); batch],
                msgs: Vec::with_capacity(batch),
            },
            batch,
        };
        let tx = VxlanTx::new(raw, config, caps, Arc::clone(&fdb), Arc::clone(&stats));
        Ok(VxlanPort { fdb, rx, tx, stats })
    }

    /// The halves and the counters.
    pub fn split(self) -> (VxlanRx, VxlanTx, Arc<OverlayStats>) {
        (self.rx, self.tx, self.stats)
    }

    /// A handle on the port's remote FDB, for changing static entries while it runs.
    pub fn remote_fdb(&self) -> RemoteFdbHandle {
        RemoteFdbHandle::new(Arc::clone(&self.fdb))
    }

    /// The local endpoint the receive socket is bound to (its port resolved).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.rx.socket.local_addr().ok()
    }
}

pub(crate) fn lock(fdb: &Mutex<RemoteFdb>) -> MutexGuard<'_, RemoteFdb> {
    // A panic elsewhere while holding the lock leaves a table that is still consistent
    // (every method keeps its invariants before returning).
    fdb.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Where a received frame lies in `buffers`.
#[derive(Debug, Clone, Copy)]
struct Lent {
    start: usize,
    len: usize,
}

/// Headers for `recvmmsg`, rebuilt on every call.
struct RxScratch {
    iovecs: Vec<libc::iovec>,
    addrs: Vec<RawAddr>,
    msgs: Vec<libc::mmsghdr>,
}

// SAFETY: the raw pointers in the scratch headers point into the owning `VxlanRx`'s own
// buffers, are rewritten before every system call and never read otherwise; moving the
// port to another thread moves those buffers with it.
unsafe impl Send for RxScratch {}

/// The receive half.
pub struct VxlanRx {
    socket: std::net::UdpSocket,
    rules: DecapRules,
    remotes: Vec<IpAddr>,
    learning: bool,
    fdb: Arc<Mutex<RemoteFdb>>,
    stats: Arc<OverlayStats>,
    slot_len: usize,
    buffers: Vec<u8>,
    /// Frames lent since the last `finish`; a handle indexes this.
    lent: Vec<Lent>,
    /// Buffer slots filled since the last `finish` (dropped datagrams use one too).
    slots_used: usize,
    scratch: RxScratch,
    batch: usize,
}

impl VxlanRx {
    fn receive_into(&mut self, want: usize) -> usize {
        let first = self.slots_used;
        let n = want.min(self.batch - first);
        if n == 0 {
            return 0;
        }
        let s = &mut self.scratch;
        s.iovecs.clear();
        s.msgs.clear();
        let region = &mut self.buffers[first * self.slot_len..(first + n) * self.slot_len];
        for slot in region.chunks_exact_mut(self.slot_len) {
            s.iovecs.push(libc::iovec {
                iov_base: slot.as_mut_ptr().cast(),
                iov_len: slot.len(),
            });
        }
        for (iov, addr) in s.iovecs.iter_mut().zip(s.addrs.iter_mut()) {
            let mut m = sys::empty_mmsghdr();
            addr.len = RawAddr::zeroed().len;
            m.msg_hdr.msg_name = std::ptr::from_mut(&mut addr.storage).cast();
            m.msg_hdr.msg_namelen = addr.len;
            m.msg_hdr.msg_iov = std::ptr::from_mut(iov);
            m.msg_hdr.msg_iovlen = 1;
            s.msgs.push(m);
        }
        // SAFETY: every header points at a slot of `buffers`, an address of `addrs` and an
        // iovec of `iovecs`, all alive and not otherwise borrowed during the call.
        match unsafe { sys::recvmmsg(self.socket.as_raw_fd(), &mut s.msgs) } {
            Ok(got) => {
                let got = got.min(n);
                self.slots_used += got;
                got
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
            Err(_) => {
                self.stats.rx_error();
                0
            }
        }
    }
}

impl PortRx for VxlanRx {
    fn receive(&mut self, batch: &mut RxBatch) {
        let first = self.slots_used;
        let got = self.receive_into(batch.room());
        let mut fdb = self.learning.then(|| lock(&self.fdb));
        if let Some(fdb) = fdb.as_mut() {
            fdb.tick(std::time::Instant::now());
        }
        let mut accepted = 0;
        for i in 0..got {
            let msg = &self.scratch.msgs[i];
            let len = usize::try_from(msg.msg_len).unwrap_or(0).min(self.slot_len);
            let truncated = msg.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
            let mut addr = self.scratch.addrs[i];
            addr.len = msg.msg_hdr.msg_namelen;
            let start = (first + i) * self.slot_len;
            let Some(source) = addr.to_ip() else {
                self.stats.rx_drop(DecapDrop::UnknownRemote);
                continue;
            };
            if !remote_allowed(source, &self.remotes, self.learning) {
                self.stats.rx_drop(DecapDrop::UnknownRemote);
                continue;
            }
            let datagram = &self.buffers[start..start + len];
            let d = match decapsulate(datagram, truncated, &self.rules) {
                Ok(d) => d,
                Err(reason) => {
                    self.stats.rx_drop(reason);
                    continue;
                }
            };
            if let Some(fdb) = fdb.as_mut() {
                match fdb.learn(d.inner_src, source) {
                    LearnOutcome::Learned => self.stats.learned(),
                    LearnOutcome::Full => self.stats.learn_refused(),
                    LearnOutcome::Unchanged => {}
                }
            }
            let handle = FrameHandle(u32::try_from(self.lent.len()).unwrap_or(u32::MAX));
            if batch
                .push(RxDesc {
                    handle,
                    offload: weft_packet::OffloadInfo::default(),
                })
                .is_err()
            {
                break; // Cannot happen: at most `room` datagrams were read.
            }
            self.lent.push(Lent {
                start: start + d.inner.start,
                len: d.inner.len(),
            });
            accepted += 1;
        }
        self.stats.rx_frames(accepted);
    }

    fn frame(&self, handle: FrameHandle) -> &[u8] {
        let Ok(i) = usize::try_from(handle.0) else {
            return &[];
        };
        match self.lent.get(i) {
            Some(l) => self.buffers.get(l.start..l.start + l.len).unwrap_or(&[]),
            None => &[],
        }
    }

    fn finish(&mut self) {
        self.lent.clear();
        self.slots_used = 0;
    }

    fn readiness_fd(&self) -> Option<RawFd> {
        Some(self.socket.as_raw_fd())
    }
}
