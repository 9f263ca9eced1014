//! Responses the daemon sends.

use serde::{Deserialize, Serialize};

use crate::request::CaptureDirection;
use crate::rule::RuleSpec;
use crate::state::{PortKind, PortSettings, State, SwitchSettings};

/// A successful response. Serialized with its name in `kind`.
// One response is built per request and serialized at once: its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Response {
    /// Answer to `hello`.
    Hello {
        /// weftd's version.
        daemon_version: String,
        /// The protocol version.
        protocol_version: u32,
        /// weftd's process id (absent from weftd before 0.2: `weft upgrade` needs it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pid: Option<u32>,
    },
    /// The change was made.
    Done,
    /// Switches.
    Switches {
        /// One per switch.
        switches: Vec<SwitchInfo>,
    },
    /// Ports.
    Ports {
        /// One per port.
        ports: Vec<PortInfo>,
    },
    /// One port in detail.
    Port {
        /// The port.
        port: PortInfo,
        /// Its counters.
        counters: PortCounters,
    },
    /// FDB entries.
    Fdb {
        /// The entries.
        entries: Vec<FdbEntry>,
    },
    /// The directory client's state.
    Directory {
        /// What it is doing.
        status: DirectoryStatus,
    },
    /// A VXLAN port's remote FDB.
    RemoteMacs {
        /// The entries, by MAC.
        entries: Vec<RemoteMacEntry>,
    },
    /// A rule was added.
    RuleAdded {
        /// Its id.
        id: u64,
    },
    /// Rules.
    Rules {
        /// In lookup order.
        rules: Vec<RuleInfo>,
    },
    /// Counters.
    Stats {
        /// Per switch.
        switches: Vec<SwitchStats>,
        /// Per worker thread.
        workers: Vec<WorkerStats>,
    },
    /// A capture started.
    CaptureStarted {
        /// Its id, for `capture_read` and `capture_stop`.
        id: u64,
    },
    /// Captured packets.
    CapturePackets {
        /// Oldest first.
        packets: Vec<CapturedPacket>,
        /// Packets the capture lost because its buffer was full, so far.
        lost: u64,
    },
    /// An upcall subscription started.
    UpcallSubscribed {
        /// Its id, for `upcall_read` and `upcall_unsubscribe`.
        id: u64,
    },
    /// Upcalls.
    Upcalls {
        /// Oldest first.
        upcalls: Vec<UpcallInfo>,
        /// Upcalls the subscription lost because its queue was full, so far.
        lost: u64,
    },
    /// The configuration.
    Config {
        /// As persisted.
        state: State,
    },
    /// What `config_apply` did (or would do, on a dry run).
    Applied {
        /// One line per change.
        changes: Vec<String>,
    },
}

/// A switch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchInfo {
    /// Name.
    pub name: String,
    /// Settings.
    pub settings: SwitchSettings,
    /// Ports.
    pub ports: usize,
    /// FDB entries.
    pub fdb_entries: usize,
    /// Flow rules.
    pub rules: usize,
    /// The worker thread that runs it (its first lane).
    pub worker: usize,
    /// The worker thread of each lane, first lane first.
    #[serde(default)]
    pub workers: Vec<usize>,
}

/// A port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortInfo {
    /// Its switch.
    pub switch: String,
    /// Its name.
    pub name: String,
    /// What it is.
    pub kind: PortKind,
    /// Switch-side options.
    pub options: PortSettings,
    /// MTU.
    pub mtu: u32,
    /// Offloads the port accepts on transmit (`csum`, `tso4`, `tso6`, `uso`).
    pub offloads: Vec<String>,
    /// Set when the port's device could not be created (on a restart, say): why. The port
    /// stays configured (with its rules and FDB entries) and drops what it is sent; absent
    /// when the port works.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
    /// How this weftd got the port's device when it did not open it itself: taken over from
    /// the weftd it replaced (`weft upgrade`), or re-attached to a TAP a weftd that died left
    /// (with how long ago); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attached: Option<String>,
    /// The MTU the port's peer gave its guest (a vhost-user frontend's `NET_SET_MTU`, QEMU
    /// `host_mtu`), once it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_mtu: Option<u32>,
    /// What the port's setup risks, in words: a port whose MTU (or its guest's) is larger
    /// than an overlay port of its switch carries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// A port's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortCounters {
    /// Frames received.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Drops by reason (`reason` → count), zeros left out.
    pub drops: std::collections::BTreeMap<String, u64>,
    /// What the port's device counts beside drops (a vhost-user port's kicks,
    /// notifications and batch sizes per queue), zeros left out.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub device: std::collections::BTreeMap<String, u64>,
}

/// Counters of one switch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchStats {
    /// Name.
    pub name: String,
    /// Batches processed.
    pub batches: u64,
    /// Frames received, all ports.
    pub rx_packets: u64,
    /// FDB entries.
    pub fdb_entries: usize,
    /// Learned FDB entries that moved to another port.
    #[serde(default)]
    pub fdb_moves: u64,
    /// MAC flap episodes (an address held on its port for moving too often).
    #[serde(default)]
    pub mac_flap_episodes: u64,
    /// Flow cache hits.
    pub flow_cache_hits: u64,
    /// Flow cache misses.
    pub flow_cache_misses: u64,
    /// Upcalls queued.
    pub upcalls: u64,
    /// Per port.
    pub ports: Vec<PortStats>,
    /// Per lane, first lane first, for a switch run on several (see `SwitchSettings::lanes`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lanes: Vec<LaneStats>,
}

/// What one lane of a switch exchanged with the others: the FDB entries it learned and
/// told them of, and those they told it of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaneStats {
    /// The lane (0 is the first).
    pub lane: usize,
    /// The worker that runs it.
    pub worker: usize,
    /// Packets it received (a multiqueue port's queues are spread over the lanes); absent
    /// from a weftd before it was counted.
    #[serde(default)]
    pub rx_packets: u64,
    /// Learned entries posted to the other lanes (once per receiving lane).
    pub posted: u64,
    /// Learned entries that could not be posted (a receiving lane's inbox was full).
    pub lost: u64,
    /// Entries from other lanes taken into this lane's FDB.
    pub applied: u64,
    /// Entries from other lanes dropped because ports came or went meanwhile.
    pub stale: u64,
}

/// Counters of one port, with its name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortStats {
    /// Port name.
    pub name: String,
    /// Counters.
    #[serde(flatten)]
    pub counters: PortCounters,
}

/// Counters of one worker thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerStats {
    /// Worker index.
    pub id: usize,
    /// CPU it is pinned to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<usize>,
    /// Fraction of time spent on batches since start, 0 to 1.
    pub busy_fraction: f64,
    /// Batches processed.
    pub batches: u64,
    /// Switches it runs.
    pub switches: Vec<String>,
}

/// An FDB entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FdbEntry {
    /// VLAN.
    pub vlan: u16,
    /// MAC address.
    pub mac: String,
    /// Port name.
    pub port: String,
    /// Configured, not learned.
    pub is_static: bool,
    /// Seconds since last seen (learned entries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub age_secs: Option<u64>,
}

/// The directory client's state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirectoryStatus {
    /// weftd has a `[directory]`.
    pub configured: bool,
    /// The etcd endpoints.
    #[serde(default)]
    pub endpoints: Vec<String>,
    /// This host's name in the directory.
    #[serde(default)]
    pub host: String,
    /// A session with etcd is up.
    #[serde(default)]
    pub connected: bool,
    /// The etcd revision last seen.
    #[serde(default)]
    pub revision: i64,
    /// The lease this host's entries live under (0: none).
    #[serde(default)]
    pub lease: i64,
    /// VNIs carried by the VXLAN ports with `--directory`.
    #[serde(default)]
    pub vnis: Vec<u32>,
    /// Remote tunnel endpoints known, over the VNIs carried.
    #[serde(default)]
    pub vteps: u64,
    /// MAC claims known (this host's included).
    #[serde(default)]
    pub macs: u64,
    /// MAC claims this host has written.
    #[serde(default)]
    pub published: u64,
    /// Writes etcd took.
    #[serde(default)]
    pub writes: u64,
    /// Full re-reads of the VNIs carried.
    #[serde(default)]
    pub resyncs: u64,
    /// Sessions started.
    #[serde(default)]
    pub sessions: u64,
    /// Entries refused, by reason.
    #[serde(default)]
    pub refused: std::collections::BTreeMap<String, u64>,
    /// The last error, while it lasts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// A remote FDB entry: which remote endpoint a MAC lives behind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteMacEntry {
    /// MAC address.
    pub mac: String,
    /// The remote endpoint.
    pub remote: String,
    /// Configured (`source` is `static`).
    pub is_static: bool,
    /// Where the entry comes from: `static`, `directory` or `learned`. Empty from a daemon
    /// that predates it: [`RemoteMacEntry::source_name`] then tells by `is_static`.
    #[serde(default)]
    pub source: String,
    /// Seconds since last seen (learned entries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub age_secs: Option<u64>,
}

impl RemoteMacEntry {
    /// `static`, `directory` or `learned` (from `is_static` when `source` is missing).
    pub fn source_name(&self) -> &str {
        match self.source.as_str() {
            "" if self.is_static => "static",
            "" => "learned",
            named => named,
        }
    }
}

/// A rule with its id and counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleInfo {
    /// Id.
    pub id: u64,
    /// The rule.
    pub rule: RuleSpec,
    /// Packets that matched (on the uncached path and through the cache).
    pub packets: u64,
    /// Bytes that matched.
    pub bytes: u64,
}

/// A captured packet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapturedPacket {
    /// Nanoseconds since the Unix epoch.
    pub time_ns: u64,
    /// Which way it went.
    pub direction: CaptureDirection,
    /// Length on the wire.
    pub orig_len: u32,
    /// The bytes kept, hex-encoded (two lowercase digits per byte).
    pub data: String,
}

/// Why a packet was sent to the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UpcallReason {
    /// A matching rule's `controller` action.
    Action,
}

/// One packet sent to the controller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpcallInfo {
    /// The switch.
    pub switch: String,
    /// The port it came in on.
    pub port: String,
    /// Why it was sent up.
    pub reason: UpcallReason,
    /// The cookie of the rule that sent it, when a rule did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cookie: Option<u64>,
    /// That rule's priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u16>,
    /// The frame's length.
    pub orig_len: u32,
    /// Its bytes (the first 2048 at most), hex-encoded (two lowercase digits per byte).
    pub data: String,
}
