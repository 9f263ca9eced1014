//! The transmit half: each frame's route worked out once per burst (its remote endpoint by
//! destination MAC, or every remote — head-end replication — for broadcast, multicast and
//! unknown unicast; its flow's source port), then the burst handed to the kernel in order:
//! on the raw socket (or, without `CAP_NET_RAW`, the bound UDP sockets), one `sendmmsg` per up
//! to 256 datagrams (`tx_raw`); with offloads on,
//! runs of equal-length frames to one remote in one `UDP_SEGMENT` send each
//! (`tx_small_gso`), and super-frames segmented by the port (`tx_super`).

use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};

use weft_packet::{MacAddr, Vni};
use weft_switch::{PortCaps, PortTx, TxFrame};

use crate::vxlan::config::VxlanConfig;
use crate::vxlan::encap::{flow_hash, source_port, HASH_PREFIX};
use crate::vxlan::flood_list::{FloodCopy, FloodList};
use crate::vxlan::port::lock;
use crate::vxlan::remote_fdb::RemoteFdb;
use crate::vxlan::stats::OverlayStats;
use crate::vxlan::too_big::{answer, l3_offset, RateLimit, TooBigShared};
use crate::vxlan::tx_burst::Burst;
use crate::vxlan::tx_raw::TxScratch;
use crate::vxlan::tx_small_gso::{run_len, Route, RunSent, SmallGsoScratch};

/// Most datagrams per `sendmmsg` (and so most frames per chunk).
pub(crate) const MAX_MSGS: usize = 256;
/// ICMP answers to oversize frames: at most this many per second, in bursts of
/// `TOO_BIG_BURST` (like the kernel's `icmp_ratelimit` defaults: ~1 per ms, burst 50, but
/// smaller: a switch answers for many senders).
const TOO_BIG_RATE: u32 = 100;
const TOO_BIG_BURST: u32 = 10;
/// Room for a super-frame's header blocks (a VXLAN header and a copy of the inner headers per
/// segment; the payloads are not copied): 512 segments (`gso::MAX_SEGMENTS`) of up to 384
/// header bytes.
const SEGMENTS_LEN: usize = 192 << 10;

/// The transmit half.
pub struct VxlanTx {
    /// The raw sending socket; `None` when the process may not open one (no `CAP_NET_RAW`):
    /// ordinary datagrams then leave through `gso`, each socket's port its source port.
    pub(crate) raw: Option<Arc<OwnedFd>>,
    /// UDP sockets bound to source ports, and those ports: for segmentation offload, and for
    /// every datagram when there is no raw socket; empty when neither needs them.
    pub(crate) gso: Vec<(Arc<OwnedFd>, u16)>,
    /// Segmentation offload (`UDP_SEGMENT`) is on.
    pub(crate) offload: bool,
    pub(crate) vni: Vni,
    pub(crate) remote_port: u16,
    pub(crate) caps: PortCaps,
    /// The flood list (head-end replication), refreshed at the start of each burst.
    pub(crate) flood: FloodCopy,
    fdb: Arc<Mutex<RemoteFdb>>,
    pub(crate) stats: Arc<OverlayStats>,
    pub(crate) scratch: TxScratch,
    /// A super-frame made contiguous, and its segments' header blocks (`tx_super`).
    pub(crate) linear: Vec<u8>,
    pub(crate) segments: Vec<u8>,
    /// The largest L3 packet the overlay carries (the caps' MTU).
    pub(crate) inner_mtu: usize,
    /// Oversize frames' answers: the prefix quoted, the rate limit, the queue to the receive
    /// half.
    pub(crate) too_big_quote: Vec<u8>,
    pub(crate) too_big_limit: RateLimit,
    pub(crate) too_big: Option<Arc<TooBigShared>>,
    /// The kernel refused `UDP_SEGMENT` (a device without checksum offload): segments are
    /// sent one `sendmsg` each from then on.
    pub(crate) gso_refused: bool,
    /// Each frame's route and completed checksum, for the burst being sent.
    burst: Burst,
    /// Segmented sends of ordinary frames.
    pub(crate) small: SmallGsoScratch,
}

/// Answers an oversize frame (rate limited); counts it either way.
pub(crate) fn answer_too_big(
    frame: &TxFrame<'_>,
    mtu: usize,
    quote: &mut [u8],
    limit: &mut RateLimit,
    shared: &TooBigShared,
    stats: &OverlayStats,
) {
    stats.too_big();
    let quoted = frame.copy_prefix(quote);
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
    if let Some(len) = answer(&quote[..quoted], mtu, &mut slot.0) {
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
pub(crate) fn pick_source_port(gso: &[(Arc<OwnedFd>, u16)], hash: u64) -> (usize, u16) {
    let n = u64::try_from(gso.len()).unwrap_or(u64::MAX);
    if n == 0 {
        return (0, source_port(hash));
    }
    let index = usize::try_from((hash >> 32) % n).unwrap_or(0);
    (index, gso.get(index).map_or(0, |g| g.1))
}

/// What `VxlanPort::open` prepared for the transmit half.
pub(crate) struct TxSetup {
    /// The raw sending socket, if the process may have one.
    pub(crate) raw: Option<OwnedFd>,
    /// The bound UDP sockets and their ports.
    pub(crate) gso: Vec<(OwnedFd, u16)>,
    /// Segmentation offload is on (configured, and the sockets for it are open).
    pub(crate) offload: bool,
    pub(crate) caps: PortCaps,
    pub(crate) inner_mtu: usize,
    pub(crate) too_big: Option<Arc<TooBigShared>>,
}

impl VxlanTx {
    pub(crate) fn new(
        setup: TxSetup,
        config: &VxlanConfig,
        fdb: Arc<Mutex<RemoteFdb>>,
        flood: &Arc<FloodList>,
        stats: Arc<OverlayStats>,
    ) -> VxlanTx {
        let TxSetup {
            raw,
            gso,
            offload,
            caps,
            inner_mtu,
            too_big,
        } = setup;
        // Partial checksums are completed per burst (`tx_burst`): the switch then hands
        // every frame of a burst in one call (it sends frames the port cannot take one by
        // one), so that runs can form.
        let caps = PortCaps {
            partial_csum: true,
            ..caps
        };
        VxlanTx {
            raw: raw.map(Arc::new),
            gso: gso
                .into_iter()
                .map(|(fd, port)| (Arc::new(fd), port))
                .collect(),
            offload,
            vni: config.vni,
            remote_port: config.remote_port,
            caps,
            flood: flood.follow(false),
            fdb,
            stats,
            scratch: TxScratch::new(),
            linear: if offload {
                vec![0; crate::MAX_SUPER_FRAME]
            } else {
                Vec::new()
            },
            segments: if offload {
                vec![0; SEGMENTS_LEN]
            } else {
                Vec::new()
            },
            gso_refused: false,
            burst: Burst::new(MAX_MSGS),
            small: SmallGsoScratch::new(config.vni),
            inner_mtu,
            too_big_quote: vec![0; crate::vxlan::too_big::QUOTE_PREFIX],
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
        // The first bytes, copied for the MAC lookup and flow hash.
        let n = frame.copy_prefix(&mut prefix);
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
            .and_then(|mac| fdb.lookup(mac))
            .map(|entry| entry.endpoint);
        // A flood to a port's only remote is one datagram to it, as a unicast hit is (no
        // replication): the common two-host overlay with no static MACs and no learning.
        let single_remote = match self.flood.remotes() {
            [only] => Some(*only),
            _ => None,
        };
        match unicast_to.or(single_remote) {
            Some(remote) => Route::Unicast {
                remote,
                socket,
                src_port,
                len: frame.len(),
            },
            None => Route::Flood { socket, src_port },
        }
    }

    /// How many frames from the start of `routes` go in one segmented send (< 2: none).
    fn segmented_run(&self, routes: &[Route]) -> usize {
        if !self.offload || self.gso_refused {
            return 0;
        }
        run_len(routes, self.small.max_segment)
    }
}

impl PortTx for VxlanTx {
    /// TSO (IPv4 and IPv6) when offloads are on (see `tx_super`); partial checksums,
    /// completed by the port (`tx_burst`).
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
        if self.flood.refresh() {
            // Room for one frame's replicas in one chunk: allocation only on change.
            self.scratch.fit(self.flood.remotes().len());
        }
        let fdb_handle = Arc::clone(&self.fdb);
        let fdb = lock(&fdb_handle);
        let mut burst = std::mem::take(&mut self.burst);
        burst.prepare(frames, |f| self.route(f, &fdb));
        let done = self.transmit_routed(frames, &burst, &fdb);
        self.burst = burst;
        done
    }
}

impl VxlanTx {
    /// `transmit` once every frame's route is known: super-frames, segmented runs and the
    /// frames between them (raw `sendmmsg`), in burst order.
    fn transmit_routed(&mut self, frames: &[TxFrame<'_>], burst: &Burst, fdb: &RemoteFdb) -> usize {
        let routes = &burst.routes;
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
                match self.send_small_run(&frames[done..done + run], burst, done) {
                    RunSent::Done => {
                        done += run;
                        continue;
                    }
                    RunSent::Full => return done,
                    // At least its first frame goes raw, below: the loop always advances.
                    RunSent::Refused => {}
                }
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
            let consumed = self.build(&frames[done..end], burst, done);
            if let Err(frame) = self.send_built(&frames[done..end], burst, done) {
                return done + frame;
            }
            done += consumed;
            if consumed == 0 {
                break;
            }
        }
        done
    }
}
