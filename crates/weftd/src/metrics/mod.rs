//! Metrics in the Prometheus text format (version 0.0.4), served on `GET /metrics`.
//!
//! The format is small and written here directly: `# HELP` and `# TYPE` once per family,
//! then one sample per label set, label values escaped (`\\`, `\"`, `\n`). Counters end in
//! `_total`. Values are read at scrape time: port counters through their atomics, switch
//! counters by one job per worker.

pub mod http;

use std::fmt::Write;

use weft_switch::DropReason;

use crate::control::stats::Snapshot;

/// Escapes a label value.
pub fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// A metric family being written.
struct Family<'a> {
    out: &'a mut String,
    name: &'static str,
}

impl<'a> Family<'a> {
    fn new(out: &'a mut String, name: &'static str, kind: &str, help: &str) -> Self {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        Family { out, name }
    }

    fn sample(&mut self, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        let _ = write!(self.out, "{}", self.name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }
}

/// What the daemon itself reports beside the data path.
#[derive(Debug, Clone, Copy, Default)]
pub struct DaemonGauges {
    /// Control clients connected.
    pub control_clients: usize,
}

/// The whole exposition.
pub fn encode(snap: &Snapshot, daemon: DaemonGauges) -> String {
    let mut out = String::new();
    type PortValue = fn(&weft_switch::PortCountersSnapshot) -> u64;
    let port_counters: [(&'static str, &str, PortValue); 4] = [
        (
            "weft_port_rx_packets_total",
            "Frames received from the port.",
            |c| c.rx_packets,
        ),
        (
            "weft_port_rx_bytes_total",
            "Bytes received from the port.",
            |c| c.rx_bytes,
        ),
        (
            "weft_port_tx_packets_total",
            "Frames sent to the port.",
            |c| c.tx_packets,
        ),
        ("weft_port_tx_bytes_total", "Bytes sent to the port.", |c| {
            c.tx_bytes
        }),
    ];
    for (name, help, value) in port_counters {
        let mut f = Family::new(&mut out, name, "counter", help);
        for s in &snap.switches {
            for p in &s.ports {
                f.sample(
                    &[("switch", &s.name), ("port", &p.name)],
                    value(&p.counters),
                );
            }
        }
    }
    let mut f = Family::new(
        &mut out,
        "weft_port_drops_total",
        "counter",
        "Frames dropped, by the port they were charged to and the reason.",
    );
    for s in &snap.switches {
        for p in &s.ports {
            for reason in DropReason::ALL {
                f.sample(
                    &[
                        ("switch", &s.name),
                        ("port", &p.name),
                        ("reason", reason.name()),
                    ],
                    p.counters.drops(reason),
                );
            }
            // Drops the device counted itself, before the switch saw the frame (or when the
            // kernel or the peer refused it): same family, `port_`-prefixed reasons.
            for (reason, n) in &p.device.drops {
                f.sample(
                    &[("switch", &s.name), ("port", &p.name), ("reason", reason)],
                    *n,
                );
            }
        }
    }
    let mut f = Family::new(
        &mut out,
        "weft_port_device_events_total",
        "counter",
        "What a port's device counted beside drops: a vhost-user port's kicks, \
         notifications (sent, suppressed by the guest, held by policy), dispatch mode \
         changes and batches by size, per queue.",
    );
    for s in &snap.switches {
        for p in &s.ports {
            for (counter, n) in &p.device.events {
                f.sample(
                    &[("switch", &s.name), ("port", &p.name), ("counter", counter)],
                    *n,
                );
            }
        }
    }
    let mut f = Family::new(
        &mut out,
        "weft_port_up",
        "gauge",
        "1 when the port's device works, 0 when it could not be created.",
    );
    for s in &snap.switches {
        for p in &s.ports {
            f.sample(&[("switch", &s.name), ("port", &p.name)], u8::from(p.up));
        }
    }
    let mut f = Family::new(
        &mut out,
        "weft_port_mtu_over_overlay",
        "gauge",
        "1 when the port's MTU (or its guest's) is larger than an overlay port of its switch \
         carries: larger frames to other hosts are dropped.",
    );
    for s in &snap.switches {
        for p in &s.ports {
            f.sample(
                &[("switch", &s.name), ("port", &p.name)],
                u8::from(p.mtu_over_overlay),
            );
        }
    }
    type SwitchValue = fn(&crate::control::stats::SwitchSnapshot) -> u64;
    let switch_metrics: [(&'static str, &str, &str, SwitchValue); 15] = [
        (
            "weft_switch_fdb_entries",
            "gauge",
            "FDB entries, static and learned.",
            |s| s.stats.fdb_entries as u64,
        ),
        (
            "weft_switch_fdb_moves_total",
            "counter",
            "Learned FDB entries that moved to another port.",
            |s| s.stats.fdb_moves,
        ),
        (
            "weft_switch_mac_flap_episodes_total",
            "counter",
            "MAC addresses found flapping between ports and held where they were.",
            |s| s.stats.mac_flap_episodes,
        ),
        ("weft_switch_rules", "gauge", "Flow rules installed.", |s| {
            s.rules as u64
        }),
        (
            "weft_switch_batches_total",
            "counter",
            "Receive batches processed.",
            |s| s.stats.batches,
        ),
        (
            "weft_switch_rx_packets_total",
            "counter",
            "Frames received, all ports.",
            |s| s.stats.rx_packets,
        ),
        (
            "weft_switch_flow_cache_hits_total",
            "counter",
            "Forwarding decisions served by the flow cache.",
            |s| s.stats.flow_cache.hits,
        ),
        (
            "weft_switch_flow_cache_misses_total",
            "counter",
            "Forwarding decisions the flow cache did not have.",
            |s| s.stats.flow_cache.misses,
        ),
        (
            "weft_switch_upcalls_total",
            "counter",
            "Packets queued for the control plane (controller action).",
            |s| s.stats.upcalls.queued,
        ),
        (
            "weft_switch_upcall_drops_total",
            "counter",
            "Upcalls dropped because their queue was full.",
            |s| s.stats.upcalls.dropped_full,
        ),
        (
            "weft_switch_upcalls_unclaimed_total",
            "counter",
            "Upcalls dropped because no controller subscribed to the switch's upcalls.",
            |s| s.stats.upcalls.unclaimed,
        ),
        (
            "weft_switch_upcall_subscriber_lost_total",
            "counter",
            "Upcall copies a subscriber lost because its queue was full (one per subscriber).",
            |s| s.stats.upcalls.subscriber_lost,
        ),
        (
            "weft_switch_packet_out_sent_total",
            "counter",
            "Frames a controller sent out of a port (packet_out with output).",
            |s| s.stats.packet_out.sent,
        ),
        (
            "weft_switch_packet_out_injected_total",
            "counter",
            "Frames a controller ran through the switch (packet_out with in_port).",
            |s| s.stats.packet_out.injected,
        ),
        (
            "weft_switch_packet_out_refused_total",
            "counter",
            "Frames of a controller the switch refused (too big for the port, queue full).",
            |s| s.stats.packet_out.refused,
        ),
    ];
    for (name, kind, help, value) in switch_metrics {
        let mut f = Family::new(&mut out, name, kind, help);
        for s in &snap.switches {
            f.sample(&[("switch", &s.name)], value(s));
        }
    }
    let mut f = Family::new(
        &mut out,
        "weft_switch_lane_records_total",
        "counter",
        "Learned FDB entries a lane of a switch on several lanes exchanged with the others: \
         posted (once per receiving lane), lost (an inbox was full), applied, stale (ports \
         changed meanwhile).",
    );
    for s in &snap.switches {
        for (lane, l) in s.lanes.iter().enumerate() {
            let (lane, worker) = (lane.to_string(), l.worker.to_string());
            let l = &l.exchange;
            for (outcome, n) in [
                ("posted", l.posted),
                ("lost", l.lost),
                ("applied", l.applied),
                ("stale", l.stale),
            ] {
                f.sample(
                    &[
                        ("switch", &s.name),
                        ("lane", &lane),
                        ("worker", &worker),
                        ("outcome", outcome),
                    ],
                    n,
                );
            }
        }
    }
    let mut f = Family::new(
        &mut out,
        "weft_switch_lane_rx_packets_total",
        "counter",
        "Packets a lane of a switch on several lanes received: how a multiqueue port's \
         queues and the switch's ports spread over its workers.",
    );
    for s in &snap.switches {
        for (lane, l) in s.lanes.iter().enumerate() {
            f.sample(
                &[
                    ("switch", &s.name),
                    ("lane", &lane.to_string()),
                    ("worker", &l.worker.to_string()),
                ],
                l.rx_packets,
            );
        }
    }
    let mut f = Family::new(
        &mut out,
        "weft_worker_busy_ratio",
        "gauge",
        "Fraction of time the worker spent moving packets since it started.",
    );
    for w in &snap.workers {
        f.sample(&[("worker", &w.index.to_string())], w.stats.busy_fraction());
    }
    #[allow(clippy::cast_precision_loss)]
    let secs = |ns: u64| ns as f64 / 1e9;
    let mut f = Family::new(
        &mut out,
        "weft_worker_busy_seconds_total",
        "counter",
        "Time the worker spent in passes that moved packets.",
    );
    for w in &snap.workers {
        f.sample(&[("worker", &w.index.to_string())], secs(w.stats.busy_ns));
    }
    let mut f = Family::new(
        &mut out,
        "weft_worker_packets_total",
        "counter",
        "Frames the worker received.",
    );
    for w in &snap.workers {
        f.sample(&[("worker", &w.index.to_string())], w.stats.packets);
    }
    let mut f = Family::new(
        &mut out,
        "weft_worker_switches",
        "gauge",
        "Switches the worker runs.",
    );
    for w in &snap.workers {
        f.sample(&[("worker", &w.index.to_string())], w.switches.len());
    }
    let mut f = Family::new(
        &mut out,
        "weftd_control_clients",
        "gauge",
        "Clients connected to the control socket.",
    );
    f.sample(&[], daemon.control_clients);
    let mut f = Family::new(&mut out, "weftd_info", "gauge", "weftd's version.");
    f.sample(&[("version", env!("CARGO_PKG_VERSION"))], 1);
    out
}

#[cfg(test)]
mod tests;
