//! What a VXLAN port is configured with.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use weft_packet::vxlan::{OVERHEAD_IPV4, OVERHEAD_IPV6, VXLAN_PORT};
use weft_packet::{MacAddr, Vni};

use crate::error::OverlayError;

/// Default socket buffer: about four times the bandwidth-delay product of a 10 Gbit/s
/// underlay with a 1 ms round trip.
pub const DEFAULT_SOCKET_BUFFER: usize = 4 << 20;
/// Default number of segmentation-offload sockets (source ports).
pub const DEFAULT_GSO_SOCKETS: usize = 8;
/// Most segmentation-offload sockets.
pub const MAX_GSO_SOCKETS: usize = 64;

/// Whether a port on `local` may have `ip` as a remote: the same address family, a unicast
/// address, not its own.
pub(crate) fn usable_endpoint(local: IpAddr, ip: IpAddr) -> bool {
    let broadcast = matches!(ip, IpAddr::V4(v4) if v4.is_broadcast());
    ip.is_ipv4() == local.is_ipv4()
        && ip != local
        && !ip.is_unspecified()
        && !ip.is_multicast()
        && !broadcast
}

/// The configuration of one VXLAN port (one VNI, one local endpoint).
#[derive(Debug, Clone)]
pub struct VxlanConfig {
    /// Local tunnel endpoint: the address and UDP port to receive on (4789 by default).
    /// Its family is the underlay's (IPv4 or IPv6).
    pub local: SocketAddr,
    /// UDP destination port of remote endpoints.
    pub remote_port: u16,
    /// The VNI: one L2 domain, i.e. one weft switch.
    pub vni: Vni,
    /// Remote endpoints for head-end replication (broadcast, multicast, unknown unicast).
    /// The directory's VTEPs join them while the port runs
    /// ([`crate::RemoteFdbHandle::set_directory_remotes`]).
    pub remotes: Vec<IpAddr>,
    /// Static remote FDB entries.
    pub static_fdb: Vec<(MacAddr, IpAddr)>,
    /// Learn MAC → endpoint from received traffic, and accept datagrams from endpoints not
    /// in `remotes` (off by default, RFC 7348 §7).
    pub learning: bool,
    /// Most static FDB entries.
    pub max_static: usize,
    /// Most learned FDB entries.
    pub max_learned: usize,
    /// Most directory FDB entries (set through [`crate::RemoteFdbHandle`] by the control
    /// plane's directory).
    pub max_directory: usize,
    /// How long a learned entry lives without being seen again.
    pub remote_ageing: std::time::Duration,
    /// Drop datagrams with reserved VXLAN bits set (RFC 7348 says ignore them).
    pub strict_reserved: bool,
    /// Outer TTL / hop limit (None: the kernel's default).
    pub ttl: Option<u8>,
    /// Outer DSCP (0..=63).
    pub dscp: u8,
    /// Inner MTU (largest L3 packet in a frame). Defaults to 1500 minus the overlay's cost;
    /// with `mtu_from_underlay`, used only when no route to a remote is known.
    pub mtu: usize,
    /// Derive the inner MTU from the underlay when the port opens: the smallest MTU of the
    /// routes to the remotes minus the overlay's cost (50 bytes over IPv4, 70 over IPv6),
    /// so that no encapsulated frame needs fragmenting. [`crate::VxlanPort::mtu`] tells the
    /// result (weftd advertises it to the port's peers).
    pub mtu_from_underlay: bool,
    /// Answer frames too big for the overlay with ICMP "fragmentation needed" (IPv4 with
    /// DF) / ICMPv6 "packet too big" toward their sender (see [`crate::vxlan::too_big`]): the
    /// switch hands the port the frames its MTU refuses through `PortTx::too_big`. Off, they
    /// are only the switch's counted drops.
    pub answer_too_big: bool,
    /// Datagrams per `recvmmsg`.
    pub batch: usize,
    /// Network namespace to open the sockets in (`/run/netns/NAME`), if not this one.
    pub netns: Option<PathBuf>,
    /// Send and receive buffer of each socket, in bytes (0: the kernel's default). Size it to
    /// the bandwidth-delay product of the underlay (10 Gbit/s × 1 ms ≈ 1.25 MB) with room for
    /// bursts; as root the `SO_*BUFFORCE` options exceed `net.core.[rw]mem_max`.
    pub socket_buffer: usize,
    /// UDP offloads: accept TCP super-frames (TSO) from the switch and send each as one
    /// `UDP_SEGMENT` system call; receive with `UDP_GRO`.
    pub offload: bool,
    /// UDP sockets used for segmentation offload, each with its own source port; a flow's
    /// hash picks one (the source-port entropy RFC 7348 §5 asks for).
    pub gso_sockets: usize,
}

impl VxlanConfig {
    /// A port on `local` (port 4789 when `local`'s port is 0) for `vni`, no remotes yet.
    pub fn new(local: SocketAddr, vni: Vni) -> VxlanConfig {
        let mut local = local;
        if local.port() == 0 {
            local.set_port(VXLAN_PORT);
        }
        let overhead = if local.is_ipv4() {
            OVERHEAD_IPV4
        } else {
            OVERHEAD_IPV6
        };
        VxlanConfig {
            local,
            remote_port: VXLAN_PORT,
            vni,
            remotes: Vec::new(),
            static_fdb: Vec::new(),
            learning: false,
            max_static: 4096,
            max_learned: 4096,
            max_directory: crate::vxlan::remote_fdb::directory::DEFAULT_MAX_DIRECTORY,
            remote_ageing: crate::vxlan::remote_fdb::DEFAULT_AGEING,
            strict_reserved: false,
            ttl: None,
            dscp: 0,
            mtu: 1500 - overhead,
            mtu_from_underlay: true,
            answer_too_big: true,
            batch: weft_switch::port::DEFAULT_BATCH,
            netns: None,
            socket_buffer: DEFAULT_SOCKET_BUFFER,
            offload: true,
            gso_sockets: DEFAULT_GSO_SOCKETS,
        }
    }

    /// The overlay's cost per frame: outer IP, UDP, VXLAN and inner Ethernet headers.
    pub fn overhead(&self) -> usize {
        if self.local.is_ipv4() {
            OVERHEAD_IPV4
        } else {
            OVERHEAD_IPV6
        }
    }

    /// Adds a remote endpoint.
    pub fn remote(mut self, endpoint: IpAddr) -> Self {
        self.remotes.push(endpoint);
        self
    }

    /// Adds a static FDB entry.
    pub fn static_mac(mut self, mac: MacAddr, endpoint: IpAddr) -> Self {
        self.static_fdb.push((mac, endpoint));
        self
    }

    /// Sets the network namespace.
    pub fn netns(mut self, path: impl Into<PathBuf>) -> Self {
        self.netns = Some(path.into());
        self
    }

    /// Checks the configuration.
    pub fn validate(&self) -> Result<(), OverlayError> {
        let same_family = |ip: &IpAddr| ip.is_ipv4() == self.local.is_ipv4();
        if let Some(bad) = self.remotes.iter().find(|r| !same_family(r)) {
            return Err(OverlayError::Config(format!(
                "remote {bad} is not in the local endpoint's address family"
            )));
        }
        if let Some((_, bad)) = self.static_fdb.iter().find(|(_, r)| !same_family(r)) {
            return Err(OverlayError::Config(format!(
                "static FDB endpoint {bad} is not in the local endpoint's address family"
            )));
        }
        if self.dscp > 63 {
            return Err(OverlayError::Config(format!("DSCP {} > 63", self.dscp)));
        }
        if self.ttl == Some(0) {
            return Err(OverlayError::Config("TTL 0".into()));
        }
        if !(68..=65_535 - 22 - 16 - 40).contains(&self.mtu) {
            return Err(OverlayError::Config(format!(
                "MTU {} out of range",
                self.mtu
            )));
        }
        if self.remote_ageing.is_zero() {
            return Err(OverlayError::Config("remote ageing time 0".into()));
        }
        if self.offload && !(1..=MAX_GSO_SOCKETS).contains(&self.gso_sockets) {
            return Err(OverlayError::Config(format!(
                "{} segmentation-offload sockets: use 1 to {MAX_GSO_SOCKETS}",
                self.gso_sockets
            )));
        }
        if self.static_fdb.len() > self.max_static {
            return Err(OverlayError::FdbFull(self.max_static));
        }
        Ok(())
    }
}
