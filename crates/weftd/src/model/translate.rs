//! From the protocol's model (ports by name, addresses already typed) to the switch's
//! types. Every function checks completely and says what was wrong; nothing here touches a
//! switch.

use std::time::Duration;

use weft_control::rule::{ActionSpec, IpPattern, MacPattern, MatchSpec, RuleSpec};
use weft_control::state::{
    MacLimitAction as MacLimitActionSetting, MacLimitSettings, PortSecuritySettings, PortSettings,
    RateSettings, StormSettings, SwitchSettings, VlanMode,
};
use weft_control::ControlError;
use weft_packet::MacAddr;
use weft_switch::flow_cache::MAX_CACHE_CAPACITY;
use weft_switch::flow_table::MAX_FLOW_RULES;
use weft_switch::{
    Action, ActionList, FdbConfig, FlowMatch, FlowRule, IpPrefix, MacLimit, MacLimitAction,
    MacMatch, PortId, PortOptions, PortSecurity, PortVlanMode, RateLimit, StormControl,
    StormPolicy, SwitchConfig, MAX_ACTIONS,
};

/// A unicast MAC address, as an FDB entry needs.
pub fn unicast_mac(addr: MacAddr) -> Result<MacAddr, ControlError> {
    if addr.is_unicast() {
        Ok(addr)
    } else {
        Err(ControlError::invalid(format!(
            "{addr} is not a unicast address: FDB entries are for station addresses (first octet even, not all zeros)"
        )))
    }
}

/// A VLAN id for an FDB entry: 0 (none) to 4094.
pub fn fdb_vlan(vlan: u16) -> Result<u16, ControlError> {
    if vlan <= 4094 {
        Ok(vlan)
    } else {
        Err(ControlError::invalid(format!(
            "VLAN {vlan} is out of range: use 0 (no VLAN) to 4094"
        )))
    }
}

/// A MAC match: an address (all bits), or an address and a mask.
pub fn mac_match(pattern: &MacPattern) -> MacMatch {
    match pattern.mask {
        None => MacMatch::exact(pattern.addr),
        Some(mask) => MacMatch {
            addr: pattern.addr,
            mask,
        },
    }
}

/// An IP prefix; a plain address is a host prefix. (Lengths were checked against the
/// family when the rule was read.)
pub fn ip_prefix(pattern: &IpPattern) -> IpPrefix {
    match pattern.len {
        None => IpPrefix::host(pattern.addr),
        Some(len) => IpPrefix {
            addr: pattern.addr,
            len,
        },
    }
}

/// A port's VLAN mode.
pub fn vlan_mode(mode: &VlanMode) -> Result<PortVlanMode, ControlError> {
    let result = match mode {
        VlanMode::Plain => Ok(PortVlanMode::plain()),
        VlanMode::Access { vlan } => PortVlanMode::access(*vlan),
        VlanMode::Trunk { vlans, native } => PortVlanMode::trunk(vlans.iter().copied(), *native),
    };
    result.map_err(|e| ControlError::invalid(format!("vlan: {e}")))
}

/// A port's switch-side options.
///
/// Translate a port's settings once and clone the result onto each lane: the clones of
/// one port's storm control share its buckets, so the port's rate holds across lanes.
pub fn port_options(settings: &PortSettings) -> Result<PortOptions, ControlError> {
    Ok(PortOptions {
        vlan: vlan_mode(&settings.vlan)?,
        flood_unknown_unicast: settings.flood_unknown_unicast,
        learning: settings.learning,
        security: port_security(&settings.security)?,
        storm: storm_policy(&settings.storm)?,
        mac_limit: settings.mac_limit.map(mac_limit).transpose()?,
    })
}

/// A port's security settings, checked as the switch will use them.
pub fn port_security(settings: &PortSecuritySettings) -> Result<PortSecurity, ControlError> {
    let security = PortSecurity {
        allowed_macs: settings.allowed_macs.clone(),
        allowed_ips: settings.allowed_ips.iter().map(ip_prefix).collect(),
        allow_dhcp_server: settings.allow_dhcp_server,
        allow_router_advertisements: settings.allow_router_advertisements,
    };
    security.validate().map_err(|e| {
        ControlError::invalid(format!("security: {e}")).with_hint(
            "allowed MACs are station addresses such as 52:54:00:00:00:01; allowed IPs \
             are addresses or prefixes such as 10.0.0.5, 10.0.0.0/24 or 2001:db8::/64 \
             (weft port set --allowed-mac / --allowed-ip)",
        )
    })?;
    Ok(security)
}

fn rate_limit(rate: Option<RateSettings>) -> Option<RateLimit> {
    rate.map(|r| RateLimit {
        pps: r.pps,
        bps: r.bps,
    })
}

/// A port's storm control, checked as the switch will use it.
pub fn storm_policy(settings: &StormSettings) -> Result<StormPolicy, ControlError> {
    StormPolicy::new(StormControl {
        broadcast: rate_limit(settings.broadcast),
        multicast: rate_limit(settings.multicast),
        unknown_unicast: rate_limit(settings.unknown_unicast),
        burst: Duration::from_millis(u64::from(settings.burst_ms)),
    })
    .map_err(|e| {
        ControlError::invalid(format!("storm: {e}")).with_hint(
            "give each rate as packets and/or bits per second above zero (weft port set \
             --storm-broadcast 1000pps,10mbit), or no rate to leave the kind unlimited; \
             burst_ms is 1 to 10000",
        )
    })
}

/// A port's MAC limit: at least one entry.
pub fn mac_limit(settings: MacLimitSettings) -> Result<MacLimit, ControlError> {
    if settings.max == 0 {
        return Err(ControlError::invalid(
            "mac_limit: a max of 0 would never learn: give 1 or more, or no mac_limit",
        )
        .with_hint("weft port set --mac-limit N, or --no-mac-limit to remove the limit"));
    }
    Ok(MacLimit {
        max: settings.max as usize,
        action: match settings.action {
            MacLimitActionSetting::NoLearn => MacLimitAction::NoLearn,
            MacLimitActionSetting::Drop => MacLimitAction::Drop,
        },
    })
}

/// A switch's configuration, checked as the switch would.
pub fn switch_config(settings: &SwitchSettings) -> Result<SwitchConfig, ControlError> {
    let bad = |what: String| ControlError::invalid(format!("settings: {what}"));
    if !(1..=1024).contains(&settings.batch_size) {
        return Err(bad(format!(
            "batch_size {} is out of range: use 1 to 1024",
            settings.batch_size
        )));
    }
    if settings.max_rules > MAX_FLOW_RULES {
        return Err(bad(format!(
            "max_rules {} is above the supported {MAX_FLOW_RULES}",
            settings.max_rules
        )));
    }
    if settings.flow_cache_capacity > MAX_CACHE_CAPACITY {
        return Err(bad(format!(
            "flow_cache_capacity {} is above the supported {MAX_CACHE_CAPACITY}",
            settings.flow_cache_capacity
        )));
    }
    if !(1..=weft_switch::lanes::MAX_LANES).contains(&settings.lanes) {
        return Err(bad(format!(
            "lanes {} is out of range: use 1 to {}",
            settings.lanes,
            weft_switch::lanes::MAX_LANES
        )));
    }
    let ageing = Duration::from_secs(settings.fdb_ageing_secs);
    let fdb = FdbConfig {
        max_entries: settings.fdb_max_entries,
        max_per_port: settings.fdb_max_per_port,
        ageing,
        // A refresh must be finer than the ageing time; 1 s unless ageing is shorter.
        refresh_granularity: Duration::from_secs(1).min(ageing / 4),
        mac_move_limit: settings.mac_move_limit,
        mac_move_hold: Duration::from_secs(u64::from(settings.mac_move_hold_secs)),
    };
    fdb.validate().map_err(|e| {
        bad(format!(
            "fdb: {e} (fdb_max_entries, fdb_max_per_port, fdb_ageing_secs, mac_move_limit, \
             mac_move_hold_secs)"
        ))
    })?;
    Ok(SwitchConfig {
        batch_size: settings.batch_size,
        fdb,
        max_rules: settings.max_rules,
        flow_cache_capacity: settings.flow_cache_capacity,
        ..SwitchConfig::default()
    })
}

/// A flow rule, with port names resolved by `port`. The result is validated as the flow
/// table will validate it.
pub fn rule(
    spec: &RuleSpec,
    port: &dyn Fn(&str) -> Option<PortId>,
) -> Result<FlowRule, ControlError> {
    let resolve = |field: &str, name: &str| {
        port(name).ok_or_else(|| {
            ControlError::not_found(format!("{field}: no port {name:?} on this switch"))
                .with_hint("list the switch's ports with port_list (weft port list)")
        })
    };
    let matches = match_spec(&spec.matches, &resolve)?;
    if spec.actions.len() > MAX_ACTIONS {
        return Err(ControlError::invalid(format!(
            "actions: {} actions, a rule holds at most {MAX_ACTIONS}",
            spec.actions.len()
        )));
    }
    let mut actions = ActionList::new();
    for a in &spec.actions {
        let action = match a {
            ActionSpec::Output(name) => Action::Output(resolve("actions: output", name)?),
            ActionSpec::Flood => Action::Flood,
            ActionSpec::Normal => Action::Normal,
            ActionSpec::Drop => Action::Drop,
            ActionSpec::PushVlan(v) => Action::PushVlan(*v),
            ActionSpec::PopVlan => Action::PopVlan,
            ActionSpec::Controller => Action::Controller,
        };
        actions
            .push(action)
            .map_err(|e| ControlError::invalid(format!("actions: {e}")))?;
    }
    let rule = FlowRule {
        priority: spec.priority,
        matches,
        actions,
        cookie: spec.cookie,
    };
    rule.validate()
        .map_err(|e| ControlError::invalid(format!("rule: {e}")))?;
    Ok(rule)
}

fn match_spec(
    m: &MatchSpec,
    resolve: &dyn Fn(&str, &str) -> Result<PortId, ControlError>,
) -> Result<FlowMatch, ControlError> {
    Ok(FlowMatch {
        in_port: m
            .in_port
            .as_deref()
            .map(|n| resolve("match.in_port", n))
            .transpose()?,
        src_mac: m.src_mac.as_ref().map(mac_match),
        dst_mac: m.dst_mac.as_ref().map(mac_match),
        vlan: m.vlan,
        ethertype: m.ethertype,
        ip_src: m.ip_src.as_ref().map(ip_prefix),
        ip_dst: m.ip_dst.as_ref().map(ip_prefix),
        ip_proto: m.ip_proto,
        l4_src: m.l4_src,
        l4_dst: m.l4_dst,
    })
}

/// Puts a context in front of an error's message.
pub trait Prefixed {
    /// `"{context}: {message}"`.
    fn prefixed(self, context: &str) -> Self;
}

impl Prefixed for ControlError {
    fn prefixed(mut self, context: &str) -> Self {
        self.message = format!("{context}: {}", self.message);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_ports(_: &str) -> Option<PortId> {
        None
    }

    #[test]
    fn mac_match_accepts_address_and_address_with_mask() {
        let m = mac_match(&"02:00:00:00:00:01".parse().unwrap());
        assert_eq!(m.mask, MacAddr::BROADCAST);
        let m = mac_match(&"02:00:00:00:00:00/ff:ff:ff:00:00:00".parse().unwrap());
        assert_eq!(m.mask, MacAddr([0xff, 0xff, 0xff, 0, 0, 0]));
        assert!("02:00:00:00:00/ff".parse::<MacPattern>().is_err());
    }

    #[test]
    fn ip_prefix_rejects_lengths_above_the_family_width() {
        assert_eq!(ip_prefix(&"10.0.0.0/8".parse().unwrap()).len, 8);
        assert_eq!(ip_prefix(&"2001:db8::1".parse().unwrap()).len, 128);
        assert!("10.0.0.0/33".parse::<IpPattern>().is_err());
        assert!("10.0.0.0/x".parse::<IpPattern>().is_err());
        assert!("ten".parse::<IpPattern>().is_err());
    }

    #[test]
    fn rule_naming_an_unknown_port_is_not_found() {
        let spec = RuleSpec {
            actions: vec![ActionSpec::Output("vm9".into())],
            ..RuleSpec::default()
        };
        let e = rule(&spec, &no_ports).unwrap_err();
        assert_eq!(e.kind, weft_control::ErrorKind::NotFound);
        assert!(e.message.contains("vm9"), "{}", e.message);
    }

    #[test]
    fn rule_with_host_bits_in_prefix_is_invalid() {
        let spec = RuleSpec {
            matches: MatchSpec {
                ethertype: Some(0x0800),
                ip_src: Some("10.0.0.1/8".parse().unwrap()),
                ..MatchSpec::default()
            },
            actions: vec![ActionSpec::Drop],
            ..RuleSpec::default()
        };
        let e = rule(&spec, &no_ports).unwrap_err();
        assert_eq!(e.kind, weft_control::ErrorKind::Invalid);
    }

    #[test]
    fn too_many_actions_are_invalid_not_a_panic() {
        let spec = RuleSpec {
            actions: vec![ActionSpec::Flood; MAX_ACTIONS + 1],
            ..RuleSpec::default()
        };
        assert!(rule(&spec, &no_ports).is_err());
    }

    /// The protocol crate keeps its own copy of the core's defaults (it depends on serde
    /// only, for the CLI's sake): a default changed on one side must change on the other.
    #[test]
    fn the_protocols_default_settings_are_the_cores_defaults() {
        let ours = switch_config(&SwitchSettings::default()).unwrap();
        let core = SwitchConfig::default();
        assert_eq!(ours.batch_size, core.batch_size);
        assert_eq!(ours.max_rules, core.max_rules);
        assert_eq!(ours.flow_cache_capacity, core.flow_cache_capacity);
        assert_eq!(ours.fdb.max_entries, core.fdb.max_entries);
        assert_eq!(ours.fdb.max_per_port, core.fdb.max_per_port);
        assert_eq!(ours.fdb.ageing, core.fdb.ageing);
        assert_eq!(ours.fdb.mac_move_limit, core.fdb.mac_move_limit);
        assert_eq!(ours.fdb.mac_move_hold, core.fdb.mac_move_hold);
        let port = port_options(&PortSettings::default()).unwrap();
        let core = PortOptions::default();
        assert_eq!(port.security, core.security);
        assert_eq!(port.storm.config(), core.storm.config());
        assert_eq!(port.mac_limit, core.mac_limit);
    }

    fn rate(pps: Option<u64>, bps: Option<u64>) -> Option<RateSettings> {
        Some(RateSettings { pps, bps })
    }

    #[test]
    fn port_policy_settings_become_the_switchs_port_options() {
        let settings = PortSettings {
            security: PortSecuritySettings {
                allowed_macs: vec!["52:54:00:00:00:01".parse().unwrap()],
                allowed_ips: vec![
                    "10.0.0.5".parse().unwrap(),
                    "2001:db8::/64".parse().unwrap(),
                ],
                allow_dhcp_server: true,
                allow_router_advertisements: false,
            },
            storm: StormSettings {
                broadcast: rate(Some(1000), None),
                multicast: None,
                unknown_unicast: rate(Some(500), Some(10_000_000)),
                burst_ms: 250,
            },
            mac_limit: Some(MacLimitSettings {
                max: 8,
                action: MacLimitActionSetting::Drop,
            }),
            ..PortSettings::default()
        };
        let o = port_options(&settings).unwrap();
        assert_eq!(
            o.security.allowed_macs,
            vec![MacAddr([0x52, 0x54, 0, 0, 0, 1])]
        );
        assert_eq!(
            o.security.allowed_ips,
            vec![
                IpPrefix {
                    addr: "10.0.0.5".parse().unwrap(),
                    len: 32
                },
                IpPrefix {
                    addr: "2001:db8::".parse().unwrap(),
                    len: 64
                }
            ]
        );
        assert!(o.security.allow_dhcp_server && !o.security.allow_router_advertisements);
        assert_eq!(
            *o.storm.config(),
            StormControl {
                broadcast: Some(RateLimit {
                    pps: Some(1000),
                    bps: None
                }),
                multicast: None,
                unknown_unicast: Some(RateLimit {
                    pps: Some(500),
                    bps: Some(10_000_000)
                }),
                burst: Duration::from_millis(250),
            }
        );
        assert_eq!(
            o.mac_limit,
            Some(MacLimit {
                max: 8,
                action: MacLimitAction::Drop
            })
        );
    }

    fn refused(settings: PortSettings) -> ControlError {
        match port_options(&settings) {
            Ok(_) => panic!("{settings:?} was accepted"),
            Err(e) => e,
        }
    }

    #[test]
    fn unusable_port_security_is_invalid_and_says_which_entry() {
        for (security, expected) in [
            (
                PortSecuritySettings {
                    allowed_macs: vec![MacAddr::BROADCAST],
                    ..PortSecuritySettings::default()
                },
                "security: allowed MAC ff:ff:ff:ff:ff:ff is not a station address",
            ),
            (
                PortSecuritySettings {
                    allowed_ips: vec!["10.0.0.5/24".parse().unwrap()],
                    ..PortSecuritySettings::default()
                },
                "security: allowed IP 10.0.0.5/24 is not a prefix",
            ),
            (
                PortSecuritySettings {
                    allowed_macs: vec![MacAddr([2, 0, 0, 0, 0, 1]); 65],
                    ..PortSecuritySettings::default()
                },
                "65 allowed MACs are too many",
            ),
        ] {
            let e = refused(PortSettings {
                security,
                ..PortSettings::default()
            });
            assert_eq!(e.kind, weft_control::ErrorKind::Invalid);
            assert!(e.message.contains(expected), "{}", e.message);
            assert!(e.hint.as_deref().is_some_and(|h| h.contains("--allowed-")));
        }
    }

    #[test]
    fn unusable_storm_rates_are_invalid_and_name_the_kind() {
        for (storm, expected) in [
            (
                StormSettings {
                    broadcast: rate(None, None),
                    ..StormSettings::default()
                },
                "storm: a broadcast rate needs a packet rate and/or a bit rate above zero",
            ),
            (
                StormSettings {
                    multicast: rate(Some(0), Some(1000)),
                    ..StormSettings::default()
                },
                "storm: a multicast rate needs",
            ),
            (
                StormSettings {
                    unknown_unicast: rate(Some(1 << 40), None),
                    ..StormSettings::default()
                },
                "storm: a unknown-unicast rate of 1099511627776 pps is above",
            ),
            (
                StormSettings {
                    broadcast: rate(Some(10), None),
                    burst_ms: 0,
                    ..StormSettings::default()
                },
                "storm: a storm control burst of 0ns is out of range",
            ),
        ] {
            let e = refused(PortSettings {
                storm,
                ..PortSettings::default()
            });
            assert_eq!(e.kind, weft_control::ErrorKind::Invalid);
            assert!(e.message.contains(expected), "{}", e.message);
            assert!(e.hint.is_some());
        }
    }

    #[test]
    fn a_mac_limit_of_zero_is_invalid() {
        let e = refused(PortSettings {
            mac_limit: Some(MacLimitSettings {
                max: 0,
                action: MacLimitActionSetting::NoLearn,
            }),
            ..PortSettings::default()
        });
        assert!(e.message.starts_with("mac_limit: "), "{}", e.message);
        let one = port_options(&PortSettings {
            mac_limit: Some(MacLimitSettings {
                max: 1,
                action: MacLimitActionSetting::NoLearn,
            }),
            ..PortSettings::default()
        })
        .unwrap();
        assert_eq!(one.mac_limit.unwrap().action, MacLimitAction::NoLearn);
    }

    #[test]
    fn mac_move_settings_reach_the_fdb_and_are_checked_by_name() {
        let s = SwitchSettings {
            mac_move_limit: 5,
            mac_move_hold_secs: 30,
            ..SwitchSettings::default()
        };
        let fdb = switch_config(&s).unwrap().fdb;
        assert_eq!(fdb.mac_move_limit, 5);
        assert_eq!(fdb.mac_move_hold, Duration::from_secs(30));
        for hold in [0, 3601] {
            let e = switch_config(&SwitchSettings {
                mac_move_hold_secs: hold,
                ..s
            })
            .unwrap_err();
            assert!(e.message.contains("MAC move hold"), "{}", e.message);
            assert!(e.message.contains("mac_move_hold_secs"), "{}", e.message);
        }
        // Off, the hold time is not used and not checked.
        let off = SwitchSettings {
            mac_move_limit: 0,
            mac_move_hold_secs: 0,
            ..SwitchSettings::default()
        };
        assert!(switch_config(&off).is_ok());
    }

    #[test]
    fn switch_config_rejects_what_the_fdb_would() {
        let mut s = SwitchSettings::default();
        assert!(switch_config(&s).is_ok());
        s.fdb_max_per_port = s.fdb_max_entries + 1;
        assert!(switch_config(&s).is_err());
        let s = SwitchSettings {
            fdb_ageing_secs: 0,
            ..SwitchSettings::default()
        };
        assert!(switch_config(&s).is_err());
        let s = SwitchSettings {
            fdb_ageing_secs: 1,
            ..SwitchSettings::default()
        };
        assert!(switch_config(&s).is_ok(), "1 s ageing works");
        let s = SwitchSettings {
            batch_size: 0,
            ..SwitchSettings::default()
        };
        assert!(switch_config(&s).is_err());
    }
}
