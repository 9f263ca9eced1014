use weft_runtime::WorkerStats;
use weft_switch::{PortCountersSnapshot, SwitchStats};

use super::*;
use crate::control::stats::{LaneSnapshot, PortSnapshot, SwitchSnapshot, WorkerSnapshot};

fn snapshot() -> Snapshot {
    Snapshot {
        switches: vec![SwitchSnapshot {
            name: "br0".into(),
            worker: 0,
            stats: SwitchStats::default(),
            rules: 2,
            ports: vec![PortSnapshot {
                name: "vm\"1\\x".into(),
                up: false,
                mtu_over_overlay: true,
                counters: PortCountersSnapshot {
                    rx_packets: 5,
                    drops: vec![(DropReason::TxQueueFull, 3)],
                    ..PortCountersSnapshot::default()
                },
                device: crate::control::stats::DeviceCounters {
                    drops: vec![
                        ("port_bad_vnet_header".into(), 0),
                        ("port_tx_error".into(), 7),
                        ("port_ring_full".into(), 0),
                        ("port_vxlan_unknown_vni".into(), 2),
                    ],
                    events: vec![("vhost_to_guest_notifications".into(), 9)],
                },
            }],
            lanes: vec![
                LaneSnapshot {
                    worker: 0,
                    rx_packets: 60,
                    exchange: weft_switch::lanes::LaneStats::default(),
                },
                LaneSnapshot {
                    worker: 1,
                    rx_packets: 40,
                    exchange: weft_switch::lanes::LaneStats {
                        applied: 4,
                        ..Default::default()
                    },
                },
            ],
        }],
        workers: vec![WorkerSnapshot {
            index: 0,
            cpu: None,
            stats: WorkerStats {
                busy_ns: 1_500_000_000,
                total_ns: 3_000_000_000,
                busy_passes: 1,
                packets: 5,
            },
            switches: vec!["br0".into()],
        }],
    }
}

/// Checks the text format line by line: comments are HELP/TYPE of a known kind, once per
/// family and before its samples; samples are `name{labels} value` with a numeric value
/// and escaped labels.
pub(crate) fn check_exposition(text: &str) -> Result<(), String> {
    let mut typed = std::collections::BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (kind, name, tail) = (parts.next(), parts.next(), parts.next().unwrap_or(""));
            match kind {
                Some("HELP") => {}
                Some("TYPE") => {
                    if !["counter", "gauge"].contains(&tail) {
                        return Err(format!("bad type: {line}"));
                    }
                    if !typed.insert(name.unwrap_or("").to_string()) {
                        return Err(format!("family typed twice: {line}"));
                    }
                }
                _ => return Err(format!("bad comment: {line}")),
            }
            continue;
        }
        let (series, value) = line.rsplit_once(' ').ok_or(format!("no value: {line}"))?;
        value
            .parse::<f64>()
            .map_err(|_| format!("bad value: {line}"))?;
        let name = series.split('{').next().unwrap_or("");
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') || !typed.contains(name) {
            return Err(format!("bad or untyped name: {line}"));
        }
        if let Some(labels) = series.strip_prefix(name).filter(|l| !l.is_empty()) {
            let inner = labels
                .strip_prefix('{')
                .and_then(|l| l.strip_suffix('}'))
                .ok_or(format!("bad labels: {line}"))?;
            let mut chars = inner.chars().peekable();
            while chars.peek().is_some() {
                let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
                if key.is_empty() || chars.next() != Some('"') {
                    return Err(format!("bad label: {line}"));
                }
                loop {
                    match chars.next() {
                        Some('\\') => {
                            if !matches!(chars.next(), Some('\\' | '"' | 'n')) {
                                return Err(format!("bad escape: {line}"));
                            }
                        }
                        Some('"') => break,
                        Some(_) => {}
                        None => return Err(format!("unterminated label: {line}")),
                    }
                }
                match chars.next() {
                    Some(',') | None => {}
                    Some(_) => return Err(format!("junk after label: {line}")),
                }
            }
        }
    }
    Ok(())
}

#[test]
fn the_exposition_is_valid_text_format_with_escaped_labels() {
    let text = encode(&snapshot(), DaemonGauges { control_clients: 3 });
    check_exposition(&text).unwrap();
    assert!(
        text.contains("weft_port_rx_packets_total{switch=\"br0\",port=\"vm\\\"1\\\\x\"} 5\n"),
        "{text}"
    );
    assert!(text.contains("reason=\"tx_queue_full\"} 3\n"));
    assert!(
        text.contains("reason=\"port_tx_error\"} 7\n"),
        "the device's own drops share the family"
    );
    assert!(
        text.contains("reason=\"port_bad_vnet_header\"} 0\n")
            && text.contains("reason=\"port_ring_full\"} 0\n"),
        "every reason the device lists, zeros included"
    );
    assert!(
        text.contains("reason=\"port_vxlan_unknown_vni\"} 2\n"),
        "vhost-user and VXLAN drops share the family too"
    );
    assert!(
        text.contains("counter=\"vhost_to_guest_notifications\"} 9\n"),
        "a vhost-user port's notification counters are exported"
    );
    assert!(
        text.contains("reason=\"malformed\"} 0\n"),
        "zero drops are exported too"
    );
    assert!(text.contains("weft_port_up{switch=\"br0\",port=\"vm\\\"1\\\\x\"} 0\n"));
    assert!(text.contains("weft_port_mtu_over_overlay{switch=\"br0\",port=\"vm\\\"1\\\\x\"} 1\n"));
    assert!(text.contains("weft_worker_busy_ratio{worker=\"0\"} 0.5\n"));
    assert!(text.contains(
        "weft_switch_lane_records_total{switch=\"br0\",lane=\"1\",worker=\"1\",outcome=\"applied\"} 4\n"
    ));
    assert!(text.contains(
        "weft_switch_lane_rx_packets_total{switch=\"br0\",lane=\"1\",worker=\"1\"} 40\n"
    ));
    assert!(text.contains("weft_worker_busy_seconds_total{worker=\"0\"} 1.5\n"));
    assert!(text.contains("weftd_control_clients 3\n"));
    assert!(text.ends_with('\n'));
}

#[test]
fn the_checker_refuses_broken_text() {
    for bad in [
        "m 1\n",
        "# TYPE m counter\nm{a=\"x} 1\n",
        "# TYPE m counter\nm one\n",
        "# TYPE m histogramm\n",
        "# TYPE m counter\n# TYPE m counter\n",
        "# TYPE m counter\nm{a=\"\\q\"} 1\n",
    ] {
        assert!(check_exposition(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn escape_handles_backslash_quote_and_newline() {
    assert_eq!(escape("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
}

#[test]
fn every_drop_reason_is_exported_including_the_policy_ones() {
    let mut snap = snapshot();
    snap.switches[0].ports[0].counters.drops = vec![
        (DropReason::SpoofedSrcMac, 4),
        (DropReason::StormUnknownUnicast, 5),
        (DropReason::MacFlapHeld, 6),
    ];
    let text = encode(&snap, DaemonGauges { control_clients: 0 });
    for reason in DropReason::ALL {
        assert!(
            text.contains(&format!("reason=\"{}\"}}", reason.name())),
            "{} missing",
            reason.name()
        );
    }
    for (name, n) in [
        ("spoofed_src_mac", 4),
        ("storm_unknown_unicast", 5),
        ("mac_flap_held", 6),
    ] {
        assert!(
            text.contains(&format!("reason=\"{name}\"}} {n}\n")),
            "{name}"
        );
    }
}
