//! What differs between a switch as it runs and as `config_apply` wants it.

use std::collections::{BTreeMap, BTreeSet};

use weft_control::rule::RuleSpec;
use weft_control::state::{PortState, StaticMac, SwitchState};
use weft_packet::MacAddr;

use super::ports::rule_uses_port;

pub(super) type StaticKey = (u16, MacAddr, String);

fn static_key(m: &StaticMac) -> StaticKey {
    (m.vlan, m.mac, m.port.clone())
}

/// How one switch present before and after changes.
pub(super) struct SwitchDiff {
    /// Rules from this index on are removed, and the target's from there added.
    pub(super) keep_rules: usize,
    pub(super) remove_ports: Vec<String>,
    pub(super) add_ports: Vec<PortState>,
    pub(super) set_ports: Vec<PortState>,
    pub(super) remove_statics: Vec<StaticKey>,
    pub(super) add_statics: Vec<StaticKey>,
    pub(super) add_rules: Vec<RuleSpec>,
}

impl SwitchDiff {
    pub(super) fn new(current: &SwitchState, target: &SwitchState) -> SwitchDiff {
        let now: BTreeMap<&str, &PortState> =
            current.ports.iter().map(|p| (p.name.as_str(), p)).collect();
        let mut remove_ports = Vec::new();
        let mut add_ports = Vec::new();
        let mut set_ports = Vec::new();
        for p in &current.ports {
            match target.ports.iter().find(|t| t.name == p.name) {
                Some(t) if t.kind == p.kind => {
                    if t.options != p.options {
                        set_ports.push(t.clone());
                    }
                }
                _ => remove_ports.push(p.name.clone()),
            }
        }
        for t in &target.ports {
            if now.get(t.name.as_str()).is_none_or(|p| p.kind != t.kind) {
                add_ports.push(t.clone());
            }
        }
        let removed = |port: &str| remove_ports.iter().any(|r| r == port);
        let keep_rules = current
            .rules
            .iter()
            .zip(&target.rules)
            .take_while(|(a, b)| a == b && !remove_ports.iter().any(|p| rule_uses_port(a, p)))
            .count();
        let before: BTreeSet<StaticKey> = current.static_macs.iter().map(static_key).collect();
        let after: BTreeSet<StaticKey> = target.static_macs.iter().map(static_key).collect();
        let remove_statics = before
            .iter()
            .filter(|k| !after.contains(*k) || removed(&k.2))
            .cloned()
            .collect();
        let add_statics = after
            .iter()
            .filter(|k| !before.contains(*k) || removed(&k.2))
            .cloned()
            .collect();
        SwitchDiff {
            keep_rules,
            remove_ports,
            add_ports,
            set_ports,
            remove_statics,
            add_statics,
            add_rules: target.rules[keep_rules.min(target.rules.len())..].to_vec(),
        }
    }

    pub(super) fn describe(&self, current: &SwitchState, name: &str, out: &mut Vec<String>) {
        for r in current.rules.iter().skip(self.keep_rules) {
            out.push(format!("switch {name}: remove rule {}", rule_summary(r)));
        }
        for (vlan, mac, port) in &self.remove_statics {
            out.push(format!(
                "switch {name}: remove static entry {mac} vlan {vlan} on {port}"
            ));
        }
        for p in &self.remove_ports {
            out.push(format!("switch {name}: remove port {p}"));
        }
        for p in &self.add_ports {
            out.push(format!(
                "switch {name}: add port {} ({})",
                p.name,
                kind_name(p)
            ));
        }
        for p in &self.set_ports {
            out.push(format!("switch {name}: change options of port {}", p.name));
        }
        for (vlan, mac, port) in &self.add_statics {
            out.push(format!(
                "switch {name}: add static entry {mac} vlan {vlan} on {port}"
            ));
        }
        for r in &self.add_rules {
            out.push(format!("switch {name}: add rule {}", rule_summary(r)));
        }
    }

    pub(super) fn is_empty(&self, current: &SwitchState) -> bool {
        self.keep_rules == current.rules.len()
            && self.remove_ports.is_empty()
            && self.add_ports.is_empty()
            && self.set_ports.is_empty()
            && self.remove_statics.is_empty()
            && self.add_statics.is_empty()
            && self.add_rules.is_empty()
    }
}

fn kind_name(p: &PortState) -> &'static str {
    crate::devices::kind_name(&p.kind)
}

fn rule_summary(r: &RuleSpec) -> String {
    serde_json::to_string(r).unwrap_or_default()
}
