//! A port's ingress policy as the protocol and the state file carry it: port security
//! (the source MACs and IP prefixes a port may send from), storm control (flood rates) and
//! a MAC limit. Each is off by default and then left out of serialized settings, so a
//! configuration that uses none of them reads and writes exactly as before.

use std::fmt;

use serde::{Deserialize, Serialize};
use weft_packet::MacAddr;

use crate::rule::IpPattern;
use crate::text_form;

/// Port security: what a port may send. Off while both lists are empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PortSecuritySettings {
    /// Source MACs the port may use (`xx:xx:xx:xx:xx:xx`); empty: any.
    #[serde(skip_serializing_if = "Vec::is_empty", with = "text_form::mac_list")]
    pub allowed_macs: Vec<MacAddr>,
    /// Source IP prefixes the port may use (`10.0.0.5/32`, `2001:db8::/64`; a plain
    /// address is a host); empty: any.
    #[serde(
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "text_form::allowed_ips"
    )]
    pub allowed_ips: Vec<IpPattern>,
    /// The port may send DHCP and DHCPv6 server messages.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub allow_dhcp_server: bool,
    /// The port may send IPv6 router advertisements.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub allow_router_advertisements: bool,
}

impl PortSecuritySettings {
    /// Whether every field has its default (nothing is written then).
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// Whether frames are checked at all: an allowed MAC or IP is given.
    pub fn is_enabled(&self) -> bool {
        !self.allowed_macs.is_empty() || !self.allowed_ips.is_empty()
    }
}

/// A flood rate: packets and/or bits per second (a frame passes when it fits both).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateSettings {
    /// Packets per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pps: Option<u64>,
    /// Bits per second (of the Ethernet frame).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bps: Option<u64>,
}

impl fmt::Display for RateSettings {
    /// `1000pps`, `10mbit`, `1000pps,10mbit` (the form the CLI takes); bit rates in the
    /// largest unit that divides them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(pps) = self.pps {
            parts.push(format!("{pps}pps"));
        }
        if let Some(bps) = self.bps {
            let unit = [
                (1_000_000_000, "gbit"),
                (1_000_000, "mbit"),
                (1_000, "kbit"),
            ]
            .into_iter()
            .find(|(scale, _)| bps != 0 && bps % scale == 0);
            parts.push(match unit {
                Some((scale, name)) => format!("{}{name}", bps / scale),
                None => format!("{bps}bit"),
            });
        }
        if parts.is_empty() {
            return f.write_str("off");
        }
        f.write_str(&parts.join(","))
    }
}

/// The storm control burst unless one is given, in milliseconds.
pub const DEFAULT_STORM_BURST_MS: u32 = 100;

/// Storm control: how fast a port may flood each kind of frame into its switch. A kind
/// without a rate is unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StormSettings {
    /// Broadcast.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broadcast: Option<RateSettings>,
    /// Multicast other than broadcast.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multicast: Option<RateSettings>,
    /// Unicast to destinations the FDB does not know.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknown_unicast: Option<RateSettings>,
    /// The burst allowed after a quiet spell, as time at the rate, in milliseconds (1 to
    /// 10000; default 100).
    #[serde(skip_serializing_if = "is_default_burst")]
    pub burst_ms: u32,
}

fn is_default_burst(ms: &u32) -> bool {
    *ms == DEFAULT_STORM_BURST_MS
}

impl Default for StormSettings {
    fn default() -> Self {
        StormSettings {
            broadcast: None,
            multicast: None,
            unknown_unicast: None,
            burst_ms: DEFAULT_STORM_BURST_MS,
        }
    }
}

impl StormSettings {
    /// Whether every field has its default (nothing is written then).
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// Whether any kind is limited.
    pub fn is_enabled(&self) -> bool {
        self.broadcast.is_some() || self.multicast.is_some() || self.unknown_unicast.is_some()
    }
}

/// What happens to frames from new sources once a port has learned its limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MacLimitAction {
    /// Forward, but do not learn the source.
    #[default]
    NoLearn,
    /// Drop (counted as `mac_limit`).
    Drop,
}

impl MacLimitAction {
    /// `no_learn` or `drop`, as serialized.
    pub fn name(self) -> &'static str {
        match self {
            MacLimitAction::NoLearn => "no_learn",
            MacLimitAction::Drop => "drop",
        }
    }
}

/// A bound on the MACs one port may teach the FDB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MacLimitSettings {
    /// Most learned entries (1 or more).
    pub max: u32,
    /// What happens beyond (default `no_learn`).
    #[serde(default)]
    pub action: MacLimitAction,
}

#[cfg(test)]
mod tests;
