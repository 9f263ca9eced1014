//! Answers as people read them.

use std::collections::BTreeMap;

use weft_control::response::{
    FdbEntry, PortCounters, PortInfo, RemoteMacEntry, RuleInfo, SwitchInfo, SwitchStats,
    WorkerStats,
};
use weft_control::state::{MacLimitAction, PortKind, PortSettings, VlanMode};
use weft_control::{Request, Response};

use super::{json, Align, Table};
use crate::rule_syntax::format_rule;

/// The answer to `request` for people.
pub fn human(request: &Request, response: &Response) -> String {
    match response {
        Response::Hello {
            daemon_version,
            protocol_version,
            pid,
        } => match pid {
            Some(pid) => {
                format!("weftd {daemon_version} (protocol {protocol_version}, pid {pid})\n")
            }
            None => format!("weftd {daemon_version} (protocol {protocol_version})\n"),
        },
        Response::Done => String::new(),
        Response::Switches { switches } => switches_table(switches),
        Response::Ports { ports } => ports_table(ports),
        Response::Port { port, counters } => port_detail(port, counters),
        Response::Fdb { entries } => fdb_table(entries),
        Response::RemoteMacs { entries } => remote_macs_table(entries),
        Response::Directory { status } => directory::status(status),
        Response::RuleAdded { id } => format!("{id}\n"),
        Response::Rules { rules } => rules_table(rules),
        Response::Stats { switches, workers } => stats(switches, workers),
        Response::Config { state } => json(state),
        Response::Applied { changes } => {
            let dry_run = matches!(request, Request::ConfigApply { dry_run: true, .. });
            applied(changes, dry_run)
        }
        Response::CaptureStarted { .. }
        | Response::CapturePackets { .. }
        | Response::UpcallSubscribed { .. }
        | Response::Upcalls { .. } => json(response),
    }
}

/// The `kind` an answer is serialized with (`switches`, `done`, ...).
pub fn kind_name(response: &Response) -> String {
    serde_json::to_value(response)
        .ok()
        .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

fn switches_table(switches: &[SwitchInfo]) -> String {
    if switches.is_empty() {
        return "no switches\n".into();
    }
    use Align::{Left as L, Right as R};
    let mut t = Table::new(&[
        ("NAME", L),
        ("PORTS", R),
        ("FDB", R),
        ("RULES", R),
        ("WORKER", R),
        ("BATCH", R),
        ("FDB-MAX", R),
        ("PER-PORT", R),
        ("AGEING", R),
        ("MAX-RULES", R),
        ("CACHE", R),
    ]);
    for s in switches {
        let c = &s.settings;
        t.row([
            s.name.clone(),
            s.ports.to_string(),
            s.fdb_entries.to_string(),
            s.rules.to_string(),
            workers_label(s),
            c.batch_size.to_string(),
            c.fdb_max_entries.to_string(),
            c.fdb_max_per_port.to_string(),
            format!("{}s", c.fdb_ageing_secs),
            c.max_rules.to_string(),
            c.flow_cache_capacity.to_string(),
        ]);
    }
    t.render()
}

/// The worker of each lane, `0` or `0,1`.
fn workers_label(s: &SwitchInfo) -> String {
    if s.workers.is_empty() {
        return s.worker.to_string();
    }
    let list: Vec<String> = s.workers.iter().map(usize::to_string).collect();
    list.join(",")
}

/// `tap`, `af-packet`, `af-xdp`, `vhost-user`, `memif`, `vxlan`, `tcp-link`.
pub(crate) fn kind_label(kind: &PortKind) -> &'static str {
    match kind {
        PortKind::Tap { .. } => "tap",
        PortKind::AfPacket { .. } => "af-packet",
        PortKind::AfXdp { .. } => "af-xdp",
        PortKind::VhostUser { .. } => "vhost-user",
        PortKind::Memif { .. } => "memif",
        PortKind::Vxlan { .. } => "vxlan",
        PortKind::TcpLink { .. } => "tcp-link",
    }
}

fn ifname(port: &PortInfo) -> &str {
    match &port.kind {
        PortKind::Tap { ifname, .. } => ifname.as_deref().unwrap_or(&port.name),
        PortKind::AfPacket { ifname } | PortKind::AfXdp { ifname, .. } => ifname,
        PortKind::VhostUser { .. }
        | PortKind::Memif { .. }
        | PortKind::Vxlan { .. }
        | PortKind::TcpLink { .. } => "-",
    }
}

/// `-`, `access 10`, `trunk 10,20 native 1`.
pub(crate) fn vlan_label(vlan: &VlanMode) -> String {
    match vlan {
        VlanMode::Plain => "-".into(),
        VlanMode::Access { vlan } => format!("access {vlan}"),
        VlanMode::Trunk { vlans, native } => {
            let list: Vec<String> = vlans.iter().map(u16::to_string).collect();
            match native {
                Some(n) => format!("trunk {} native {n}", list.join(",")),
                None => format!("trunk {}", list.join(",")),
            }
        }
    }
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn list_or_dash(items: &[String]) -> String {
    if items.is_empty() {
        "-".into()
    } else {
        items.join(",")
    }
}

fn ports_table(ports: &[PortInfo]) -> String {
    if ports.is_empty() {
        return "no ports\n".into();
    }
    use Align::{Left as L, Right as R};
    let mut t = Table::new(&[
        ("SWITCH", L),
        ("PORT", L),
        ("TYPE", L),
        ("STATE", L),
        ("IFNAME", L),
        ("VLAN", L),
        ("MTU", R),
        ("LEARN", L),
        ("FLOOD", L),
        ("OFFLOADS", L),
    ]);
    for p in ports {
        t.row([
            p.switch.clone(),
            p.name.clone(),
            kind_label(&p.kind).into(),
            if p.failed.is_some() { "failed" } else { "up" }.into(),
            ifname(p).into(),
            vlan_label(&p.options.vlan),
            p.mtu.to_string(),
            yes_no(p.options.learning).into(),
            yes_no(p.options.flood_unknown_unicast).into(),
            list_or_dash(&p.offloads),
        ]);
    }
    t.render()
}

fn kind_detail(port: &PortInfo) -> String {
    match &port.kind {
        PortKind::Tap {
            netns,
            queues,
            mtu,
            offloads,
            ..
        } => {
            let mut s = format!("tap, ifname {}", ifname(port));
            if let Some(ns) = netns {
                s.push_str(&format!(", netns {ns}"));
            }
            s.push_str(&format!(
                ", {queues} queue{}, device mtu {mtu}, kernel offloads {}",
                if *queues == 1 { "" } else { "s" },
                if *offloads { "on" } else { "off" }
            ));
            s
        }
        PortKind::AfPacket { ifname } => format!("af-packet, ifname {ifname}"),
        PortKind::AfXdp {
            ifname,
            queue,
            attach,
        } => format!(
            "af-xdp, ifname {ifname}, queue {queue}, xdp {}",
            attach.as_str()
        ),
        PortKind::VhostUser {
            socket,
            mode,
            mtu,
            dispatch,
            notify,
            queues,
        } => format!(
            "vhost-user, {} mode, socket {}, mtu {mtu}, dispatch {}, notify {}, {queues} queue \
             pair{}",
            mode.name(),
            socket
                .as_deref()
                .unwrap_or("(default, in the runtime directory)"),
            dispatch.map_or_else(|| "adaptive (default)".to_string(), |d| d.to_string()),
            notify.map_or_else(|| "immediate (default)".to_string(), |n| n.to_string()),
            if *queues == 1 { "" } else { "s" }
        ),
        PortKind::Memif {
            socket,
            id,
            role,
            secret,
            queues,
            mtu,
        } => format!(
            "memif, {} role, socket {}, id {id}, {}, mtu {mtu}, {queues} queue pair{}",
            role.name(),
            socket
                .as_deref()
                .unwrap_or("(default, in the runtime directory)"),
            if secret.is_some() {
                "with a secret"
            } else {
                "no secret"
            },
            if *queues == 1 { "" } else { "s" }
        ),
        PortKind::Vxlan {
            local,
            vni,
            remotes,
            netns,
            learning,
            port,
            remote_macs,
            remote_ageing,
            directory,
        } => {
            let mut s = format!("vxlan, local {local}, vni {vni}");
            if let Some(p) = port {
                s.push_str(&format!(", udp port {p}"));
            }
            if !remotes.is_empty() {
                s.push_str(&format!(
                    ", remotes {}",
                    remotes
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                ));
            }
            if let Some(ns) = netns {
                s.push_str(&format!(", netns {ns}"));
            }
            s.push_str(if *learning { ", learning" } else { "" });
            s.push_str(if *directory { ", directory" } else { "" });
            if !remote_macs.is_empty() {
                s.push_str(&format!(", {} static remote MACs", remote_macs.len()));
            }
            s.push_str(&format!(", remote ageing {remote_ageing} s"));
            s
        }
        PortKind::TcpLink {
            listen,
            connect,
            netns,
            link_id,
            mtu,
            offloads,
            key_file,
        } => {
            let mut s = String::from("tcp-link");
            if let Some(a) = listen {
                s.push_str(&format!(", listen {a}"));
            }
            if let Some(a) = connect {
                s.push_str(&format!(", connect {a}"));
            }
            s.push_str(&format!(", link id {link_id}, mtu {mtu}"));
            if let Some(ns) = netns {
                s.push_str(&format!(", netns {ns}"));
            }
            s.push_str(if *offloads { "" } else { ", no offloads" });
            match key_file {
                Some(path) => s.push_str(&format!(", key file {path}")),
                None => s.push_str(", unauthenticated"),
            }
            s
        }
    }
}

fn port_detail(port: &PortInfo, c: &PortCounters) -> String {
    let mut out = format!("port {}:{}\n", port.switch, port.name);
    let mut t = Table::bare(&[Align::Left, Align::Left]);
    t.row(["type".into(), kind_detail(port)]);
    t.row([
        "state".into(),
        port.failed
            .as_ref()
            .map_or("up".into(), |why| format!("failed: {why}")),
    ]);
    if let Some(how) = &port.attached {
        t.row(["attached".into(), how.clone()]);
    }
    t.row(["vlan".into(), vlan_label(&port.options.vlan)]);
    t.row(["learning", yes_no(port.options.learning)]);
    t.row([
        "flood unknown unicast",
        yes_no(port.options.flood_unknown_unicast),
    ]);
    t.row(["mtu".into(), port.mtu.to_string()]);
    if let Some(mtu) = port.guest_mtu {
        t.row(["guest mtu".into(), mtu.to_string()]);
    }
    for w in &port.warnings {
        t.row(["warning".into(), w.clone()]);
    }
    t.row(["offloads".into(), list_or_dash(&port.offloads)]);
    for (name, value) in policy_rows(&port.options) {
        t.row([name.to_string(), value]);
    }
    out.push_str(&t.render_indented("  "));
    out.push_str("counters\n");
    let mut t = Table::new(&[
        ("", Align::Left),
        ("PACKETS", Align::Right),
        ("BYTES", Align::Right),
    ]);
    t.row([
        "rx".into(),
        c.rx_packets.to_string(),
        c.rx_bytes.to_string(),
    ]);
    t.row([
        "tx".into(),
        c.tx_packets.to_string(),
        c.tx_bytes.to_string(),
    ]);
    out.push_str(&t.render_indented("  "));
    out.push_str(&drops_block(&c.drops));
    if !c.device.is_empty() {
        let mut t = Table::bare(&[Align::Left, Align::Right]);
        for (name, n) in &c.device {
            t.row([name.clone(), n.to_string()]);
        }
        out.push_str(&format!("device\n{}", t.render_indented("  ")));
    }
    out
}

/// The rows of a port's ingress policy: only what is on.
fn policy_rows(o: &PortSettings) -> Vec<(&'static str, String)> {
    let mut rows = Vec::new();
    let sec = &o.security;
    if sec.is_enabled() {
        let list = |items: Vec<String>| {
            if items.is_empty() {
                "any".to_string()
            } else {
                items.join(", ")
            }
        };
        rows.push((
            "allowed macs",
            list(sec.allowed_macs.iter().map(ToString::to_string).collect()),
        ));
        rows.push((
            "allowed ips",
            list(sec.allowed_ips.iter().map(ToString::to_string).collect()),
        ));
        let allowed = |on: bool| if on { "allowed" } else { "dropped" }.to_string();
        rows.push(("dhcp server", allowed(sec.allow_dhcp_server)));
        rows.push((
            "router advertisements",
            allowed(sec.allow_router_advertisements),
        ));
    }
    if o.storm.is_enabled() {
        let kinds: Vec<String> = [
            ("broadcast", o.storm.broadcast),
            ("multicast", o.storm.multicast),
            ("unknown unicast", o.storm.unknown_unicast),
        ]
        .into_iter()
        .filter_map(|(kind, rate)| rate.map(|r| format!("{kind} {r}")))
        .collect();
        rows.push((
            "storm control",
            format!("{}, burst {} ms", kinds.join(", "), o.storm.burst_ms),
        ));
    }
    if let Some(limit) = o.mac_limit {
        let action = match limit.action {
            MacLimitAction::NoLearn => "no-learn",
            MacLimitAction::Drop => "drop",
        };
        rows.push(("mac limit", format!("{}, then {action}", limit.max)));
    }
    rows
}

fn drops_block(drops: &BTreeMap<String, u64>) -> String {
    if drops.is_empty() {
        return "drops: none\n".into();
    }
    let mut t = Table::bare(&[Align::Left, Align::Right]);
    for (reason, n) in drops {
        t.row([reason.clone(), n.to_string()]);
    }
    format!("drops\n{}", t.render_indented("  "))
}

fn fdb_table(entries: &[FdbEntry]) -> String {
    if entries.is_empty() {
        return "no FDB entries\n".into();
    }
    use Align::{Left as L, Right as R};
    let mut t = Table::new(&[
        ("VLAN", R),
        ("MAC", L),
        ("PORT", L),
        ("TYPE", L),
        ("AGE", R),
    ]);
    for e in entries {
        t.row([
            e.vlan.to_string(),
            e.mac.clone(),
            e.port.clone(),
            if e.is_static { "static" } else { "learned" }.into(),
            e.age_secs.map_or("-".into(), |a| format!("{a}s")),
        ]);
    }
    t.render()
}

fn remote_macs_table(entries: &[RemoteMacEntry]) -> String {
    if entries.is_empty() {
        return "no remote FDB entries\n".into();
    }
    use Align::{Left as L, Right as R};
    let mut t = Table::new(&[("MAC", L), ("REMOTE", L), ("SOURCE", L), ("AGE", R)]);
    for e in entries {
        t.row([
            e.mac.clone(),
            e.remote.clone(),
            e.source_name().into(),
            e.age_secs.map_or("-".into(), |a| format!("{a}s")),
        ]);
    }
    t.render()
}

fn rules_table(rules: &[RuleInfo]) -> String {
    if rules.is_empty() {
        return "no rules\n".into();
    }
    use Align::{Left as L, Right as R};
    let mut t = Table::new(&[("ID", R), ("PACKETS", R), ("BYTES", R), ("RULE", L)]);
    for r in rules {
        t.row([
            r.id.to_string(),
            r.packets.to_string(),
            r.bytes.to_string(),
            format_rule(&r.rule),
        ]);
    }
    t.render()
}

/// Total drops and the reasons, `3 (fdb_full=1,no_destination=2)`.
pub(crate) fn drops_summary(drops: &BTreeMap<String, u64>) -> String {
    let total: u64 = drops.values().fold(0, |a, b| a.saturating_add(*b));
    if total == 0 {
        return "0".into();
    }
    let reasons: Vec<String> = drops
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(r, n)| format!("{r}={n}"))
        .collect();
    format!("{total} ({})", reasons.join(","))
}

fn hit_rate(hits: u64, misses: u64) -> String {
    let total = hits.saturating_add(misses);
    if total == 0 {
        return "-".into();
    }
    #[allow(clippy::cast_precision_loss)] // a percentage needs no more than f64's precision
    let pct = hits as f64 * 100.0 / total as f64;
    format!("{pct:.1}%")
}

fn stats(switches: &[SwitchStats], workers: &[WorkerStats]) -> String {
    use Align::{Left as L, Right as R};
    let mut out = String::new();
    if switches.is_empty() {
        out.push_str("no switches\n");
    }
    for s in switches {
        out.push_str(&format!(
            "switch {}: {} batches, {} rx packets, {} FDB entries, flow cache {} hits \
             ({} hits, {} misses), {} upcalls\n",
            s.name,
            s.batches,
            s.rx_packets,
            s.fdb_entries,
            hit_rate(s.flow_cache_hits, s.flow_cache_misses),
            s.flow_cache_hits,
            s.flow_cache_misses,
            s.upcalls
        ));
        for l in &s.lanes {
            out.push_str(&format!(
                "  lane {} (worker {}): {} rx packets; learned entries posted {}, lost {}; \
                 taken in {}, stale {}\n",
                l.lane, l.worker, l.rx_packets, l.posted, l.lost, l.applied, l.stale
            ));
        }
        let mut t = Table::new(&[
            ("PORT", L),
            ("RX-PKTS", R),
            ("RX-BYTES", R),
            ("TX-PKTS", R),
            ("TX-BYTES", R),
            ("DROPS", L),
        ]);
        for p in &s.ports {
            let c = &p.counters;
            t.row([
                p.name.clone(),
                c.rx_packets.to_string(),
                c.rx_bytes.to_string(),
                c.tx_packets.to_string(),
                c.tx_bytes.to_string(),
                drops_summary(&c.drops),
            ]);
        }
        if !t.is_empty() {
            out.push_str(&t.render_indented("  "));
        }
    }
    if !workers.is_empty() {
        out.push_str("workers\n");
        out.push_str(&workers_table(workers).render_indented("  "));
    }
    out
}

/// Workers: id, CPU, busy %, batches, switches.
pub(crate) fn workers_table(workers: &[WorkerStats]) -> Table {
    use Align::{Left as L, Right as R};
    let mut t = Table::new(&[
        ("WORKER", R),
        ("CPU", R),
        ("BUSY", R),
        ("BATCHES", R),
        ("SWITCHES", L),
    ]);
    for w in workers {
        t.row([
            w.id.to_string(),
            w.cpu.map_or("-".into(), |c| c.to_string()),
            format!("{:.1}%", w.busy_fraction * 100.0),
            w.batches.to_string(),
            list_or_dash(&w.switches),
        ]);
    }
    t
}

fn applied(changes: &[String], dry_run: bool) -> String {
    let mut out = String::new();
    if changes.is_empty() {
        out.push_str("no changes\n");
        return out;
    }
    if dry_run {
        out.push_str("dry run: these changes would be made (nothing was applied):\n");
    }
    for c in changes {
        out.push_str(&format!("{}{c}\n", if dry_run { "  " } else { "" }));
    }
    out
}

mod directory;

#[cfg(test)]
mod tests;
