//! Named switch instances, each its own L2 domain. As in VALE, naming a port `switch:port`
//! on a switch that does not exist creates the switch; a switch created that way goes away
//! with its last port, one created explicitly stays until deleted.

use std::collections::BTreeMap;

use crate::port::{PortHalves, PortRx, PortTx};
use crate::switch::{PortOptions, Switch, SwitchConfig, SwitchError};
use crate::types::PortId;

/// Errors from the registry.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The switch name breaks the naming rules.
    #[error("invalid switch name {0:?}: use 1 to 32 letters, digits, '-', '_' or '.'")]
    BadSwitchName(String),
    /// The port reference is not `switch:port`.
    #[error("invalid port reference {0:?}: write it as SWITCH:PORT, for example br0:vm1")]
    BadPortRef(String),
    /// A switch of that name exists.
    #[error("switch {0:?} already exists")]
    SwitchExists(String),
    /// No switch of that name.
    #[error("no switch {0:?}")]
    NoSuchSwitch(String),
    /// The switch still has ports.
    #[error("switch {name:?} still has {ports} port(s): remove them first, or delete with force")]
    SwitchNotEmpty {
        /// The switch.
        name: String,
        /// How many ports it has.
        ports: usize,
    },
    /// No port of that name on the switch.
    #[error("no port {port:?} on switch {switch:?}")]
    NoSuchPort {
        /// The switch.
        switch: String,
        /// The port.
        port: String,
    },
    /// The switch refused.
    #[error(transparent)]
    Switch(#[from] SwitchError),
}

struct Entry {
    switch: Switch,
    /// Created by naming a port on it, not explicitly.
    implicit: bool,
}

/// Every switch of a process, by name.
#[derive(Default)]
pub struct SwitchRegistry {
    switches: BTreeMap<String, Entry>,
    default_config: SwitchConfig,
}

/// Splits `switch:port` into its two names.
pub fn split_port_ref(reference: &str) -> Result<(&str, &str), RegistryError> {
    let bad = || RegistryError::BadPortRef(reference.to_string());
    let (sw, port) = reference.split_once(':').ok_or_else(bad)?;
    check_switch_name(sw).map_err(|_| bad())?;
    if port.is_empty() || port.contains(':') {
        return Err(bad());
    }
    Ok((sw, port))
}

fn check_switch_name(name: &str) -> Result<(), RegistryError> {
    let ok = !name.is_empty()
        && name.len() <= 32
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(RegistryError::BadSwitchName(name.to_string()))
    }
}

impl SwitchRegistry {
    /// An empty registry; switches created implicitly get `default_config`.
    pub fn new(default_config: SwitchConfig) -> Self {
        SwitchRegistry {
            switches: BTreeMap::new(),
            default_config,
        }
    }

    /// Creates a switch.
    pub fn create(
        &mut self,
        name: &str,
        config: SwitchConfig,
    ) -> Result<&mut Switch, RegistryError> {
        check_switch_name(name)?;
        if self.switches.contains_key(name) {
            return Err(RegistryError::SwitchExists(name.to_string()));
        }
        let switch = Switch::new(name, config)?;
        let entry = self.switches.entry(name.to_string()).or_insert(Entry {
            switch,
            implicit: false,
        });
        Ok(&mut entry.switch)
    }

    /// Deletes a switch; with `force` even when it has ports (which are dropped).
    pub fn delete(&mut self, name: &str, force: bool) -> Result<Switch, RegistryError> {
        let entry = self
            .switches
            .get(name)
            .ok_or_else(|| RegistryError::NoSuchSwitch(name.to_string()))?;
        let ports = entry.switch.port_count();
        if ports > 0 && !force {
            return Err(RegistryError::SwitchNotEmpty {
                name: name.to_string(),
                ports,
            });
        }
        self.switches
            .remove(name)
            .map(|e| e.switch)
            .ok_or_else(|| RegistryError::NoSuchSwitch(name.to_string()))
    }

    /// Attaches a port named `switch:port`, creating the switch if needed.
    pub fn add_port(
        &mut self,
        reference: &str,
        rx: Option<Box<dyn PortRx>>,
        tx: Box<dyn PortTx>,
        options: PortOptions,
    ) -> Result<PortId, RegistryError> {
        let (sw, port) = split_port_ref(reference)?;
        if !self.switches.contains_key(sw) {
            let switch = Switch::new(sw, self.default_config.clone())?;
            self.switches.insert(
                sw.to_string(),
                Entry {
                    switch,
                    implicit: true,
                },
            );
        }
        let entry = self
            .switches
            .get_mut(sw)
            .ok_or_else(|| RegistryError::NoSuchSwitch(sw.to_string()))?;
        match entry.switch.add_port(port, rx, tx, options) {
            Ok(id) => Ok(id),
            Err(e) => {
                if entry.implicit && entry.switch.port_count() == 0 {
                    self.switches.remove(sw);
                }
                Err(e.into())
            }
        }
    }

    /// Detaches the port `switch:port`; an implicitly created switch left empty goes too.
    pub fn remove_port(&mut self, reference: &str) -> Result<PortHalves, RegistryError> {
        let (sw, port) = split_port_ref(reference)?;
        let entry = self
            .switches
            .get_mut(sw)
            .ok_or_else(|| RegistryError::NoSuchSwitch(sw.to_string()))?;
        let id = entry
            .switch
            .port_id(port)
            .ok_or_else(|| RegistryError::NoSuchPort {
                switch: sw.to_string(),
                port: port.to_string(),
            })?;
        let halves = entry.switch.remove_port(id)?;
        if entry.implicit && entry.switch.port_count() == 0 {
            self.switches.remove(sw);
        }
        Ok(halves)
    }

    /// Adds an existing switch (moved from another registry: a worker handing a switch to
    /// another). It is treated as explicitly created.
    pub fn insert(&mut self, switch: Switch) -> Result<(), RegistryError> {
        let name = switch.name().to_string();
        if self.switches.contains_key(&name) {
            return Err(RegistryError::SwitchExists(name));
        }
        self.switches.insert(
            name,
            Entry {
                switch,
                implicit: false,
            },
        );
        Ok(())
    }

    /// Removes a switch with its ports and gives it back (to move it elsewhere).
    pub fn take(&mut self, name: &str) -> Option<Switch> {
        self.switches.remove(name).map(|e| e.switch)
    }

    /// A switch by name.
    pub fn get(&self, name: &str) -> Option<&Switch> {
        self.switches.get(name).map(|e| &e.switch)
    }

    /// A switch by name, mutable.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut Switch> {
        self.switches.get_mut(name).map(|e| &mut e.switch)
    }

    /// Every switch, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Switch> + '_ {
        self.switches.values().map(|e| &e.switch)
    }

    /// Every switch, mutable.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Switch> + '_ {
        self.switches.values_mut().map(|e| &mut e.switch)
    }

    /// Number of switches.
    pub fn len(&self) -> usize {
        self.switches.len()
    }

    /// True when there is no switch.
    pub fn is_empty(&self) -> bool {
        self.switches.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory_port::memory_port;
    use crate::port::PortCaps;

    fn add(reg: &mut SwitchRegistry, reference: &str) -> Result<PortId, RegistryError> {
        let (rx, tx, _h) = memory_port(PortCaps::plain(1500), 4);
        reg.add_port(
            reference,
            Some(Box::new(rx)),
            Box::new(tx),
            PortOptions::default(),
        )
    }

    #[test]
    fn naming_a_port_on_a_missing_switch_creates_it_and_its_last_port_removes_it() {
        let mut reg = SwitchRegistry::default();
        add(&mut reg, "vale0:a").unwrap();
        add(&mut reg, "vale0:b").unwrap();
        assert_eq!(reg.get("vale0").map(Switch::port_count), Some(2));
        reg.remove_port("vale0:a").unwrap();
        assert!(reg.get("vale0").is_some());
        reg.remove_port("vale0:b").unwrap();
        assert!(
            reg.get("vale0").is_none(),
            "implicit switch goes with its last port"
        );
    }

    #[test]
    fn explicitly_created_switch_outlives_its_ports() {
        let mut reg = SwitchRegistry::default();
        reg.create("br0", SwitchConfig::default()).unwrap();
        add(&mut reg, "br0:a").unwrap();
        reg.remove_port("br0:a").unwrap();
        assert!(reg.get("br0").is_some());
        assert!(matches!(
            reg.create("br0", SwitchConfig::default()),
            Err(RegistryError::SwitchExists(_))
        ));
    }

    #[test]
    fn bad_names_and_references_are_refused() {
        let mut reg = SwitchRegistry::default();
        for bad in [
            "",
            "noport",
            ":p",
            "sw:",
            "sw:a:b",
            "b@d:p",
            "waytoolongswitchnamewaytoolongname:p",
        ] {
            assert!(
                matches!(add(&mut reg, bad), Err(RegistryError::BadPortRef(_))),
                "{bad:?}"
            );
        }
        assert!(matches!(
            reg.create("bad name", SwitchConfig::default()),
            Err(RegistryError::BadSwitchName(_))
        ));
        assert!(reg.is_empty(), "a refused port creates no switch");
        add(&mut reg, "sw:a").unwrap();
        assert!(matches!(
            add(&mut reg, "sw:a"),
            Err(RegistryError::Switch(SwitchError::DuplicatePort(_)))
        ));
        assert!(matches!(
            reg.remove_port("sw:zz"),
            Err(RegistryError::NoSuchPort { .. })
        ));
        assert!(matches!(
            reg.remove_port("nosw:a"),
            Err(RegistryError::NoSuchSwitch(_))
        ));
    }

    #[test]
    fn deleting_a_switch_with_ports_needs_force() {
        let mut reg = SwitchRegistry::default();
        add(&mut reg, "sw:a").unwrap();
        assert!(matches!(
            reg.delete("sw", false),
            Err(RegistryError::SwitchNotEmpty { ports: 1, .. })
        ));
        assert!(reg.delete("sw", true).is_ok());
        assert!(matches!(
            reg.delete("sw", true),
            Err(RegistryError::NoSuchSwitch(_))
        ));
    }

    #[test]
    fn switches_move_between_registries_with_their_ports() {
        let (mut a, mut b) = (SwitchRegistry::default(), SwitchRegistry::default());
        add(&mut a, "sw:p").unwrap();
        let sw = a.take("sw").unwrap();
        b.insert(sw).unwrap();
        assert!(a.get("sw").is_none());
        assert_eq!(b.get("sw").map(Switch::port_count), Some(1));
        let again = Switch::new("sw", SwitchConfig::default()).unwrap();
        assert!(matches!(
            b.insert(again),
            Err(RegistryError::SwitchExists(_))
        ));
    }
}
