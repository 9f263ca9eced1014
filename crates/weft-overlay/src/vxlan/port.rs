//! The VXLAN port: [`VxlanPort::open`] gives a receive half ([`VxlanRx`]) and a transmit half
//! ([`VxlanTx`]) for a weft switch, and the port's counters.
//!
//! Thread ownership: each half has one owner (the worker polling the receive half; whoever
//! holds the switch's lock on the transmit half). They share the remote FDB behind a mutex,
//! taken once per burst by the transmit half and, only when learning, once per burst by the
//! receive half (VALE's one critical section per destination per batch); and the flood list,
//! each half keeping a copy it refreshes at the start of a burst when the list changed.

use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, MutexGuard};

use weft_switch::PortCaps;

use crate::error::OverlayError;
use crate::vxlan::config::{VxlanConfig, MAX_GSO_SOCKETS};
use crate::vxlan::decap::DecapRules;
use crate::vxlan::fdb_handle::RemoteFdbHandle;
use crate::vxlan::flood_list::FloodList;
use crate::vxlan::remote_fdb::RemoteFdb;
use crate::vxlan::rx::VxlanRx;
use crate::vxlan::stats::OverlayStats;
use crate::vxlan::too_big::{TooBigQueue, TooBigShared};
use crate::vxlan::tx::{TxSetup, VxlanTx};
use crate::vxlan::{sys, udp_offload};
use crate::{netns, MAX_REMOTES};

/// Largest TCP super-frame the port takes (a 64 KB IP packet, Ethernet header and two tags).
pub const MAX_SUPER_FRAME: usize = 65_535 + 22;
/// Smallest inner MTU (IPv4's minimum).
const MIN_MTU: usize = 68;
/// Largest inner MTU: a 64 KB outer IPv6 packet's room.
const MAX_INNER_MTU: usize = 65_535 - 22 - 16 - 40;
/// A receive slot with GRO on: the largest UDP payload.
const GRO_SLOT_LEN: usize = 65_536;

/// An opened VXLAN port, before it is split into halves.
pub struct VxlanPort {
    pub(crate) fdb: Arc<Mutex<RemoteFdb>>,
    pub(crate) flood: Arc<FloodList>,
    pub(crate) rx: VxlanRx,
    pub(crate) tx: VxlanTx,
    stats: Arc<OverlayStats>,
    pub(crate) mtu: usize,
    paths: SocketPaths,
}

/// How an opened port's datagrams go through the kernel: fixed when it opens, decided by
/// the configuration, the process's capabilities and what the kernel accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketPaths {
    /// Datagrams leave through the raw socket; false: through the bound UDP sockets
    /// (no `CAP_NET_RAW`), with fewer source ports for the underlay to balance on.
    pub raw_send: bool,
    /// TCP super-frames leave as `UDP_SEGMENT` sends, one system call each.
    pub udp_gso: bool,
    /// The receive socket takes coalesced datagrams (`UDP_GRO`).
    pub udp_gro: bool,
}

impl SocketPaths {
    /// The names `weft port show` lists beside a port's offloads: `udp_gso`, `udp_gro` when
    /// on, then the send path, `raw_socket` or `bound_sockets`.
    pub fn names(&self) -> Vec<&'static str> {
        let mut names = Vec::new();
        if self.udp_gso {
            names.push("udp_gso");
        }
        if self.udp_gro {
            names.push("udp_gro");
        }
        names.push(if self.raw_send {
            "raw_socket"
        } else {
            "bound_sockets"
        });
        names
    }
}

/// The inner MTU: the underlay route's MTU minus the overlay's cost when known and asked
/// for, else the configured one; kept in the range the configuration accepts.
fn inner_mtu(config: &VxlanConfig, underlay: Option<usize>) -> usize {
    match underlay {
        Some(route) if config.mtu_from_underlay => route
            .saturating_sub(config.overhead())
            .clamp(MIN_MTU, MAX_INNER_MTU),
        _ => config.mtu,
    }
}

impl VxlanPort {
    /// Opens the sockets (inside `config.netns` when set): a UDP socket bound to the local
    /// endpoint for receiving, a raw UDP socket for sending (needs `CAP_NET_RAW`; without it,
    /// datagrams leave through UDP sockets bound to `gso_sockets` source ports instead, so
    /// fewer distinct source ports for the underlay to balance on), and with offloads the
    /// bound sockets for `UDP_SEGMENT`.
    pub fn open(config: &VxlanConfig) -> Result<VxlanPort, OverlayError> {
        let fdb = new_fdb(config)?;
        let (udp, raw, gso, underlay) = netns::run_in(config.netns.as_deref(), || {
            let udp = sys::udp_socket(config.local)?;
            let raw = raw_socket_if_allowed(config)?;
            let mut gso = Vec::new();
            if config.offload || raw.is_none() {
                // Spread where ports are tried so that ports opened together rarely collide.
                let mut next =
                    u16::try_from(std::process::id() % 16_384).unwrap_or(0) ^ config.local.port();
                for _ in 0..config.gso_sockets.clamp(1, MAX_GSO_SOCKETS) {
                    gso.push(udp_offload::gso_socket(
                        config.local.ip(),
                        config.ttl,
                        config.dscp,
                        &mut next,
                    )?);
                }
            }
            let underlay = config
                .mtu_from_underlay
                .then(|| {
                    let routes = config
                        .remotes
                        .iter()
                        .chain(config.static_fdb.iter().map(|e| &e.1));
                    routes
                        .filter_map(|r| udp_offload::route_mtu(config.local.ip(), *r))
                        .min()
                })
                .flatten();
            Ok((udp, raw, gso, underlay))
        })?;
        let mtu = inner_mtu(config, underlay);
        let sockets = Sockets { udp, raw, gso, mtu };
        Ok(VxlanPort::assemble(config, fdb, sockets))
    }

    /// The port around its sockets (opened, or adopted from another process): socket
    /// options, buffers, the halves.
    pub(crate) fn assemble(config: &VxlanConfig, fdb: RemoteFdb, sockets: Sockets) -> VxlanPort {
        let Sockets { udp, raw, gso, mtu } = sockets;
        if config.socket_buffer > 0 {
            udp_offload::size_buffer(&udp, true, config.socket_buffer);
            if let Some(raw) = &raw {
                udp_offload::size_buffer(raw, false, config.socket_buffer);
            }
            for (fd, _) in &gso {
                udp_offload::size_buffer(fd, false, config.socket_buffer);
            }
        }
        let gro = config.offload && udp_offload::enable_gro(&udp);
        if !config.offload {
            // An adopted socket may have it on from a configuration that had offloads.
            udp_offload::disable_gro(&udp);
        }
        // Best effort: without it the socket's overflows are only in /proc/net/udp.
        let _ = udp_offload::enable_drop_count(&udp);
        let fdb = Arc::new(Mutex::new(fdb));
        let flood = Arc::new(FloodList::new(config.local.ip(), &config.remotes));
        let stats = Arc::new(OverlayStats::default());
        let mut caps = PortCaps::plain(mtu);
        let offload = config.offload && !gso.is_empty();
        if offload {
            caps.tso4 = true;
            caps.tso6 = true;
            // UDP super-frames go the same way, one inner datagram per outer one (the switch
            // never hands over one whose datagrams exceed the MTU).
            caps.uso = true;
            caps.max_gso_frame_len = MAX_SUPER_FRAME;
        }
        let rules = DecapRules {
            vni: config.vni,
            strict_reserved: config.strict_reserved,
            max_frame_len: mtu + 22,
        };
        let batch = config.batch.clamp(1, weft_switch::port::MAX_BATCH);
        // With GRO a slot takes a whole coalesced buffer (at most one UDP payload).
        let slot_len = if gro {
            GRO_SLOT_LEN
        } else {
            weft_packet::vxlan::HEADER_LEN + mtu + 22
        };
        let too_big = config
            .answer_too_big
            .then(|| Arc::new(TooBigShared::default()));
        let rx = VxlanRx {
            socket: Arc::new(udp),
            rules,
            flood: flood.follow(true),
            learning: config.learning,
            gro,
            merge: crate::vxlan::rx_coalesce::MergeKinds::ALL,
            socket_drops_seen: 0,
            fdb: Arc::clone(&fdb),
            stats: Arc::clone(&stats),
            slot_len,
            buffers: vec![0; slot_len * batch],
            lent: Vec::with_capacity(batch),
            slots_used: 0,
            received: Vec::with_capacity(batch),
            next: (0, 0),
            scratch: weft_sys::MmsgBatch::new(batch, batch),
            batch,
            too_big: too_big.clone(),
            answers: TooBigQueue::default(),
            parking: Arc::default(),
            parked: false,
        };
        let paths = SocketPaths {
            raw_send: raw.is_some(),
            udp_gso: offload,
            udp_gro: gro,
        };
        let setup = TxSetup {
            raw,
            gso,
            offload,
            caps,
            inner_mtu: mtu,
            too_big,
        };
        let tx = VxlanTx::new(setup, config, Arc::clone(&fdb), &flood, Arc::clone(&stats));
        VxlanPort {
            fdb,
            flood,
            rx,
            tx,
            stats,
            mtu,
            paths,
        }
    }

    /// How the port's datagrams go through the kernel.
    pub fn socket_paths(&self) -> SocketPaths {
        self.paths
    }

    /// A handle on the port's remote FDB and flood list, for changing static and directory
    /// entries, and the directory's VTEPs, while it runs.
    pub fn remote_fdb(&self) -> RemoteFdbHandle {
        RemoteFdbHandle::new(Arc::clone(&self.fdb), Arc::clone(&self.flood))
    }

    /// The inner MTU the port takes (largest L3 packet): what the switch's other ports should
    /// advertise to their peers so that nothing is dropped as too big.
    pub fn mtu(&self) -> usize {
        self.mtu
    }

    /// The halves and the counters.
    pub fn split(self) -> (VxlanRx, VxlanTx, Arc<OverlayStats>) {
        (self.rx, self.tx, self.stats)
    }

    /// The local endpoint the receive socket is bound to (its port resolved).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.rx.socket.local_addr().ok()
    }
}

/// The sockets of a port, opened or adopted, and its inner MTU.
pub(crate) struct Sockets {
    pub(crate) udp: std::net::UdpSocket,
    pub(crate) raw: Option<OwnedFd>,
    pub(crate) gso: Vec<(OwnedFd, u16)>,
    pub(crate) mtu: usize,
}

/// A checked configuration's remote FDB, its static entries in.
pub(crate) fn new_fdb(config: &VxlanConfig) -> Result<RemoteFdb, OverlayError> {
    config.validate()?;
    if config.remotes.len() > MAX_REMOTES {
        return Err(OverlayError::Config(format!(
            "{} remotes, at most {MAX_REMOTES}",
            config.remotes.len()
        )));
    }
    let mut fdb = RemoteFdb::new(config.max_static, config.max_learned);
    fdb.set_ageing(config.remote_ageing);
    fdb.set_max_directory(config.max_directory);
    fdb.set_local(config.local.ip());
    for (mac, ip) in &config.static_fdb {
        fdb.insert_static(*mac, *ip)?;
    }
    Ok(fdb)
}

/// The inner MTUs a port may have.
pub(crate) const INNER_MTU_RANGE: std::ops::RangeInclusive<usize> = MIN_MTU..=MAX_INNER_MTU;

pub(crate) fn lock(fdb: &Mutex<RemoteFdb>) -> MutexGuard<'_, RemoteFdb> {
    // A panic elsewhere while holding the lock leaves a table that is still consistent
    // (every method keeps its invariants before returning).
    fdb.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The raw sending socket, or `None` when this process may not open one (no `CAP_NET_RAW`:
/// an unprivileged weftd, or a container that drops it). Any other failure is an error.
fn raw_socket_if_allowed(config: &VxlanConfig) -> Result<Option<OwnedFd>, OverlayError> {
    match sys::raw_udp_socket(config.local.ip(), config.ttl, config.dscp) {
        Ok(fd) => Ok(Some(fd)),
        Err(OverlayError::Socket { source, .. })
            if matches!(source.raw_os_error(), Some(libc::EPERM | libc::EACCES)) =>
        {
            tracing::info!(
                local = %config.local,
                "no CAP_NET_RAW: VXLAN datagrams leave through UDP sockets bound to {} source ports",
                config.gso_sockets.clamp(1, MAX_GSO_SOCKETS)
            );
            Ok(None)
        }
        Err(e) => Err(e),
    }
}
