//! What vhost-user, VXLAN and TCP link devices count and report themselves, read through the
//! [`Keepalive`] a port holds: drops (shown as `port_<reason>` beside weft-tap's), what a
//! VXLAN port's offloads did, and a vhost-user port's connection state and negotiated
//! offloads.

use std::sync::{Arc, Mutex};

use weft_overlay::tcp_link::{TcpLinkDrop, TcpLinkStats};
use weft_overlay::DecapDrop;
use weft_vhost::{
    queue_name, FrameDrop, MemoryRefusal, QueueFault, QueueStats, VhostUserPort, BATCH_BUCKETS,
};

use super::Keepalive;

/// The name a VXLAN decapsulation drop is shown under (without the `port_` prefix).
fn decap_drop_name(reason: DecapDrop) -> &'static str {
    match reason {
        DecapDrop::Truncated => "vxlan_truncated",
        DecapDrop::BadFlags => "vxlan_bad_flags",
        DecapDrop::ReservedBits => "vxlan_reserved_bits",
        DecapDrop::UnknownVni => "vxlan_unknown_vni",
        DecapDrop::UnknownRemote => "vxlan_unknown_remote",
        DecapDrop::InnerTooShort => "vxlan_inner_too_short",
        DecapDrop::InnerTooBig => "vxlan_inner_too_big",
        DecapDrop::InnerBadSource => "vxlan_inner_bad_source",
        DecapDrop::BadGro => "vxlan_bad_gro",
    }
}

/// Drops a vhost-user, VXLAN or TCP link device counted itself, every reason (zeros included), as
/// (`port_<reason>`, count). Empty for other devices.
pub fn device_drops(keep: &Keepalive) -> Vec<(String, u64)> {
    if let Some(vxlan) = keep.downcast_ref::<super::VxlanDevice>() {
        let s = vxlan.stats.snapshot();
        let mut out: Vec<(String, u64)> = DecapDrop::ALL
            .into_iter()
            .map(|r| (format!("port_{}", decap_drop_name(r)), s.drops(r)))
            .collect();
        out.push(("port_vxlan_socket_overflow".into(), s.rx_socket_overflow));
        out.push(("port_vxlan_rx_errors".into(), s.rx_errors));
        out.push(("port_vxlan_tx_errors".into(), s.tx_errors));
        out.push(("port_vxlan_no_remote".into(), s.tx_no_remote));
        // Oversize frames are not listed: the switch refuses them (the port advertises its
        // real MTU) and counts them as `frame_too_big` before the port answers them.
        return out;
    }
    if let Some(link) = keep.downcast_ref::<TcpLinkDevice>() {
        let s = link.stats.snapshot();
        let mut out: Vec<(String, u64)> = TcpLinkDrop::ALL
            .into_iter()
            .map(|r| (format!("port_tcp_{}", r.name()), s.drops(r)))
            .collect();
        // Lost connections lose what was in flight: listed beside the drops. (Connections
        // made are not losses; the port's state shows whether one is up.)
        out.push(("port_tcp_io_errors".into(), s.io_errors));
        out.push(("port_tcp_disconnects".into(), s.disconnects));
        return out;
    }
    if let Some(port) = keep.downcast_ref::<Mutex<VhostUserPort>>() {
        let Ok(port) = port.lock() else {
            return Vec::new();
        };
        let s = port.stats();
        let mut out: Vec<(String, u64)> = (0..s.from_guest.drops.len())
            .map(|i| {
                let n = s.from_guest.drops.get(i).copied().unwrap_or(0)
                    + s.to_guest.drops.get(i).copied().unwrap_or(0);
                (format!("port_vhost_{}", FrameDrop::counter_name(i)), n)
            })
            .collect();
        let faults: u64 = QueueFault::ALL
            .into_iter()
            .map(|f| s.from_guest.faulted(f) + s.to_guest.faulted(f))
            .sum();
        out.push(("port_vhost_queue_faults".into(), faults));
        return out;
    }
    Vec::new()
}

/// What a vhost-user device counts beside drops, per queue (`vhost_<queue>_<counter>`,
/// batch sizes as `vhost_<queue>_batches_<lowest size>`; with several queue pairs each
/// pair's frames, notifications and kicks, `vhost_pair<k>_<queue>_<counter>`), and what a VXLAN port's offloads
/// did (`vxlan_<counter>`), zeros included; empty for other devices.
pub fn device_counters(keep: &Keepalive) -> Vec<(String, u64)> {
    if let Some(vxlan) = keep.downcast_ref::<super::VxlanDevice>() {
        return vxlan_counters(&vxlan.stats.snapshot());
    }
    let Some(port) = keep.downcast_ref::<Mutex<VhostUserPort>>() else {
        return Vec::new();
    };
    let Ok(port) = port.lock() else {
        return Vec::new();
    };
    let s = port.stats();
    let mut out = Vec::new();
    for (queue, q) in [("to_guest", &s.to_guest), ("from_guest", &s.from_guest)] {
        queue_counters(queue, q, &mut out);
    }
    // How the guest's frames reached the switch: lent in place, or copied first.
    out.push(("vhost_from_guest_lent".into(), s.from_guest.lent));
    out.push(("vhost_from_guest_bounced".into(), s.from_guest.bounced));
    // Memory tables its frontends sent that were refused, by reason (each drops that
    // frontend; the port waits for the next).
    for r in MemoryRefusal::ALL {
        let n = s.memory_refusals.get(r.index()).copied().unwrap_or(0);
        out.push((format!("vhost_memory_refused_{}", r.counter_name()), n));
    }
    if s.pairs.len() > 1 {
        // With several queue pairs: how the frames spread over them (and so over the
        // switch's lanes, each of which serves its share of the pairs), and each queue's
        // kicks and notifications (the batch histograms stay totals).
        for (k, pair) in s.pairs.iter().enumerate() {
            for (queue, q) in [
                ("to_guest", &pair.to_guest),
                ("from_guest", &pair.from_guest),
            ] {
                out.push((format!("vhost_pair{k}_{queue}_frames"), q.frames));
                for (name, n) in event_counters(q) {
                    out.push((format!("vhost_pair{k}_{queue}_{name}"), n));
                }
            }
        }
    }
    out
}

/// How a VXLAN port's datagrams went: what the receive half got coalesced by `UDP_GRO` and
/// merged back into super-frames, and how the transmit half sent (super-frames and their
/// `UDP_SEGMENT` sends, runs of small frames, the raw or bound sockets' `sendmmsg` calls).
fn vxlan_counters(s: &weft_overlay::OverlayStatsSnapshot) -> Vec<(String, u64)> {
    [
        ("rx_frames", s.rx_frames),
        ("rx_coalesced", s.rx_coalesced),
        ("rx_merged", s.rx_merged),
        ("tx_datagrams", s.tx_datagrams),
        ("tx_super_frames", s.tx_super_frames),
        ("tx_gso_sends", s.tx_gso_sends),
        ("tx_small_gso_sends", s.tx_small_gso_sends),
        ("tx_small_gso_datagrams", s.tx_small_gso_datagrams),
        ("tx_raw_sends", s.tx_raw_sends),
    ]
    .into_iter()
    .map(|(name, n)| (format!("vxlan_{name}"), n))
    .collect()
}

/// A queue's notification and kick counters, by name.
fn event_counters(q: &QueueStats) -> [(&'static str, u64); 5] {
    [
        ("notifications", q.notifications),
        ("notifications_suppressed", q.notifications_suppressed),
        ("notifications_held", q.notifications_held),
        ("kicks", q.kicks),
        ("dispatch_changes", q.dispatch_changes),
    ]
}

fn queue_counters(queue: &str, q: &QueueStats, out: &mut Vec<(String, u64)>) {
    for (name, n) in event_counters(q) {
        out.push((format!("vhost_{queue}_{name}"), n));
    }
    // The work the guest asked of the port, and how often its budget cut a look short.
    out.push((format!("vhost_{queue}_descriptors"), q.descriptors));
    out.push((format!("vhost_{queue}_budget_cuts"), q.budget_cuts));
    // Why its rings broke (each breaks once, until the frontend restarts it).
    for f in QueueFault::ALL {
        out.push((
            format!("vhost_{queue}_fault_{}", f.counter_name()),
            q.faulted(f),
        ));
    }
    for (i, n) in q.batch_sizes.iter().enumerate().take(BATCH_BUCKETS) {
        out.push((format!("vhost_{queue}_batches_{}", 1u64 << i), *n));
    }
}

/// A vhost-user port's offloads as negotiated now, then its state (`connected` or
/// `disconnected`, `running` once the frontend started its rings, and
/// `broken:<queue>:<fault>` for each ring broken now); `None` for other devices.
pub fn live_offloads(keep: &Keepalive) -> Option<Vec<String>> {
    if let Some(link) = keep.downcast_ref::<TcpLinkDevice>() {
        let mut names = link.offloads.clone();
        names.push(tcp_link_state(&link.stats).into());
        return Some(names);
    }
    let port = keep.downcast_ref::<Mutex<VhostUserPort>>()?;
    let port = port.lock().ok()?;
    let caps = port.caps();
    let mut names = Vec::new();
    if caps.partial_csum {
        names.push("csum");
    }
    if caps.tso4 {
        names.push("tso4");
    }
    if caps.tso6 {
        names.push("tso6");
    }
    if caps.uso {
        names.push("uso");
    }
    names.push(if port.is_connected() {
        "connected"
    } else {
        "disconnected"
    });
    if port.is_running() {
        names.push("running");
    }
    let mut names: Vec<String> = names.into_iter().map(String::from).collect();
    // A ring broken now (until the frontend restarts it), named with why.
    for (index, q) in port.queue_status().iter().enumerate() {
        if let Some(fault) = q.fault {
            names.push(format!(
                "broken:{}:{}",
                queue_name(index),
                fault.counter_name()
            ));
        }
    }
    Some(names)
}

/// What a TCP link port keeps alive and reports: its counters and configured offloads.
pub struct TcpLinkDevice {
    /// The link's counters (and whether it is connected).
    pub stats: Arc<TcpLinkStats>,
    /// The offloads it carries across.
    pub offloads: Vec<String>,
}

/// A TCP link's state as `weft port show` lists it beside the offloads.
fn tcp_link_state(stats: &TcpLinkStats) -> &'static str {
    if stats.snapshot().connected {
        "connected"
    } else {
        "disconnected"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tcp_link_lists_its_flood_and_takeover_refusals_with_its_drops() {
        let keep: Keepalive = Arc::new(TcpLinkDevice {
            stats: Arc::new(TcpLinkStats::default()),
            offloads: Vec::new(),
        });
        let names: Vec<String> = device_drops(&keep).into_iter().map(|(n, _)| n).collect();
        for name in ["port_tcp_handshake_limit", "port_tcp_refused_takeover"] {
            assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
        }
    }

    #[test]
    fn virtqueues_are_named_by_pair_and_direction_as_the_guest_sees_them() {
        let names: Vec<&str> = (0..5).map(queue_name).collect();
        assert_eq!(names, ["rx0", "tx0", "rx1", "tx1", "rx2"]);
    }

    #[test]
    fn a_vhost_queue_counts_each_fault_under_its_own_name() {
        let q = QueueStats {
            faults: std::array::from_fn(|i| i as u64 + 1),
            ..QueueStats::default()
        };
        let mut out = Vec::new();
        queue_counters("from_guest", &q, &mut out);
        let get = |name: &str| out.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
        assert_eq!(
            get("vhost_from_guest_fault_avail_index_out_of_range"),
            Some(1)
        );
        assert_eq!(
            get("vhost_from_guest_fault_memory_truncated"),
            Some(QueueFault::ALL.len() as u64)
        );
    }

    #[test]
    fn a_vhost_queue_reports_the_descriptors_it_read_and_its_budget_cuts() {
        let q = QueueStats {
            descriptors: 4096,
            budget_cuts: 3,
            ..QueueStats::default()
        };
        let mut out = Vec::new();
        queue_counters("from_guest", &q, &mut out);
        let get = |name: &str| out.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
        assert_eq!(get("vhost_from_guest_descriptors"), Some(4096));
        assert_eq!(get("vhost_from_guest_budget_cuts"), Some(3));
    }

    #[test]
    fn a_vhost_port_lists_its_memory_table_refusals_by_reason() {
        let dir = tempfile::tempdir().unwrap();
        let port = VhostUserPort::listen(
            dir.path().join("p.sock"),
            weft_vhost::VhostPortConfig::default(),
        )
        .unwrap();
        let keep: Keepalive = Arc::new(Mutex::new(port));
        let counters = device_counters(&keep);
        for r in MemoryRefusal::ALL {
            let name = format!("vhost_memory_refused_{}", r.counter_name());
            assert!(
                counters.iter().any(|(n, v)| *n == name && *v == 0),
                "{name} in {counters:?}"
            );
        }
    }
}
