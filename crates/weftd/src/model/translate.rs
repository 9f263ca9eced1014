//! From the protocol's model (ports by name, addresses already typed) to the switch's
//! types. Every function checks completely and says what was wrong; nothing here touches a
//! switch.

use std::time::Duration;

use weft_control::rule::{ActionSpec, IpPattern, MacPattern, MatchSpec, RuleSpec};
use weft_control::state::{PortSettings, SwitchSettings, VlanMode};
use weft_control::ControlError;
use weft_packet::MacAddr;
use weft_switch::flow_cache::MAX_CACHE_CAPACITY;
use weft_switch::flow_table::MAX_FLOW_RULES;
use weft_switch::{
    Action, ActionList, FdbConfig, FlowMatch, FlowRule, IpPrefix, MacMatch, PortId, PortOptions,
    PortVlanMode, SwitchConfig, MAX_ACTIONS,
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
pub fn port_options(settings: &PortSettings) -> Result<PortOptions, ControlError> {
    Ok(PortOptions {
        vlan: vlan_mode(&settings.vlan)?,
        flood_unknown_unicast: settings.flood_unknown_unicast,
        learning: settings.learning,
        ..PortOptions::default()
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
        ..FdbConfig::default()
    };
    fdb.validate().map_err(|e| {
        bad(format!(
            "fdb: {e} (fdb_max_entries, fdb_max_per_port, fdb_ageing_secs)"
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
