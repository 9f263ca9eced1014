//! Flow rules as the protocol carries them: ports by name, addresses typed and written as
//! text. The daemon validates and translates them into the switch's `FlowRule`.

use serde::{Deserialize, Serialize};

use crate::text_form;

mod pattern;
pub use pattern::{IpPattern, MacPattern, PatternError};

/// A flow rule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// Higher wins; ties go to the rule added first.
    #[serde(default)]
    pub priority: u16,
    /// What the rule matches (absent fields match anything).
    #[serde(default, rename = "match")]
    pub matches: MatchSpec,
    /// What it does, in order.
    pub actions: Vec<ActionSpec>,
    /// An opaque value for the rule's owner.
    #[serde(default)]
    pub cookie: u64,
}

/// Match fields; each absent one is a wildcard.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatchSpec {
    /// Ingress port name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_port: Option<String>,
    /// Source MAC, `aa:bb:cc:dd:ee:ff` or `aa:bb:cc:dd:ee:ff/ff:ff:ff:00:00:00`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "text_form::src_mac_pattern"
    )]
    pub src_mac: Option<MacPattern>,
    /// Destination MAC, same forms.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "text_form::dst_mac_pattern"
    )]
    pub dst_mac: Option<MacPattern>,
    /// VLAN id (0 = no VLAN).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan: Option<u16>,
    /// EtherType.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ethertype: Option<u16>,
    /// Source prefix, `10.0.0.0/8`, `2001:db8::/32` or a plain address.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "text_form::ip_src_pattern"
    )]
    pub ip_src: Option<IpPattern>,
    /// Destination prefix.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "text_form::ip_dst_pattern"
    )]
    pub ip_dst: Option<IpPattern>,
    /// IP protocol number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_proto: Option<u8>,
    /// L4 source port (ICMP type).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l4_src: Option<u16>,
    /// L4 destination port (ICMP code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l4_dst: Option<u16>,
}

/// An action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ActionSpec {
    /// Send to the named port.
    Output(String),
    /// Send to every port but the ingress one.
    Flood,
    /// Let the learning bridge decide.
    Normal,
    /// Drop.
    Drop,
    /// Tag with this VLAN (stacking on an existing tag).
    PushVlan(u16),
    /// Remove the outer VLAN.
    PopVlan,
    /// Hand a copy to the control plane.
    Controller,
}
