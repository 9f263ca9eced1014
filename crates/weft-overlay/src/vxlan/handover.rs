//! Handing a live VXLAN port to another weftd (a zero-gap upgrade).
//!
//! weftd takes a [`VxlanHandoverSource`] from the port when it opens it, before the port is
//! split into halves ([`VxlanPort::handover_source`], like [`VxlanPort::remote_fdb`]). At
//! hand-over time, with the workers paused at a batch boundary, [`VxlanHandoverSource::handover`]
//! duplicates the port's sockets and describes its state; the new weftd passes both to
//! [`VxlanPort::adopt`] with the same configuration. Nothing in the old port changes: if the
//! hand-over is abandoned, weftd resumes its workers and the port goes on.
//!
//! Carried: the bound receive socket (datagrams that arrive meanwhile wait in its queue, and
//! the address is never unbound), the sending sockets as they are (the raw one and the bound
//! UDP ones, so flows keep their source ports and ECMP paths), the inner MTU the port
//! advertised, the learned remote FDB entries with their age, the directory's entries and
//! VTEPs, and datagrams the receive half had read but not yet delivered (GRO buffers longer
//! than a batch). Static entries come from the configuration. Not carried: counters (they
//! start again from zero), and ICMP too-big answers queued but not yet delivered (the sender
//! retries).
//!
//! Descriptor order (each named by its index in the description, every one exactly once):
//! the receive socket, then the raw sending socket when there is one, then the bound UDP
//! sending sockets in the port's order.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use weft_packet::MacAddr;

use crate::error::OverlayError;
use crate::handover::{
    check_socket, dup, hex_bytes, FdTable, HandoverError, RxParking, SocketKind, HANDOVER_VERSION,
};
use crate::vxlan::config::{usable_endpoint, VxlanConfig, MAX_GSO_SOCKETS};
use crate::vxlan::flood_list::FloodList;
use crate::vxlan::port::{lock, new_fdb, Sockets, VxlanPort, INNER_MTU_RANGE};
use crate::vxlan::remote_fdb::{EntrySource, RemoteFdb};
use crate::vxlan::rx::{Received, RxLeftover};
use crate::vxlan::{sys, udp_offload};

/// The description of a VXLAN port handed over, sent as JSON beside its descriptors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VxlanHandover {
    /// [`HANDOVER_VERSION`].
    pub version: u32,
    /// Where the receive socket is bound.
    pub local: SocketAddr,
    /// The receive socket's descriptor (index into the descriptors passed).
    pub receive_fd: usize,
    /// The raw sending socket's, when the port has one.
    pub raw_fd: Option<usize>,
    /// The bound UDP sending sockets.
    pub bound: Vec<BoundSocket>,
    /// The inner MTU the port advertised.
    pub mtu: usize,
    /// Learned remote FDB entries.
    pub learned: Vec<LearnedRemote>,
    /// The directory's remote FDB entries.
    pub directory: Vec<DirectoryRemote>,
    /// The directory's VTEPs on the flood list.
    pub directory_vteps: Vec<IpAddr>,
    /// Datagrams received but not delivered to the switch yet.
    pub pending: Vec<PendingDatagrams>,
}

/// A bound UDP sending socket and its port (the source port of what it sends).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundSocket {
    /// Its descriptor's index.
    pub fd: usize,
    /// The UDP port it is bound to.
    pub port: u16,
}

/// A learned remote FDB entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LearnedRemote {
    /// The MAC.
    pub mac: [u8; 6],
    /// The remote endpoint it lives behind.
    pub endpoint: IpAddr,
    /// Milliseconds since it was last seen.
    pub age_ms: u64,
}

/// A directory remote FDB entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirectoryRemote {
    /// The MAC.
    pub mac: [u8; 6],
    /// The remote endpoint.
    pub endpoint: IpAddr,
}

/// One received buffer not fully delivered: a datagram, or the rest of several coalesced
/// by GRO (`segment` bytes each, the last maybe shorter).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingDatagrams {
    /// The remote endpoint it came from.
    pub source: IpAddr,
    /// Length of each datagram in `bytes`.
    pub segment: usize,
    /// The kernel cut it short (its slot was too small).
    pub truncated: bool,
    /// The datagrams' bytes.
    #[serde(with = "hex_bytes")]
    pub bytes: Vec<u8>,
}

/// What weftd keeps of a VXLAN port to hand it over later (see the [module docs](self)).
/// It holds no socket open: once the port is closed, [`Self::handover`] says so.
#[derive(Debug, Clone)]
pub struct VxlanHandoverSource {
    receive: Weak<UdpSocket>,
    raw: Option<Weak<OwnedFd>>,
    bound: Vec<(Weak<OwnedFd>, u16)>,
    parking: Weak<RxParking<RxLeftover>>,
    fdb: Weak<Mutex<RemoteFdb>>,
    flood: Weak<FloodList>,
    mtu: usize,
}

impl VxlanPort {
    /// What weftd keeps to hand this port over later (take it before [`VxlanPort::split`]).
    pub fn handover_source(&self) -> VxlanHandoverSource {
        VxlanHandoverSource {
            receive: Arc::downgrade(&self.rx.socket),
            raw: self.tx.raw.as_ref().map(Arc::downgrade),
            bound: self
                .tx
                .gso
                .iter()
                .map(|(fd, port)| (Arc::downgrade(fd), *port))
                .collect(),
            parking: Arc::downgrade(&self.rx.parking),
            fdb: Arc::downgrade(&self.fdb),
            flood: Arc::downgrade(&self.flood),
            mtu: self.mtu,
        }
    }

    /// Takes over a port another process handed over: `handover` and `fds` as
    /// [`VxlanHandoverSource::handover`] gave them, `config` the port's configuration. The
    /// descriptors are checked (sockets of the right kind, bound where `config` says) and
    /// the state restored; anything that does not hold is refused, and every descriptor
    /// passed is closed.
    pub fn adopt(
        config: &VxlanConfig,
        handover: VxlanHandover,
        fds: Vec<OwnedFd>,
    ) -> Result<VxlanPort, OverlayError> {
        crate::handover::check_version(handover.version)?;
        let fdb = new_fdb(config)?;
        let mut table = FdTable::new(fds);
        let sockets = adopt_sockets(config, &handover, &mut table)?;
        table.finish()?;
        let pending = check_pending(config, &handover.pending)?;
        let mut port = VxlanPort::assemble(config, fdb, sockets);
        port.rx.restore(&pending)?;
        restore_fdb(config, &port, &handover)?;
        Ok(port)
    }
}

impl VxlanHandoverSource {
    /// Duplicates the port's sockets and describes its state. Call it with the workers
    /// paused at a batch boundary (else [`HandoverError::WorkersRunning`], or datagrams the
    /// receive half reads afterwards are missing); from any thread. It stops nothing and
    /// changes nothing: the port goes on as before when the hand-over is abandoned.
    pub fn handover(&self) -> Result<(VxlanHandover, Vec<OwnedFd>), OverlayError> {
        let closed = || OverlayError::from(HandoverError::PortClosed);
        let parking = self.parking.upgrade().ok_or_else(closed)?;
        let fdb = self.fdb.upgrade().ok_or_else(closed)?;
        let flood = self.flood.upgrade().ok_or_else(closed)?;
        let pending = parking
            .inspect(|l| {
                l.pending()
                    .map(|(r, bytes)| PendingDatagrams {
                        source: r.source,
                        segment: r.segment,
                        truncated: r.truncated,
                        bytes: bytes.to_vec(),
                    })
                    .collect()
            })?
            .unwrap_or_default();
        let now = Instant::now();
        let (learned, directory) = {
            let fdb = lock(&fdb);
            let learned = fdb
                .learned_ages(now)
                .into_iter()
                .map(|(mac, endpoint, age)| LearnedRemote {
                    mac: mac.0,
                    endpoint,
                    age_ms: u64::try_from(age.as_millis()).unwrap_or(u64::MAX),
                })
                .collect();
            let directory = fdb
                .entries()
                .filter(|(_, e, _)| e.source == EntrySource::Directory)
                .map(|(mac, e, _)| DirectoryRemote {
                    mac: mac.0,
                    endpoint: e.endpoint,
                })
                .collect();
            (learned, directory)
        };
        let (sockets, fds) = self.sockets()?;
        let description = VxlanHandover {
            learned,
            directory,
            directory_vteps: flood.directory_remotes(),
            pending,
            ..sockets
        };
        Ok((description, fds))
    }

    /// The port's sockets alone, described as a hand-over with nothing learned and nothing
    /// pending: what outlives a crash of the process (weftd keeps it in systemd's file
    /// descriptor store), so that a restarted weftd carries on with the same bound
    /// addresses and the datagrams queued meanwhile. It pauses and changes nothing; any
    /// thread, any time.
    pub fn sockets_record(&self) -> Result<(VxlanHandover, Vec<OwnedFd>), OverlayError> {
        self.sockets()
    }

    /// Duplicates of the sockets and a description naming them, with no state.
    fn sockets(&self) -> Result<(VxlanHandover, Vec<OwnedFd>), OverlayError> {
        let closed = || OverlayError::from(HandoverError::PortClosed);
        let receive = self.receive.upgrade().ok_or_else(closed)?;
        let local = receive
            .local_addr()
            .map_err(|source| OverlayError::Socket {
                call: "getsockname",
                source,
            })?;
        let mut fds = vec![dup(&*receive, "receive socket")?];
        let raw_fd = match &self.raw {
            Some(raw) => {
                let raw = raw.upgrade().ok_or_else(closed)?;
                fds.push(dup(&*raw, "raw sending socket")?);
                Some(fds.len() - 1)
            }
            None => None,
        };
        let mut bound = Vec::with_capacity(self.bound.len());
        for (fd, port) in &self.bound {
            let fd = fd.upgrade().ok_or_else(closed)?;
            fds.push(dup(&*fd, "bound sending socket")?);
            bound.push(BoundSocket {
                fd: fds.len() - 1,
                port: *port,
            });
        }
        let description = VxlanHandover {
            version: HANDOVER_VERSION,
            local,
            receive_fd: 0,
            raw_fd,
            bound,
            mtu: self.mtu,
            learned: Vec::new(),
            directory: Vec::new(),
            directory_vteps: Vec::new(),
            pending: Vec::new(),
        };
        Ok((description, fds))
    }
}

fn family(ip: IpAddr) -> i32 {
    SocketKind::family_of(&SocketAddr::new(ip, 0))
}

fn wrong_address(
    role: &'static str,
    expected: impl ToString,
    found: impl ToString,
) -> HandoverError {
    HandoverError::WrongAddress {
        role,
        expected: expected.to_string(),
        found: found.to_string(),
    }
}

fn getsockname(socket: &UdpSocket, role: &'static str) -> Result<SocketAddr, HandoverError> {
    socket.local_addr().map_err(|e| HandoverError::WrongSocket {
        role,
        found: format!("no local address: {e}"),
    })
}

/// The descriptors, checked against the configuration.
fn adopt_sockets(
    config: &VxlanConfig,
    h: &VxlanHandover,
    table: &mut FdTable,
) -> Result<Sockets, OverlayError> {
    let ip = config.local.ip();
    let udp_kind = SocketKind {
        family: family(ip),
        ty: libc::SOCK_DGRAM,
        protocol: libc::IPPROTO_UDP,
        listening: false,
    };
    let role = "receive socket";
    let fd = table.take(h.receive_fd)?;
    check_socket(&fd, role, udp_kind)?;
    let udp = UdpSocket::from(fd);
    let at = getsockname(&udp, role)?;
    if at.ip() != ip || (config.local.port() != 0 && at.port() != config.local.port()) {
        return Err(wrong_address(role, config.local, at).into());
    }
    udp.set_nonblocking(true)
        .map_err(|source| OverlayError::Socket {
            call: "O_NONBLOCK",
            source,
        })?;
    let raw = match h.raw_fd {
        Some(i) => {
            let role = "raw sending socket";
            let fd = table.take(i)?;
            let kind = SocketKind {
                ty: libc::SOCK_RAW,
                ..udp_kind
            };
            check_socket(&fd, role, kind)?;
            let socket = UdpSocket::from(fd);
            let at = getsockname(&socket, role)?;
            if at.ip() != ip {
                return Err(wrong_address(role, ip, at.ip()).into());
            }
            let fd = OwnedFd::from(socket);
            sys::set_ttl_dscp(&fd, ip, config.ttl, config.dscp)?;
            Some(fd)
        }
        None => None,
    };
    if h.bound.len() > MAX_GSO_SOCKETS {
        return Err(HandoverError::BadState(format!(
            "{} bound sending sockets, at most {MAX_GSO_SOCKETS}",
            h.bound.len()
        ))
        .into());
    }
    let mut gso = Vec::with_capacity(h.bound.len());
    for b in &h.bound {
        let role = "bound sending socket";
        let fd = table.take(b.fd)?;
        check_socket(&fd, role, udp_kind)?;
        let socket = UdpSocket::from(fd);
        let at = getsockname(&socket, role)?;
        if at != SocketAddr::new(ip, b.port) {
            return Err(wrong_address(role, SocketAddr::new(ip, b.port), at).into());
        }
        let fd = OwnedFd::from(socket);
        sys::set_ttl_dscp(&fd, ip, config.ttl, config.dscp)?;
        gso.push((fd, b.port));
    }
    if gso.is_empty() && (raw.is_none() || config.offload) {
        return Err(HandoverError::Mismatch(
            "no bound sending socket, and the port needs some (offloads, or no raw socket)".into(),
        )
        .into());
    }
    if !INNER_MTU_RANGE.contains(&h.mtu) {
        return Err(HandoverError::BadState(format!("inner MTU {}", h.mtu)).into());
    }
    // Carried sockets keep the options they were opened with (the filter that drops what
    // a sending socket would receive, GRO, the drop count, buffers); the port sets its
    // options again when it assembles.
    let _ = udp_offload::enable_drop_count(&udp);
    Ok(Sockets {
        udp,
        raw,
        gso,
        mtu: h.mtu,
    })
}

/// The pending datagrams, checked for what every receive half takes (the slots are checked
/// when they are restored).
fn check_pending<'a>(
    config: &VxlanConfig,
    pending: &'a [PendingDatagrams],
) -> Result<Vec<(Received, &'a [u8])>, HandoverError> {
    pending
        .iter()
        .map(|p| {
            if p.segment == 0 || p.bytes.is_empty() {
                return Err(HandoverError::BadState(format!(
                    "a pending buffer of {} bytes in segments of {}",
                    p.bytes.len(),
                    p.segment
                )));
            }
            if family(p.source) != family(config.local.ip()) {
                return Err(HandoverError::BadState(format!(
                    "a pending datagram from {}, another address family",
                    p.source
                )));
            }
            let r = Received {
                start: 0,
                len: p.bytes.len(),
                segment: p.segment,
                truncated: p.truncated,
                source: p.source,
            };
            Ok((r, p.bytes.as_slice()))
        })
        .collect()
}

/// Puts the carried entries in the adopted port's remote FDB and flood list.
fn restore_fdb(
    config: &VxlanConfig,
    port: &VxlanPort,
    h: &VxlanHandover,
) -> Result<(), OverlayError> {
    let local = config.local.ip();
    if let Some(bad) = h
        .learned
        .iter()
        .find(|l| !usable_endpoint(local, l.endpoint))
    {
        return Err(HandoverError::BadState(format!(
            "a learned entry behind {}, not a remote of this port",
            bad.endpoint
        ))
        .into());
    }
    let directory: Vec<(MacAddr, Option<IpAddr>)> = h
        .directory
        .iter()
        .map(|d| (MacAddr(d.mac), Some(d.endpoint)))
        .collect();
    let now = Instant::now();
    {
        let mut fdb = lock(&port.fdb);
        fdb.tick(now);
        // Refused ones (bad endpoints, past the bound) are counted in what it returns and
        // left out, as from the directory itself.
        fdb.apply_directory(&directory);
        for l in &h.learned {
            let age = Duration::from_millis(l.age_ms);
            fdb.restore_learned(MacAddr(l.mac), l.endpoint, age, now);
        }
    }
    if !h.directory_vteps.is_empty() {
        port.flood.set_directory(&h.directory_vteps)?;
    }
    Ok(())
}
