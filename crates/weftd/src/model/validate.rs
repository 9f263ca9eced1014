//! Whole-configuration checks: everything that can be known wrong without touching a switch
//! or a device. A state file, a seed switch of the configuration and the target of
//! `config_apply` all go through here before anything changes.

use std::collections::{BTreeMap, BTreeSet};

use weft_control::state::{PortKind, PortState, State, SwitchState};
use weft_control::ControlError;
use weft_switch::{PortId, MAX_PORTS};

use super::translate::{self, Prefixed};
use super::MAX_SWITCHES;

/// A switch name: 1 to 32 of `A-Za-z0-9-_.` (the registry's rule).
pub fn switch_name(name: &str) -> Result<(), ControlError> {
    let ok = !name.is_empty()
        && name.len() <= 32
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(ControlError::invalid(format!(
            "invalid switch name {name:?}: use 1 to 32 letters, digits, '-', '_' or '.'"
        )))
    }
}

/// A port name: 1 to 64 bytes, no ':' and no whitespace (the switch's rule).
pub fn port_name(name: &str) -> Result<(), ControlError> {
    if name.is_empty()
        || name.len() > 64
        || name.contains(|c: char| c == ':' || c.is_whitespace() || c.is_control())
    {
        Err(ControlError::invalid(format!(
            "invalid port name {name:?}: use 1 to 64 characters without ':' or whitespace"
        )))
    } else {
        Ok(())
    }
}

/// A Linux interface name: 1 to 15 bytes, no '/', ':' or whitespace, not `.` or `..`.
fn ifname(name: &str) -> Result<(), ControlError> {
    if name.is_empty()
        || name.len() > 15
        || name == "."
        || name == ".."
        || name.contains(|c: char| c == '/' || c == ':' || c.is_whitespace() || c.is_control())
    {
        Err(ControlError::invalid(format!(
            "invalid interface name {name:?}: use 1 to 15 characters without '/', ':' or whitespace"
        )))
    } else {
        Ok(())
    }
}

/// What a port is: names and sizes in range.
pub fn port_kind(port_name: &str, kind: &PortKind) -> Result<(), ControlError> {
    match kind {
        PortKind::Tap {
            ifname: name,
            netns,
            queues,
            mtu,
            offloads: _,
        } => {
            match name {
                Some(n) => ifname(n)?,
                None => ifname(port_name).map_err(|e| {
                    e.prefixed("the TAP device takes the port's name")
                        .with_hint("give the device a name of at most 15 characters (ifname)")
                })?,
            }
            if let Some(ns) = netns {
                netns_name(ns)?;
            }
            if !(1..=16).contains(queues) {
                return Err(ControlError::invalid(format!(
                    "queues {queues} is out of range: use 1 to 16"
                )));
            }
            mtu_in_range(*mtu)
        }
        PortKind::AfPacket { ifname: name } => ifname(name),
        PortKind::AfXdp {
            ifname: name,
            queue,
            ..
        } => {
            ifname(name)?;
            // The kernel's limit on a device's queues (and XSKMAP keys weft uses).
            if *queue >= 4096 {
                return Err(ControlError::invalid(format!(
                    "queue {queue} is out of range: use 0 to 4095"
                ))
                .with_hint("ethtool -l IFNAME lists the interface's queues"));
            }
            Ok(())
        }
        PortKind::VhostUser {
            socket,
            mtu,
            dispatch,
            notify,
            queues,
            ..
        } => {
            if !(1..=weft_vhost::MAX_QUEUE_PAIRS).contains(queues) {
                return Err(ControlError::invalid(format!(
                    "{queues} queue pairs: give 1 to {} (--queues)",
                    weft_vhost::MAX_QUEUE_PAIRS
                )));
            }
            if let Some(d) = dispatch {
                d.validate()
                    .map_err(|e| ControlError::invalid(e.to_string()))?;
            }
            if let Some(n) = notify {
                n.validate()
                    .map_err(|e| ControlError::invalid(e.to_string()))?;
            }
            socket_path(socket.as_deref())?;
            mtu_in_range(*mtu)
        }
        PortKind::Memif {
            socket,
            secret,
            queues,
            mtu,
            ..
        } => {
            if !(1..=weft_memif::config::MAX_QUEUE_PAIRS).contains(queues) {
                return Err(ControlError::invalid(format!(
                    "{queues} queue pairs: give 1 to {} (--queues)",
                    weft_memif::config::MAX_QUEUE_PAIRS
                )));
            }
            if let Some(secret) = secret {
                if secret.is_empty() || secret.len() > 23 || secret.contains('\0') {
                    return Err(ControlError::invalid(
                        "invalid memif secret: give 1 to 23 bytes (memif's limit), no NUL",
                    ));
                }
            }
            socket_path(socket.as_deref())?;
            mtu_in_range(*mtu)
        }
        PortKind::Vxlan {
            // The addresses and the VNI were checked when the request was read.
            local,
            vni: _,
            remotes,
            netns,
            learning,
            port,
            remote_macs,
            remote_ageing,
            directory,
        } => {
            remote_ageing_in_range(*remote_ageing)?;
            if *directory && (local.is_unspecified() || local.is_multicast()) {
                return Err(ControlError::invalid(format!(
                    "--directory publishes the local address for other hosts to send to, and \
                     {local} is not one they can: give the host's underlay address"
                )));
            }
            if remotes.len() > weft_overlay::MAX_REMOTES {
                return Err(ControlError::invalid(format!(
                    "{} remotes: a VXLAN port has at most {}",
                    remotes.len(),
                    weft_overlay::MAX_REMOTES
                ))
                .with_hint("turn on learning instead of listing every endpoint"));
            }
            for r in remotes {
                if r.is_ipv4() != local.is_ipv4() {
                    return Err(ControlError::invalid(format!(
                        "remote {r} is not in the address family of local {local}: use \
                         remotes of the same family"
                    )));
                }
            }
            if let Some(ns) = netns {
                netns_name(ns)?;
            }
            if *port == Some(0) {
                return Err(ControlError::invalid(
                    "udp port 0 is out of range: use 1 to 65535 (4789 by default)",
                ));
            }
            // With the directory, any endpoint it names may carry a static MAC.
            super::remote_macs::check(remote_macs, *local, remotes, *learning || *directory)
        }
        PortKind::TcpLink {
            listen,
            connect,
            netns,
            link_id: _,
            mtu,
            offloads: _,
            key_file,
        } => {
            if let Some(path) = key_file {
                key_file_path(path)?;
            }
            match (listen, connect) {
                (Some(_), None) => {}
                (None, Some(a)) => connect_port(*a)?,
                _ => {
                    return Err(ControlError::invalid(
                        "a TCP link either listens or connects: give exactly one of listen \
                         and connect",
                    )
                    .with_hint("one end: --listen IP:PORT, the other: --peer IP:PORT"))
                }
            }
            if let Some(ns) = netns {
                netns_name(ns)?;
            }
            mtu_in_range(*mtu)
        }
    }
}

/// Where a TCP link connects: a port (listening on port 0 takes any free one).
fn connect_port(addr: std::net::SocketAddr) -> Result<(), ControlError> {
    if addr.port() == 0 {
        return Err(ControlError::invalid(format!(
            "connect {addr}: port 0 is out of range: use 1 to 65535"
        )));
    }
    Ok(())
}

/// An MTU in range.
fn mtu_in_range(mtu: u32) -> Result<(), ControlError> {
    if (68..=65535).contains(&mtu) {
        Ok(())
    } else {
        Err(ControlError::invalid(format!(
            "mtu {mtu} is out of range: use 68 to 65535"
        )))
    }
}

/// A VXLAN port's remote FDB ageing time: 1 s to a day.
fn remote_ageing_in_range(secs: u32) -> Result<(), ControlError> {
    let max = weft_control::state::MAX_REMOTE_AGEING_SECS;
    if (1..=max).contains(&secs) {
        Ok(())
    } else {
        Err(ControlError::invalid(format!(
            "remote ageing {secs} s is out of range: use 1 to {max} seconds (a day; 300 by default)"
        )))
    }
}

/// A TCP link's key file: an absolute path (weftd reads it, from its own directory).
fn key_file_path(path: &str) -> Result<(), ControlError> {
    if path.is_empty() || path.contains('\0') || !std::path::Path::new(path).is_absolute() {
        return Err(ControlError::invalid(format!(
            "key file {path:?} is not an absolute path: give the key file's full path"
        )));
    }
    Ok(())
}

/// A network namespace name (under /run/netns).
fn netns_name(ns: &str) -> Result<(), ControlError> {
    if ns.is_empty()
        || ns.len() > 255
        || ns == "."
        || ns == ".."
        || ns.contains(|c: char| c == '/' || c.is_control())
    {
        Err(ControlError::invalid(format!(
            "invalid netns {ns:?}: give the name of a namespace under /run/netns"
        )))
    } else {
        Ok(())
    }
}

/// One port on its own.
pub fn port(port: &PortState) -> Result<(), ControlError> {
    port_name(&port.name)?;
    port_kind(&port.name, &port.kind)?;
    translate::port_options(&port.options)?;
    Ok(())
}

/// One switch and everything on it. Errors name the part at fault.
pub fn switch_state(switch: &SwitchState) -> Result<(), ControlError> {
    switch_name(&switch.name)?;
    translate::switch_config(&switch.settings)?;
    if switch.ports.len() > MAX_PORTS {
        return Err(ControlError::new(
            weft_control::ErrorKind::LimitReached,
            format!(
                "{} ports: a switch has at most {MAX_PORTS}",
                switch.ports.len()
            ),
        ));
    }
    // Ports get ids in order, as a restore would give them.
    let mut ids = BTreeMap::new();
    for (i, p) in switch.ports.iter().enumerate() {
        port(p).map_err(|e| e.prefixed(&format!("port {:?}", p.name)))?;
        let id = PortId(u16::try_from(i).unwrap_or(u16::MAX));
        if ids.insert(p.name.as_str(), id).is_some() {
            return Err(ControlError::exists(format!(
                "port {:?} is defined twice",
                p.name
            )));
        }
    }
    if switch.static_macs.len() > switch.settings.fdb_max_entries {
        return Err(ControlError::new(
            weft_control::ErrorKind::LimitReached,
            format!(
                "{} static FDB entries do not fit in fdb_max_entries {}",
                switch.static_macs.len(),
                switch.settings.fdb_max_entries
            ),
        ));
    }
    let mut keys = BTreeSet::new();
    for (i, m) in switch.static_macs.iter().enumerate() {
        let ctx = format!("static_macs[{i}]");
        let addr = translate::unicast_mac(m.mac).map_err(|e| e.prefixed(&ctx))?;
        translate::fdb_vlan(m.vlan).map_err(|e| e.prefixed(&ctx))?;
        if !ids.contains_key(m.port.as_str()) {
            return Err(ControlError::not_found(format!(
                "{ctx}: no port {:?} on this switch",
                m.port
            ))
            .with_hint("FDB entries name a port of their switch"));
        }
        if !keys.insert((m.vlan, addr)) {
            return Err(ControlError::exists(format!(
                "{ctx}: {} in VLAN {} has two entries",
                m.mac, m.vlan
            )));
        }
    }
    if switch.rules.len() > switch.settings.max_rules {
        return Err(ControlError::new(
            weft_control::ErrorKind::LimitReached,
            format!(
                "{} rules do not fit in max_rules {}",
                switch.rules.len(),
                switch.settings.max_rules
            ),
        ));
    }
    let lookup = |name: &str| ids.get(name).copied();
    for (i, r) in switch.rules.iter().enumerate() {
        translate::rule(r, &lookup).map_err(|e| e.prefixed(&format!("rules[{i}]")))?;
    }
    Ok(())
}

/// Tables are allocated at their configured size when a switch is built; these bound
/// what all switches together may ask for (about 1.5 GB at worst).
pub const MAX_TOTAL_FDB_ENTRIES: usize = 1 << 24;
/// See [`MAX_TOTAL_FDB_ENTRIES`].
pub const MAX_TOTAL_FLOW_CACHE: usize = 1 << 22;
/// See [`MAX_TOTAL_FDB_ENTRIES`].
pub const MAX_TOTAL_RULES: usize = 1 << 20;

/// The table sizes of all switches together, against the daemon's bounds.
pub fn totals(switches: &[SwitchState]) -> Result<(), ControlError> {
    // Every lane of a switch has its own tables.
    let sum = |f: fn(&SwitchState) -> usize| {
        switches
            .iter()
            .map(|s| f(s).saturating_mul(s.settings.lanes))
            .fold(0usize, usize::saturating_add)
    };
    for (what, total, max) in [
        (
            "fdb_max_entries",
            sum(|s| s.settings.fdb_max_entries),
            MAX_TOTAL_FDB_ENTRIES,
        ),
        (
            "flow_cache_capacity",
            sum(|s| s.settings.flow_cache_capacity),
            MAX_TOTAL_FLOW_CACHE,
        ),
        ("max_rules", sum(|s| s.settings.max_rules), MAX_TOTAL_RULES),
    ] {
        if total > max {
            return Err(ControlError::new(
                weft_control::ErrorKind::LimitReached,
                format!("the switches' {what} add up to {total}; weftd allows {max} in all"),
            )
            .with_hint(format!("give some switches a smaller {what}")));
        }
    }
    Ok(())
}

/// A whole state: its version, each switch, and names unique.
pub fn state(state: &State) -> Result<(), ControlError> {
    if state.version != 1 {
        return Err(ControlError::new(
            weft_control::ErrorKind::UnsupportedVersion,
            format!(
                "state format version {} is not supported; this weftd reads version 1",
                state.version
            ),
        ));
    }
    if state.switches.len() > MAX_SWITCHES {
        return Err(ControlError::new(
            weft_control::ErrorKind::LimitReached,
            format!(
                "{} switches: weftd runs at most {MAX_SWITCHES}",
                state.switches.len()
            ),
        ));
    }
    totals(&state.switches)?;
    let mut names = BTreeSet::new();
    for s in &state.switches {
        switch_state(s).map_err(|e| e.prefixed(&format!("switch {:?}", s.name)))?;
        if !names.insert(s.name.as_str()) {
            return Err(ControlError::exists(format!(
                "switch {:?} is defined twice",
                s.name
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;

/// A socket path a port names, if any: 1 to 107 bytes, no NUL (the limit of a Unix socket
/// path); where it may be is checked when the port opens (`SocketDirs`).
fn socket_path(path: Option<&str>) -> Result<(), ControlError> {
    match path {
        Some(path) if path.is_empty() || path.contains('\0') || path.len() > 107 => {
            Err(ControlError::invalid(format!(
                "invalid socket {path:?}: give a path of 1 to 107 bytes (the limit of a Unix \
                 socket path)"
            )))
        }
        _ => Ok(()),
    }
}
