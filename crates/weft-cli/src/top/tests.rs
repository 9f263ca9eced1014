use std::collections::BTreeMap;

use weft_control::response::PortStats;

use super::*;

fn switch(name: &str, ports: &[(&str, u64, u64, u64)]) -> SwitchStats {
    SwitchStats {
        name: name.into(),
        batches: 0,
        rx_packets: 0,
        fdb_entries: 0,
        fdb_moves: 0,
        mac_flap_episodes: 0,
        flow_cache_hits: 0,
        flow_cache_misses: 0,
        upcalls: 0,
        ports: ports
            .iter()
            .map(|&(n, pkts, bytes, drops)| PortStats {
                name: n.into(),
                counters: PortCounters {
                    rx_packets: pkts,
                    rx_bytes: bytes,
                    tx_packets: pkts / 2,
                    tx_bytes: bytes / 2,
                    drops: BTreeMap::from([("a".into(), drops), ("b".into(), drops)]),
                    device: BTreeMap::new(),
                },
            })
            .collect(),
        lanes: Vec::new(),
    }
}

#[test]
fn rates_are_counter_differences_per_second() {
    let prev = [switch("br0", &[("vm1", 100, 10_000, 1)])];
    let next = [switch("br0", &[("vm1", 300, 30_000, 6)])];
    let r = rates(&prev, &next, Duration::from_secs(2));
    assert_eq!(
        r,
        vec![PortRate {
            switch: "br0".into(),
            port: "vm1".into(),
            rx_pps: 100.0,
            rx_bps: 80_000.0,
            tx_pps: 50.0,
            tx_bps: 40_000.0,
            drops_ps: 5.0,
        }]
    );
}

#[test]
fn new_ports_wait_for_a_second_sample_and_reset_counters_count_zero() {
    let prev = [switch("br0", &[("vm1", 500, 500, 0)])];
    let next = [switch("br0", &[("vm1", 10, 10, 0), ("vm2", 5, 5, 0)])];
    let r = rates(&prev, &next, Duration::from_secs(1));
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].port, "vm1");
    assert_eq!(r[0].rx_pps, 0.0);
}

#[test]
fn zero_interval_gives_zero_rates_not_infinity() {
    let s = [switch("br0", &[("vm1", 1, 1, 0)])];
    let t = [switch("br0", &[("vm1", 2, 2, 0)])];
    assert_eq!(rates(&s, &t, Duration::ZERO)[0].rx_pps, 0.0);
}

#[test]
fn rates_are_sorted_by_switch_then_port() {
    let prev = [
        switch("b", &[("z", 0, 0, 0), ("a", 0, 0, 0)]),
        switch("a", &[("m", 0, 0, 0)]),
    ];
    let r = rates(&prev, &prev, Duration::from_secs(1));
    let names: Vec<(&str, &str)> = r
        .iter()
        .map(|p| (p.switch.as_str(), p.port.as_str()))
        .collect();
    assert_eq!(names, [("a", "m"), ("b", "a"), ("b", "z")]);
}

#[test]
fn render_shows_si_rates() {
    let sample = TopSample {
        interval_secs: 1.0,
        ports: vec![PortRate {
            switch: "br0".into(),
            port: "vm1".into(),
            rx_pps: 1_500_000.0,
            rx_bps: 12e9,
            tx_pps: 0.0,
            tx_bps: 0.0,
            drops_ps: 3.0,
        }],
        workers: vec![],
    };
    assert_eq!(
        render(&sample, Duration::from_secs(1)),
        "weft top — every 1s — q or Ctrl-C quits\n\n\
         SWITCH  PORT  RX-PPS  RX-BPS  TX-PPS  TX-BPS  DROPS/S\n\
         br0     vm1    1.50M   12.0G       0       0        3\n"
    );
}
