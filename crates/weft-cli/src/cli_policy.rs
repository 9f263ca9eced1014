//! The command line of a port's ingress policy (port security, storm control, MAC limit),
//! part of `weft port add` and `weft port set`: the value forms and their parsers.

use clap::{Args, ValueEnum};
use weft_control::rule::IpPattern;
use weft_control::state::{MacLimitAction, RateSettings};
use weft_control::MacAddr;

use crate::cli::parse_mac;

/// A port's ingress policy options (flattened into the switch-side port options; boxed,
/// as they are many).
#[derive(Debug, Args, Default, PartialEq, Eq)]
pub struct PortPolicyArgs {
    /// The only source MACs the port may send from (comma-separated or
    /// repeated; replaces the port's list). Frames from other sources are dropped.
    #[arg(
        long = "allowed-mac",
        value_name = "MAC[,MAC...]",
        value_delimiter = ',',
        value_parser = parse_mac,
        help_heading = "Port security"
    )]
    pub allowed_macs: Option<Vec<MacAddr>>,
    /// The only source IP addresses the port may send from, as addresses
    /// (10.0.0.5) or prefixes (10.0.0.0/24, 2001:db8::/64), comma-separated or repeated;
    /// replaces the port's list. ARP and neighbour discovery are checked against it too.
    #[arg(
        long = "allowed-ip",
        value_name = "PREFIX[,PREFIX...]",
        value_delimiter = ',',
        value_parser = parse_prefix,
        help_heading = "Port security"
    )]
    pub allowed_ips: Option<Vec<IpPattern>>,
    /// With port security on: let the port answer as a DHCP (and DHCPv6) server.
    #[arg(
        long,
        conflicts_with = "no_allow_dhcp_server",
        help_heading = "Port security"
    )]
    pub allow_dhcp_server: bool,
    /// With port security on: drop DHCP server messages from the port (the default).
    #[arg(long, help_heading = "Port security")]
    pub no_allow_dhcp_server: bool,
    /// With port security on: let the port send IPv6 router advertisements.
    #[arg(long, conflicts_with = "no_allow_ra", help_heading = "Port security")]
    pub allow_ra: bool,
    /// With port security on: drop router advertisements from the port (the default).
    #[arg(long, help_heading = "Port security")]
    pub no_allow_ra: bool,
    /// Turn port security off: clear the allowed MACs and IPs and both --allow flags.
    #[arg(
        long,
        conflicts_with_all = ["allowed_macs", "allowed_ips", "allow_dhcp_server", "allow_ra"],
        help_heading = "Port security"
    )]
    pub no_port_security: bool,
    /// Most broadcast the port may send, as 1000pps, 500kbit, 10mbit,
    /// 2gbit, 1000pps,10mbit (both) or off. Frames over it are dropped.
    #[arg(long, value_name = "RATE", value_parser = parse_rate, help_heading = "Storm control")]
    pub storm_broadcast: Option<StormRate>,
    /// Most multicast (other than broadcast) the port may send (RATE as
    /// for --storm-broadcast).
    #[arg(long, value_name = "RATE", value_parser = parse_rate, help_heading = "Storm control")]
    pub storm_multicast: Option<StormRate>,
    /// Most unicast to unknown destinations the port may send (RATE as for
    /// --storm-broadcast).
    #[arg(long, value_name = "RATE", value_parser = parse_rate, help_heading = "Storm control")]
    pub storm_unknown_unicast: Option<StormRate>,
    /// The burst allowed after a quiet spell, as milliseconds at the rate (1 to 10000; a
    /// new port has 100).
    #[arg(long, value_name = "MS", help_heading = "Storm control")]
    pub storm_burst_ms: Option<u32>,
    /// Turn storm control off: no rate for any kind, the default burst.
    #[arg(
        long,
        conflicts_with_all = ["storm_broadcast", "storm_multicast", "storm_unknown_unicast", "storm_burst_ms"],
        help_heading = "Storm control"
    )]
    pub no_storm_control: bool,
    /// The most MACs the port may teach the FDB (1 or more), below the switch's
    /// --fdb-per-port.
    #[arg(
        long,
        value_name = "N",
        conflicts_with = "no_mac_limit",
        help_heading = "MAC limit"
    )]
    pub mac_limit: Option<u32>,
    /// What frames from new MACs get once the port is at its --mac-limit: no-learn
    /// (forwarded, not learned) or drop [default: no-learn].
    #[arg(
        long,
        value_enum,
        value_name = "ACTION",
        conflicts_with = "no_mac_limit",
        help_heading = "MAC limit"
    )]
    pub mac_limit_action: Option<MacLimitActionArg>,
    /// Remove the port's MAC limit.
    #[arg(long, help_heading = "MAC limit")]
    pub no_mac_limit: bool,
}

/// The rate forms `--storm-*` take, for messages and help.
pub const RATE_FORMS: &str = "packets per second (1000pps), a bit rate (500kbit, 10mbit, \
                              2gbit), both (1000pps,10mbit), or off";

/// A `--storm-*` value: a rate, or `off` (no limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StormRate(pub Option<RateSettings>);

/// Parses `1000pps`, `10mbit`, `1000pps,10mbit` or `off` (units `pps`, `bit`, `kbit`,
/// `mbit`, `gbit`; decimal multiples).
pub fn parse_rate(s: &str) -> Result<StormRate, String> {
    let text = s.trim().to_ascii_lowercase();
    let bad = |why: &str| format!("'{s}' is not a rate{why}: give {RATE_FORMS}");
    if text == "off" {
        return Ok(StormRate(None));
    }
    let mut rate = RateSettings::default();
    for part in text.split(',') {
        let digits = part.bytes().take_while(u8::is_ascii_digit).count();
        let (number, unit) = part.split_at(digits);
        let number: u64 = number.parse().map_err(|_| bad(""))?;
        let (slot, scale) = match unit {
            "pps" => (&mut rate.pps, 1),
            "bit" => (&mut rate.bps, 1),
            "kbit" => (&mut rate.bps, 1_000),
            "mbit" => (&mut rate.bps, 1_000_000),
            "gbit" => (&mut rate.bps, 1_000_000_000),
            _ => return Err(bad("")),
        };
        if slot.is_some() {
            return Err(bad(" (one packet rate and one bit rate at most)"));
        }
        if number == 0 {
            return Err(bad(
                " (a zero rate would drop every frame; off removes the limit)",
            ));
        }
        *slot = Some(
            number
                .checked_mul(scale)
                .ok_or_else(|| bad(" (too large)"))?,
        );
    }
    Ok(StormRate(Some(rate)))
}

/// Parses an allowed source: `10.0.0.5`, `10.0.0.0/24`, `2001:db8::/64`.
pub fn parse_prefix(s: &str) -> Result<IpPattern, String> {
    s.parse().map_err(|_| {
        format!(
            "'{s}' is not an IP address or prefix: give one such as 10.0.0.5, 10.0.0.0/24, \
             2001:db8::1 or 2001:db8::/64"
        )
    })
}

/// What `--mac-limit` does beyond its count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MacLimitActionArg {
    /// Forward frames from new MACs but do not learn them.
    NoLearn,
    /// Drop frames from new MACs.
    Drop,
}

impl From<MacLimitActionArg> for MacLimitAction {
    fn from(a: MacLimitActionArg) -> Self {
        match a {
            MacLimitActionArg::NoLearn => MacLimitAction::NoLearn,
            MacLimitActionArg::Drop => MacLimitAction::Drop,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(pps: Option<u64>, bps: Option<u64>) -> StormRate {
        StormRate(Some(RateSettings { pps, bps }))
    }

    #[test]
    fn rates_take_packets_bits_both_or_off() {
        assert_eq!(parse_rate("1000pps"), Ok(rate(Some(1000), None)));
        assert_eq!(parse_rate("10mbit"), Ok(rate(None, Some(10_000_000))));
        assert_eq!(parse_rate("2gbit"), Ok(rate(None, Some(2_000_000_000))));
        assert_eq!(parse_rate("500kbit"), Ok(rate(None, Some(500_000))));
        assert_eq!(parse_rate("64000bit"), Ok(rate(None, Some(64_000))));
        assert_eq!(
            parse_rate("1000pps,10mbit"),
            Ok(rate(Some(1000), Some(10_000_000)))
        );
        assert_eq!(parse_rate("10Mbit,1000PPS"), parse_rate("1000pps,10mbit"));
        assert_eq!(parse_rate("off"), Ok(StormRate(None)));
    }

    #[test]
    fn bad_rates_say_which_forms_are_accepted() {
        for s in [
            "",
            "1000",
            "pps",
            "10 mbit",
            "10mb",
            "1.5mbit",
            "-1pps",
            "1pps,2pps",
            "1mbit,1kbit",
            "0pps",
            "0mbit",
            "1000pps,",
            "99999999999gbit",
            "none",
        ] {
            let e = parse_rate(s).unwrap_err();
            assert!(e.contains(RATE_FORMS), "{s:?}: {e}");
        }
        assert!(parse_rate("0pps")
            .unwrap_err()
            .contains("off removes the limit"));
    }

    #[test]
    fn prefixes_take_addresses_and_prefixes_of_both_families() {
        assert_eq!(parse_prefix("10.0.0.5").unwrap().len, None);
        assert_eq!(parse_prefix("10.0.0.0/24").unwrap().len, Some(24));
        assert_eq!(parse_prefix("2001:db8::/64").unwrap().len, Some(64));
        for s in ["10.0.0.0/33", "host", "10.0.0.0/", "2001:db8::/129"] {
            assert!(parse_prefix(s).unwrap_err().contains("10.0.0.0/24"), "{s}");
        }
    }
}
