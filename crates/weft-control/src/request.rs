//! Requests a client sends.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};
use weft_packet::MacAddr;

use crate::rule::RuleSpec;
use crate::state::{PortKind, PortSettings, State, SwitchSettings};
use crate::text_form;

/// Which way captured packets went through the port, as seen from the switch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CaptureDirection {
    /// Received from the port.
    In,
    /// Sent to the port.
    Out,
    /// Both.
    #[default]
    Both,
}

/// A request. Serialized with its name in `op`, e.g. `{"op":"port_list","switch":"br0"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Versions of the daemon and the protocol. (Variants without fields are written as
    /// empty structs so that unknown fields are refused for them too.)
    Hello {},
    /// Creates a switch.
    SwitchAdd {
        /// Name.
        name: String,
        /// Settings (defaults when absent).
        #[serde(default)]
        settings: SwitchSettings,
    },
    /// Deletes a switch; with `force` even when it has ports.
    SwitchDel {
        /// Name.
        name: String,
        /// Delete its ports too.
        #[serde(default)]
        force: bool,
    },
    /// Lists switches.
    SwitchList {},
    /// Creates a port on a switch.
    PortAdd {
        /// Switch.
        switch: String,
        /// Port name.
        name: String,
        /// What the port is.
        kind: PortKind,
        /// Switch-side options.
        #[serde(default)]
        options: PortSettings,
        /// Create the switch, with default settings, when it does not exist (VALE's
        /// switches on demand); a switch created so goes away with its last port.
        #[serde(default = "yes", skip_serializing_if = "is_yes")]
        create_switch: bool,
    },
    /// Deletes a port.
    PortDel {
        /// Switch.
        switch: String,
        /// Port name.
        name: String,
    },
    /// Changes a port's switch-side options.
    PortSet {
        /// Switch.
        switch: String,
        /// Port name.
        name: String,
        /// The new options.
        options: PortSettings,
    },
    /// Lists ports (of one switch, or all).
    PortList {
        /// Only this switch.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        switch: Option<String>,
    },
    /// One port in detail, counters included.
    PortShow {
        /// Switch.
        switch: String,
        /// Port name.
        name: String,
    },
    /// FDB entries of a switch.
    FdbShow {
        /// Switch.
        switch: String,
        /// Only this VLAN.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        vlan: Option<u16>,
        /// Only this port.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        port: Option<String>,
    },
    /// Adds a static FDB entry.
    FdbAdd {
        /// Switch.
        switch: String,
        /// VLAN (0 = none).
        #[serde(default)]
        vlan: u16,
        /// MAC address.
        #[serde(with = "text_form::mac")]
        mac: MacAddr,
        /// Port name.
        port: String,
    },
    /// Removes an FDB entry (static or learned).
    FdbDel {
        /// Switch.
        switch: String,
        /// VLAN.
        #[serde(default)]
        vlan: u16,
        /// MAC address.
        #[serde(with = "text_form::mac")]
        mac: MacAddr,
    },
    /// Removes learned (and, unless `dynamic_only`, static) entries.
    FdbFlush {
        /// Switch.
        switch: String,
        /// Only this port's entries.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        port: Option<String>,
        /// Only this VLAN's entries.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        vlan: Option<u16>,
        /// Keep static entries.
        #[serde(default)]
        dynamic_only: bool,
    },
    /// Adds (or moves) a static remote FDB entry of a VXLAN port, while it runs.
    RemoteMacAdd {
        /// Switch.
        switch: String,
        /// The VXLAN port.
        port: String,
        /// MAC address (unicast).
        #[serde(with = "text_form::mac")]
        mac: MacAddr,
        /// The remote endpoint.
        #[serde(deserialize_with = "text_form::remote_ip")]
        remote: IpAddr,
    },
    /// Removes a remote FDB entry (static or learned) of a VXLAN port.
    RemoteMacDel {
        /// Switch.
        switch: String,
        /// The VXLAN port.
        port: String,
        /// MAC address.
        #[serde(with = "text_form::mac")]
        mac: MacAddr,
    },
    /// The directory client's state (`[directory]` in weftd's configuration).
    DirectoryStatus {},
    /// The remote FDB of a VXLAN port: static, directory and learned entries.
    RemoteMacShow {
        /// Switch.
        switch: String,
        /// The VXLAN port.
        port: String,
        /// Only this MAC's entry.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            with = "text_form::opt_mac"
        )]
        mac: Option<MacAddr>,
    },
    /// Adds a flow rule.
    RuleAdd {
        /// Switch.
        switch: String,
        /// The rule.
        rule: RuleSpec,
    },
    /// Adds a route: a flow rule and, with `remote`, the static remote FDB entry that sends
    /// the rule's destination MAC to that endpoint through the VXLAN port the rule outputs
    /// to. Both go in or neither does (a route needs a destination MAC and one `output`
    /// action to have a remote).
    RouteAdd {
        /// Switch.
        switch: String,
        /// The rule.
        rule: RuleSpec,
        /// The remote endpoint for the rule's destination MAC.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "text_form::remote_ip_opt"
        )]
        remote: Option<IpAddr>,
    },
    /// Removes a flow rule by id.
    RuleDel {
        /// Switch.
        switch: String,
        /// Rule id (from `rule_add` or `rule_list`).
        id: u64,
    },
    /// Lists flow rules with their counters.
    RuleList {
        /// Switch.
        switch: String,
    },
    /// Counters: per switch, per port (drops by reason), per worker.
    Stats {
        /// Only this switch.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        switch: Option<String>,
    },
    /// Starts capturing a port's packets; returns a capture id.
    CaptureStart {
        /// Switch.
        switch: String,
        /// Port name.
        port: String,
        /// Direction.
        #[serde(default)]
        direction: CaptureDirection,
        /// Bytes kept per packet (default 65535).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        snaplen: Option<u32>,
    },
    /// Takes up to `max` captured packets, waiting up to `wait_ms` for the first one.
    CaptureRead {
        /// Capture id.
        id: u64,
        /// Most packets to return (default 256).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max: Option<u32>,
        /// Longest wait for a packet, in ms (default 0, at most 5000).
        #[serde(default)]
        wait_ms: u32,
    },
    /// Stops a capture.
    CaptureStop {
        /// Capture id.
        id: u64,
    },
    /// Subscribes to the packets `controller` rule actions send up (upcalls); returns a
    /// subscription id. The subscription ends with the connection, with
    /// `upcall_unsubscribe`, or when it is not read for 30 s.
    UpcallSubscribe {
        /// Only this switch's upcalls (default: every switch's, later ones included).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        switch: Option<String>,
        /// Upcalls the subscription holds before it loses them (default 1024, at most 8192).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        queue: Option<u32>,
    },
    /// Takes up to `max` upcalls, waiting up to `wait_ms` for the first one.
    UpcallRead {
        /// Subscription id.
        id: u64,
        /// Most upcalls to return (default 256).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max: Option<u32>,
        /// Longest wait for an upcall, in ms (default 0, at most 5000).
        #[serde(default)]
        wait_ms: u32,
    },
    /// Ends a subscription.
    UpcallUnsubscribe {
        /// Subscription id.
        id: u64,
    },
    /// Sends a frame (OpenFlow's packet-out): out of port `output` as it is, or into the
    /// switch as if port `in_port` had received it (rules and learning bridge decide where
    /// it goes — the bridge alone with `normal`; its source is not learned). Exactly one of
    /// the two.
    PacketOut {
        /// Switch.
        switch: String,
        /// The port to send the frame out of.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<String>,
        /// The port the frame enters the switch by.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        in_port: Option<String>,
        /// With `in_port`: skip the rules, to the learning bridge straight (OpenFlow's
        /// `NORMAL`), so that a frame a rule sent up goes on as the switch would have sent
        /// it without meeting that rule again.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        normal: bool,
        /// The whole Ethernet frame, hex-encoded (two digits per byte).
        frame: String,
    },
    /// The whole configuration, as persisted.
    ConfigShow {},
    /// Makes the configuration equal to `state` (validated as a whole first: an invalid
    /// state changes nothing). With `dry_run`, only validates and reports.
    ConfigApply {
        /// The desired configuration.
        state: State,
        /// Only check.
        #[serde(default)]
        dry_run: bool,
    },
}

/// `serde`'s default for a flag that is on unless a request says otherwise.
fn yes() -> bool {
    true
}

/// Such a flag left out when it is on: requests encode as they did before it existed.
fn is_yes(flag: &bool) -> bool {
    *flag
}
