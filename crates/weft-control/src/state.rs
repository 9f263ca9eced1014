//! The configuration weftd keeps and persists: switches, their ports, static FDB entries and
//! flow rules. The same types appear in requests (`switch_add`, `port_add`, ...), in
//! `config_show` / `config_apply`, and in the state file.

use std::net::{IpAddr, SocketAddr};

use serde::{Deserialize, Serialize};
use weft_packet::{MacAddr, Vni};

use crate::rule::RuleSpec;
use crate::text_form;

mod policy;
pub use policy::{
    MacLimitAction, MacLimitSettings, PortSecuritySettings, RateSettings, StormSettings,
    DEFAULT_STORM_BURST_MS,
};
mod vhost;
pub use vhost::{VhostDispatch, VhostModeError, VhostNotify, MAX_PERIOD_US};

/// Everything weftd restores on start.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    /// Format version of this document (1).
    #[serde(default = "state_version")]
    pub version: u32,
    /// The switches, by name order.
    #[serde(default)]
    pub switches: Vec<SwitchState>,
}

fn state_version() -> u32 {
    1
}

/// One switch and what hangs off it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchState {
    /// Name (1 to 32 of `A-Za-z0-9-_.`).
    pub name: String,
    /// Settings.
    #[serde(default)]
    pub settings: SwitchSettings,
    /// Ports, in creation order.
    #[serde(default)]
    pub ports: Vec<PortState>,
    /// Static FDB entries.
    #[serde(default)]
    pub static_macs: Vec<StaticMac>,
    /// Flow rules, in insertion order (which breaks priority ties).
    #[serde(default)]
    pub rules: Vec<RuleSpec>,
    /// Created by `port add` for its port (not by `switch add`): goes away with its last
    /// port, unless rules are left on it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub on_demand: bool,
}

/// Tunables of a switch; every field has a default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SwitchSettings {
    /// Frames per batch (1 to 1024).
    pub batch_size: usize,
    /// Most FDB entries.
    pub fdb_max_entries: usize,
    /// Most learned FDB entries per port.
    pub fdb_max_per_port: usize,
    /// FDB ageing time in seconds.
    pub fdb_ageing_secs: u64,
    /// Most flow rules.
    pub max_rules: usize,
    /// Flow cache entries.
    pub flow_cache_capacity: usize,
    /// Worker threads that run the switch at once (1 to 16, at most the workers weftd
    /// has): each lane polls its share of the ports' queue pairs (`weft_switch::lanes`).
    pub lanes: usize,
    /// MAC flap dampening: a learned address that moves between ports more than this many
    /// times in a second is held where it is for `mac_move_hold_secs`. 0 (the default):
    /// off, every move is learned.
    #[serde(skip_serializing_if = "is_zero")]
    pub mac_move_limit: u32,
    /// How long a flapping address is held, in seconds (1 to 3600; default 10).
    #[serde(skip_serializing_if = "is_default_mac_move_hold")]
    pub mac_move_hold_secs: u32,
}

/// How long a flapping MAC is held unless told otherwise, in seconds.
pub const DEFAULT_MAC_MOVE_HOLD_SECS: u32 = 10;

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_default_mac_move_hold(secs: &u32) -> bool {
    *secs == DEFAULT_MAC_MOVE_HOLD_SECS
}

impl Default for SwitchSettings {
    fn default() -> Self {
        SwitchSettings {
            batch_size: 128,
            fdb_max_entries: 8192,
            fdb_max_per_port: 1024,
            fdb_ageing_secs: 300,
            max_rules: 4096,
            flow_cache_capacity: 4096,
            lanes: 1,
            mac_move_limit: 0,
            mac_move_hold_secs: DEFAULT_MAC_MOVE_HOLD_SECS,
        }
    }
}

/// One port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortState {
    /// Name, unique on its switch (1 to 64 characters, no ':' or whitespace).
    pub name: String,
    /// What the port is.
    pub kind: PortKind,
    /// Switch-side options.
    #[serde(default)]
    pub options: PortSettings,
}

/// Which side of a vhost-user socket weft takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VhostMode {
    /// weft creates the socket; the frontend connects.
    #[default]
    Server,
    /// The frontend creates the socket (QEMU `server=on`); weft connects and reconnects.
    Client,
}

impl VhostMode {
    /// True for [`VhostMode::Server`] (the default, left out of serialized state).
    pub fn is_server(&self) -> bool {
        *self == VhostMode::Server
    }

    /// `server` or `client`.
    pub fn name(self) -> &'static str {
        match self {
            VhostMode::Server => "server",
            VhostMode::Client => "client",
        }
    }
}

/// How an AF_XDP port's XDP program is attached to its interface.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum XdpAttach {
    /// In the driver where it can be (native XDP), else generic.
    #[default]
    Auto,
    /// In the driver only (veth and most physical NICs): refused where it cannot be.
    Native,
    /// Generic XDP, after the kernel made an skb: every driver, slower.
    Generic,
}

impl XdpAttach {
    /// The default.
    pub fn is_auto(&self) -> bool {
        *self == XdpAttach::Auto
    }

    /// Its name, as the protocol writes it.
    pub fn as_str(&self) -> &'static str {
        match self {
            XdpAttach::Auto => "auto",
            XdpAttach::Native => "native",
            XdpAttach::Generic => "generic",
        }
    }
}

/// Which side of a memif socket weft takes: the same two sides as a vhost-user socket
/// (`server`: weft listens and maps the regions its client hands over — memif's "master";
/// `client`: weft connects, allocates the memory, and reconnects — memif's "slave").
pub type MemifRole = VhostMode;

/// The kinds of port weftd can create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum PortKind {
    /// A TAP device (created, or attached to when it exists).
    Tap {
        /// Device name; defaults to the port name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ifname: Option<String>,
        /// Network namespace (a name under /run/netns) to move the device into.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        netns: Option<String>,
        /// Queues (multiqueue TAP), 1 to 16.
        #[serde(default = "one")]
        queues: u16,
        /// MTU of the device.
        #[serde(default = "default_mtu")]
        mtu: u32,
        /// Negotiate checksum and segmentation offloads with the kernel.
        #[serde(default = "yes")]
        offloads: bool,
    },
    /// An existing interface (veth or physical) used through an AF_PACKET socket.
    AfPacket {
        /// The interface.
        ifname: String,
    },
    /// An existing interface (veth or physical) used through an AF_XDP socket, an XDP
    /// program redirecting the frames of one receive queue to it.
    AfXdp {
        /// The interface.
        ifname: String,
        /// The receive queue whose frames weft takes (the others reach the kernel).
        #[serde(default, skip_serializing_if = "is_zero")]
        queue: u32,
        /// How the XDP program is attached.
        #[serde(default, skip_serializing_if = "XdpAttach::is_auto")]
        attach: XdpAttach,
    },
    /// A vhost-user socket a VM or DPDK application (the frontend) connects to, or (client
    /// mode) listens on for weft to connect to.
    VhostUser {
        /// Socket path; defaults to `<runtime_dir>/vhost/<switch>-<port>.sock`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        socket: Option<String>,
        /// Who listens: weft (`server`, the default) or the frontend (`client`: weft
        /// connects, and reconnects after either side restarts).
        #[serde(default, skip_serializing_if = "VhostMode::is_server")]
        mode: VhostMode,
        /// MTU of the port.
        #[serde(default = "default_mtu")]
        mtu: u32,
        /// Dispatch mode; absent: adaptive.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dispatch: Option<VhostDispatch>,
        /// Notification policy; absent: immediate.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        notify: Option<VhostNotify>,
        /// Queue pairs offered (virtio-net `MQ` above 1), 1 to 16; all served by the
        /// switch's worker.
        #[serde(default = "one", skip_serializing_if = "is_one_queue_pair")]
        queues: u16,
    },
    /// A memif interface: the shared-memory packet interface of VPP, libmemif and DPDK's
    /// `net_memif`, over a Unix socket.
    Memif {
        /// Socket path; defaults to `<runtime_dir>/vhost/<switch>-<port>.memif.sock`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        socket: Option<String>,
        /// The interface id both sides are configured with (a socket can carry several).
        #[serde(default)]
        id: u32,
        /// Who listens: weft (`server`, the default) or the peer (`client`: weft connects
        /// and reconnects).
        #[serde(default, skip_serializing_if = "MemifRole::is_server")]
        role: MemifRole,
        /// The secret the client presents (at most 24 bytes); absent: none asked.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        secret: Option<String>,
        /// Queue pairs (1 to 16); a server takes as many as its client asks, up to this.
        #[serde(default = "one", skip_serializing_if = "is_one_queue_pair")]
        queues: u16,
        /// MTU of the port.
        #[serde(default = "default_mtu")]
        mtu: u32,
    },
    /// A VXLAN tunnel endpoint (one VNI) over a UDP socket.
    Vxlan {
        /// Local endpoint IP address (IPv4 or IPv6).
        #[serde(deserialize_with = "text_form::local_ip")]
        local: IpAddr,
        /// The VNI (0 to 2^24 - 1), written as a number.
        #[serde(with = "text_form::vni")]
        vni: Vni,
        /// Remote endpoint IP addresses for head-end replication.
        #[serde(
            default,
            skip_serializing_if = "Vec::is_empty",
            deserialize_with = "text_form::remote_ips"
        )]
        remotes: Vec<IpAddr>,
        /// Network namespace (a name under /run/netns) to open the socket in.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        netns: Option<String>,
        /// Learn MAC → endpoint and accept datagrams from endpoints not in `remotes`.
        #[serde(default)]
        learning: bool,
        /// UDP port (4789 by default).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        port: Option<u16>,
        /// Static remote FDB entries: frames to these MACs go to one remote only.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        remote_macs: Vec<RemoteMac>,
        /// Seconds a learned remote FDB entry lives without being seen again (1 to 86400).
        #[serde(
            default = "default_remote_ageing",
            skip_serializing_if = "is_default_remote_ageing"
        )]
        remote_ageing: u32,
        /// Take the VNI's remote endpoints and MACs from the directory (weftd's
        /// `[directory]`) and publish this host's there.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        directory: bool,
    },
    /// A TCP link to another weftd: Ethernet frames in one TCP connection. Exactly one of
    /// `listen` and `connect`.
    TcpLink {
        /// Accept the peer's connections on this address (`IP:PORT`).
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "text_form::listen_addr"
        )]
        listen: Option<SocketAddr>,
        /// Connect to the peer at this address (`IP:PORT`), again and again when lost.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "text_form::connect_addr"
        )]
        connect: Option<SocketAddr>,
        /// Network namespace (a name under /run/netns) to open the sockets in.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        netns: Option<String>,
        /// The link id both ends must be configured with (a peer with another is cut off).
        #[serde(default)]
        link_id: u32,
        /// MTU of the port.
        #[serde(default = "default_mtu")]
        mtu: u32,
        /// Carry super-frames and pending checksums across unsegmented.
        #[serde(default = "yes")]
        offloads: bool,
        /// A file holding the pre-shared key both ends prove they know at connection start
        /// (at least 32 bytes, used raw); absent: the link is unauthenticated. Read when the
        /// port opens.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key_file: Option<String>,
    },
}

/// A static remote FDB entry of a VXLAN port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteMac {
    /// MAC address (unicast), `xx:xx:xx:xx:xx:xx`.
    #[serde(with = "text_form::mac")]
    pub mac: MacAddr,
    /// The remote endpoint it lives behind: one of the port's remotes (or any address of
    /// the underlay's family when the port learns).
    #[serde(deserialize_with = "text_form::remote_ip")]
    pub remote: IpAddr,
}

fn one() -> u16 {
    1
}

fn is_one_queue_pair(queues: &u16) -> bool {
    *queues == 1
}

/// The remote FDB ageing time a VXLAN port has unless told otherwise, in seconds.
pub const DEFAULT_REMOTE_AGEING_SECS: u32 = 300;

/// The longest remote FDB ageing time a VXLAN port takes, in seconds (a day).
pub const MAX_REMOTE_AGEING_SECS: u32 = 86_400;

fn default_remote_ageing() -> u32 {
    DEFAULT_REMOTE_AGEING_SECS
}

fn is_default_remote_ageing(secs: &u32) -> bool {
    *secs == DEFAULT_REMOTE_AGEING_SECS
}

fn default_mtu() -> u32 {
    1500
}
fn yes() -> bool {
    true
}

/// Switch-side options of a port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PortSettings {
    /// VLAN mode.
    pub vlan: VlanMode,
    /// Flood unknown unicast to this port.
    pub flood_unknown_unicast: bool,
    /// Learn source addresses seen on this port.
    pub learning: bool,
    /// Port security (anti-spoofing); off unless an allowed MAC or IP is given.
    #[serde(skip_serializing_if = "PortSecuritySettings::is_default")]
    pub security: PortSecuritySettings,
    /// Storm control; off unless a rate is given.
    #[serde(skip_serializing_if = "StormSettings::is_default")]
    pub storm: StormSettings,
    /// A bound on the MACs the port may teach the FDB; absent: only the switch's
    /// `fdb_max_per_port`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mac_limit: Option<MacLimitSettings>,
}

impl Default for PortSettings {
    fn default() -> Self {
        PortSettings {
            vlan: VlanMode::Plain,
            flood_unknown_unicast: true,
            learning: true,
            security: PortSecuritySettings::default(),
            storm: StormSettings::default(),
            mac_limit: None,
        }
    }
}

/// A port's VLAN mode.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case", deny_unknown_fields)]
pub enum VlanMode {
    /// Frames pass as they are.
    #[default]
    Plain,
    /// Untagged on the wire, in VLAN `vlan`.
    Access {
        /// The VLAN (1 to 4094).
        vlan: u16,
    },
    /// Tagged on the wire for `vlans`; untagged frames belong to `native` when set.
    Trunk {
        /// Allowed VLANs (1 to 4094).
        vlans: Vec<u16>,
        /// The VLAN of untagged frames.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        native: Option<u16>,
    },
}

/// A static FDB entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticMac {
    /// VLAN (0 = none).
    #[serde(default)]
    pub vlan: u16,
    /// MAC address, `xx:xx:xx:xx:xx:xx`.
    #[serde(with = "text_form::mac")]
    pub mac: MacAddr,
    /// Port name.
    pub port: String,
}
