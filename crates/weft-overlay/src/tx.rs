//! The transmit half: each frame encapsulated by scatter/gather — an iovec of [UDP + VXLAN
//! header in a 16-byte per-frame buffer, the frame's rewritten head, the frame's body where
//! it lies] — and sent to the endpoint its destination MAC maps to, or to every remote
//! (head-end replication) for broadcast, multicast and unknown unicast. One `sendmmsg` per
//! burst (per 256 datagrams); replicas share the frame's header and iovecs. With offloads on,
//! runs of equal-length frames to one remote go through `UDP_SEGMENT` instead
//! (`tx_small_gso`), and super-frames are segmented by the port (`tx_super`); whatever the
//! path, frames reach the kernel in burst order.

use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

use weft_packet::{MacAddr, Vni};
use weft_switch::{PortCaps, PortTx, TxFrame};

use crate::config::VxlanConfig;
use crate::encap::{flow_hash, source_port, write_header, ENCAP_LEN, HASH_PREFIX};
use crate::port::lock;
use crate::remote_fdb::RemoteFdb;
use crate::stats::OverlayStats;
use crate::sys::{self, RawAddr};
use crate::too_big::{answer, l3_offset, RateLimit, TooBigShared};
use crate::tx_small_gso::{run_len, Route, RunSent, SmallGsoScratch};

/// Most datagrams per `sendmmsg` (and so most frames per chunk).
pub(crate) const MAX_MSGS: usize = 256;
/// ICMP answers to oversize frames: at most this many per second, in bursts of
/// `TOO_BIG_BURST` (like the kernel's `icmp_ratelimit` defaults: ~1 per ms, burst 50, but
/// smaller: a switch answers for many senders).
const TOO_BIG_RATE: u32 = 100;
const TOO_BIG_BURST: u32 = 10;
/// Room for a super-frame's segments, each behind a copy of the headers and a VXLAN header.
const SEGMENTS_LEN: usize = 192 << 10;

/// Headers for `sendmmsg`, rebuilt on every call.
struct TxScratch {
    headers: Vec<[u8; ENCAP_LEN]>,
    iovecs: Vec<[libc::iovec; 3]>,
    addrs: Vec<RawAddr>,
    msgs: Vec<libc::mmsghdr>,
    /// For each message, the index (in the burst) of the frame it carries.
    msg_frame: Vec<usize>,
}

// SAFETY: the raw pointers in the scratch headers point into buffers that live only for one
// `transmit` call (the frames) or are owned by the scratch itself; they are rewritten before
// every system call and never read otherwise.
unsafe impl Send for TxScratch {}

/// The transmit half.
pub struct VxlanTx {
    socket: OwnedFd,
    /// UDP sockets for segmentation offload and their bound (source) ports; empty when
    /// offloads are off.
    pub(crate) gso: Vec<(OwnedFd, u16)>,
    pub(crate) vni: Vni,
    pub(crate) remote_port: u16,
    pub(crate) caps: PortCaps,
    pub(crate) remotes: Vec<IpAddr>,
    fdb: Arc<Mutex<RemoteFdb>>,
    pub(crate) stats: Arc<OverlayStats>,
    scratch: TxScratch,
    /// A super-frame made contiguous, and its segments behind their VXLAN headers.
    pub(crate) linear: Vec<u8>,
    pub(crate) segments: Vec<u8>,
    /// The largest L3 packet the overlay carries (the caps' MTU).
    pub(crate) inner_mtu: usize,
    /// Oversize frames' answers: the prefix quoted, the rate limit, the queue to the receive
    /// half.
    too_big_quote: Vec<u8>,
    too_big_limit: RateLimit,
    too_big: Option<Arc<TooBigShared>>,
    /// The kernel refused `UDP_SEGMENT` (a device without checksum offload): segments are
    /// sent one `sendmsg` each from then on.
    pub(crate) gso_refused: bool,
    /// Each frame's route, for the burst being sent.
    routes: Vec<Route>,
    /// Segmented sends of ordinary frames.
    pub(crate) small: SmallGsoScratch,
}

/// How many frames the messages carry (each frame's messages are contiguous).
fn distinct_frames(msg_frame: &[usize]) -> usize {
    let mut n = 0;
    let mut last = None;
    for &f in msg_frame {
        if last != Some(f) {
            n += 1;
            last = Some(f);
        }
    }
    n
}

/// The first bytes of a frame (head then body), copied for the MAC lookup and flow hash.
fn frame_prefix(frame: &TxFrame<'_>, out: &mut [u8; HASH_PREFIX]) -> usize {
    let head = frame.head();
    let n_head = head.len().min(HASH_PREFIX);
    out[..n_head].copy_from_slice(&head[..n_head]);
    let n_body = frame.body.len().min(HASH_PREFIX - n_head);
    out[n_head..n_head + n_body].copy_from_slice(&frame.body[..n_body]);
    n_head + n_body
}

/// Answers an oversize frame (rate limited); counts it either way.
fn answer_too_big(
    frame: &TxFrame<'_>,
    mtu: usize,
    quote: &mut [u8],
    limit: &mut RateLimit,
    shared: &TooBigShared,
    stats: &OverlayStats,
) {
    stats.too_big();
    let head = frame.head();
    let n_head = head.len().min(quote.len());
    quote[..n_head].copy_from_slice(&head[..n_head]);
    let n_body = frame.body.len().min(quote.len() - n_head);
    quote[n_head..n_head + n_body].copy_from_slice(&frame.body[..n_body]);
    if !limit.allow(std::time::Instant::now()) {
        return;
    }
    let mut queue = shared
        .queue
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(slot) = queue.free_slot() else {
        return;
    };
    if let Some(len) = answer(&quote[..n_head + n_body], mtu, &mut slot.0) {
        slot.1 = len;
        queue.commit();
        shared
            .pending
            .store(true, std::sync::atomic::Ordering::Release);
        stats.too_big_answered();
    }
}

/// The flow's source port, and which offload socket has it bound (when there are some): a
/// flow keeps one source port whether its frames go through the raw socket or through
/// segmentation offload, so that the underlay's ECMP keeps it on one path.
pub(crate) fn pick_source_port(gso: &[(OwnedFd, u16)], hash: u64) -> (usize, u16) {
    let n = u64::try_from(gso.len()).unwrap_or(u64::MAX);
    if n == 0 {
        return (0, source_port(hash));
    }
    let index = usize::try_from((hash >> 32) % n).unwrap_or(0);
    (index, gso.get(index).map_or(0, |g| g.1))
}

/// What `VxlanPort::open` prepared for the transmit half.
pub(crate) struct TxSetup {
    /// The raw sending socket.
    pub(crate) socket: OwnedFd,
    /// The segmentation-offload sockets and their ports.
    pub(crate) gso: Vec<(OwnedFd, u16)>,
    pub(crate) caps: PortCaps,
    pub(crate) inner_mtu: usize,
    pub(crate) too_big: Option<Arc<TooBigShared>>,
}

impl VxlanTx {
    pub(crate) fn new(
        setup: TxSetup,
        config: &VxlanConfig,
        fdb: Arc<Mutex<RemoteFdb>>,
        stats: Arc<OverlayStats>,
    ) -> VxlanTx {
        let TxSetup {
            socket,
            gso,
            caps,
            inner_mtu,
            too_big,
        } = setup;
        let super_frames = !gso.is_empty();
        VxlanTx {
            socket,
            gso,
            vni: config.vni,
            remote_port: config.remote_port,
            caps,
            remotes: config.remotes.clone(),
            fdb,
            stats,
            scratch: TxScratch {
                headers: Vec::with_capacity(MAX_MSGS),
                iovecs: Vec::with_capacity(MAX_MSGS),
                addrs: Vec::with_capacity(MAX_MSGS),
                msgs: Vec::with_capacity(MAX_MSGS),
                msg_frame: Vec::with_capacity(MAX_MSGS),
            },
            linear: if super_frames {
                vec![0; crate::MAX_SUPER_FRAME]
            } else {
                Vec::new()
            },
            segments: if super_frames {
                vec![0; SEGMENTS_LEN]
            } else {
                Vec::new()
            },
            gso_refused: false,
            routes: Vec::with_capacity(MAX_MSGS),
            small: SmallGsoScratch::new(config.vni),
            inner_mtu,
            too_big_quote: vec![0; crate::too_big::QUOTE_PREFIX],
            too_big_limit: RateLimit::new(TOO_BIG_RATE, TOO_BIG_BURST),
            too_big,
        }
    }

    /// Where `frame` goes: its path, remote and source port.
    fn route(&self, frame: &TxFrame<'_>, fdb: &RemoteFdb) -> Route {
        if frame.offload.is_gso() {
            return Route::Super;
        }
        let mut prefix = [0u8; HASH_PREFIX];
        let n = frame_prefix(frame, &mut prefix);
        let l3_len = frame.len().saturating_sub(l3_offset(&prefix[..n]));
        if l3_len > self.inner_mtu {
            // The switch keeps these back (our caps' MTU) and calls `too_big`; a direct
            // caller gets the same answer.
            return Route::TooBig;
        }
        let Some(dst) = MacAddr::from_bytes(&prefix[..n.min(6)]) else {
            return Route::Malformed;
        };
        let (socket, src_port) = pick_source_port(&self.gso, flow_hash(&prefix[..n]));
        let unicast_to = Some(dst)
            .filter(MacAddr::is_unicast)
            .and_then(|mac| fdb.lookup(mac));
        match unicast_to {
            Some(entry) => Route::Unicast {
                remote: entry.endpoint,
                socket,
                src_port,
                len: frame.len(),
            },
            None => Route::Flood { src_port },
        }
    }

    /// How many frames from the start of `routes` go in one segmented send (< 2: none).
    fn segmented_run(&self, routes: &[Route]) -> usize {
        if self.gso.is_empty() || self.gso_refused {
            return 0;
        }
        run_len(routes, self.small.max_segment)
    }

    /// Lays out the messages for `frames` (from the start; `routes` are theirs) until
    /// MAX_MSGS or a super-frame; returns how many frames were consumed (sent-to-be, or
    /// dropped and counted).
    fn build(&mut self, frames: &[TxFrame<'_>], routes: &[Route]) -> usize {
        let s = &mut self.scratch;
        s.headers.clear();
        s.iovecs.clear();
        s.addrs.clear();
        s.msg_frame.clear();
        let mut consumed = 0;
        for (i, (frame, route)) in frames.iter().zip(routes).enumerate() {
            let (unicast_to, src_port) = match *route {
                Route::Super => break, // Sent on its own (tx_super), in order.
                Route::TooBig => {
                    consumed = i + 1;
                    if let Some(shared) = &self.too_big {
                        answer_too_big(
                            frame,
                            self.inner_mtu,
                            &mut self.too_big_quote,
                            &mut self.too_big_limit,
                            shared,
                            &self.stats,
                        );
                    } else {
                        self.stats.tx_error(1);
                    }
                    continue;
                }
                Route::Malformed => {
                    consumed = i + 1;
                    self.stats.tx_error(1);
                    continue;
                }
                Route::Unicast {
                    remote, src_port, ..
                } => (Some(remote), src_port),
                Route::Flood { src_port } => (None, src_port),
            };
            let copies = if unicast_to.is_some() {
                1
            } else {
                self.remotes.len()
            };
            if s.addrs.len() + copies > MAX_MSGS {
                break;
            }
            consumed = i + 1;
            if copies == 0 {
                self.stats.tx_no_remote();
                continue;
            }
            let Some(header) = write_header(self.vni, src_port, self.remote_port, frame.len())
            else {
                self.stats.tx_error(1);
                continue;
            };
            s.headers.push(header);
            let (head, body) = (frame.head(), frame.body);
            s.iovecs.push([
                libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: ENCAP_LEN,
                },
                libc::iovec {
                    iov_base: head.as_ptr().cast_mut().cast(),
                    iov_len: head.len(),
                },
                libc::iovec {
                    iov_base: body.as_ptr().cast_mut().cast(),
                    iov_len: body.len(),
                },
            ]);
            match unicast_to {
                Some(ip) => {
                    s.addrs.push(RawAddr::new(SocketAddr::new(ip, 0)));
                    s.msg_frame.push(i);
                }
                None => {
                    for ip in &self.remotes {
                        s.addrs.push(RawAddr::new(SocketAddr::new(*ip, 0)));
                        s.msg_frame.push(i);
                    }
                }
            }
        }
        consumed
    }

    /// Points the message headers at the scratch buffers (after they stopped growing).
    fn link(&mut self) {
        let s = &mut self.scratch;
        s.msgs.clear();
        let mut iov_index = 0;
        let mut last_frame = None;
        for (k, addr) in s.addrs.iter_mut().enumerate() {
            let frame = s.msg_frame[k];
            if last_frame.is_some_and(|f| f != frame) {
                iov_index += 1;
            }
            last_frame = Some(frame);
            let header = &mut s.headers[iov_index];
            let iov = &mut s.iovecs[iov_index];
            iov[0].iov_base = header.as_mut_ptr().cast();
            let mut m = sys::empty_mmsghdr();
            m.msg_hdr.msg_name = std::ptr::from_mut(&mut addr.storage).cast();
            m.msg_hdr.msg_namelen = addr.len;
            m.msg_hdr.msg_iov = iov.as_mut_ptr();
            m.msg_hdr.msg_iovlen = 3;
            s.msgs.push(m);
        }
    }
}

impl PortTx for VxlanTx {
    /// TSO (IPv4 and IPv6) when offloads are on (see `tx_super`); no partial checksums:
    /// the core completes them for ordinary frames.
    fn caps(&self) -> PortCaps {
        self.caps
    }

    /// Answers the sender with ICMP when `answer_too_big` is on (see `too_big`); the switch
    /// has counted the drop.
    fn too_big(&mut self, frame: &TxFrame<'_>, mtu: usize) {
        if let Some(shared) = &self.too_big {
            answer_too_big(
                frame,
                mtu,
                &mut self.too_big_quote,
                &mut self.too_big_limit,
                shared,
                &self.stats,
            );
        }
    }

    fn transmit(&mut self, frames: &[TxFrame<'_>]) -> usize {
        let fdb_handle = Arc::clone(&self.fdb);
        let fdb = lock(&fdb_handle);
        let mut routes = std::mem::take(&mut self.routes);
        routes.clear();
        routes.extend(frames.iter().map(|f| self.route(f, &fdb)));
        let done = self.transmit_routed(frames, &routes, &fdb);
        self.routes = routes;
        done
    }
}

impl VxlanTx {
    /// `transmit` once every frame's route is known: super-frames, segmented runs and the
    /// frames between them (raw `sendmmsg`), in burst order.
    fn transmit_routed(
        &mut self,
        frames: &[TxFrame<'_>],
        routes: &[Route],
        fdb: &RemoteFdb,
    ) -> usize {
        let mut done = 0;
        while let (Some(frame), Some(&route)) = (frames.get(done), routes.get(done)) {
            if route == Route::Super {
                if !self.send_super_frame(frame, fdb) {
                    return done;
                }
                done += 1;
                continue;
            }
            let run = self.segmented_run(&routes[done..]);
            if run >= 2 {
                match self.send_small_run(&frames[done..done + run], route) {
                    RunSent::Done => done += run,
                    RunSent::Full => return done,
                    // Not segmented again: the next turn sends it raw.
                    RunSent::Refused => {}
                }
                continue;
            }
            // The raw path up to the next super-frame or segmented run.
            let limit = frames.len().min(done + MAX_MSGS);
            let mut end = done + 1;
            while end < limit
                && routes[end] != Route::Super
                && self.segmented_run(&routes[end..]) < 2
            {
                end += 1;
            }
            let consumed = self.build(&frames[done..end], &routes[done..end]);
            self.link();
            if let Err(frame) = self.send_built() {
                return done + frame;
            }
            done += consumed;
            if consumed == 0 {
                break;
            }
        }
        done
    }

    /// Sends the built messages in `sendmmsg` calls. `Err(frame)`: the socket buffer is
    /// full, and the frames from `frame` (in the built chunk) on were not accepted.
    fn send_built(&mut self) -> Result<(), usize> {
        let fd = self.socket.as_raw_fd();
        let total = self.scratch.msgs.len();
        let mut sent = 0;
        let mut errors = 0;
        while sent < total {
            self.stats.tx_raw_send();
            // SAFETY: each header points at a scratch address and iovec array, whose
            // entries point at a scratch header and at the frames' head and body, all
            // alive and unmodified for the call.
            match unsafe { sys::sendmmsg(fd, &mut self.scratch.msgs[sent..]) } {
                Ok(0) => break,
                Ok(n) => sent += n,
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EAGAIN | libc::ENOBUFS | libc::EINTR)
                    ) =>
                {
                    break
                }
                // A datagram the kernel refuses (no route, too big): skip it.
                Err(_) => {
                    errors += 1;
                    sent += 1;
                }
            }
        }
        self.stats.tx_error(errors);
        let datagrams = u64::try_from(sent).unwrap_or(u64::MAX) - errors;
        if sent < total {
            // The socket buffer is full: the frames from the first unsent datagram on
            // are not accepted (a frame's replicas are contiguous, so a frame some of
            // whose replicas went is retried whole by the caller, or dropped).
            let frame = self.scratch.msg_frame[sent];
            let whole = distinct_frames(&self.scratch.msg_frame[..sent])
                - usize::from(sent > 0 && self.scratch.msg_frame[sent - 1] == frame);
            self.stats
                .tx(u64::try_from(whole).unwrap_or(u64::MAX), datagrams);
            return Err(frame);
        }
        let frames_sent = distinct_frames(&self.scratch.msg_frame);
        self.stats
            .tx(u64::try_from(frames_sent).unwrap_or(u64::MAX), datagrams);
        Ok(())
    }
}
