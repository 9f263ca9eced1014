//! Two hosts joined by a TCP link: network namespaces H1 and H2 are the hosts, a veth pair
//! between them the underlay. Each host has a weft switch holding a TAP port (into an
//! endpoint namespace, E1 or E2) and a TCP link port to the other host (H1 listens, H2
//! connects). Ping and iperf3 TCP both ways between E1 and E2; then the underlay is cut
//! (`ip link set down`) for a few seconds and restored, and traffic must resume on its own
//! within a bounded time. Needs root (prints SKIP otherwise).

mod common;

use std::time::{Duration, Instant};

use common::lab::{self, iperf3, tcp_bytes_received, Netns};
use common::runner::{IdlePolicy, SwitchThread};
use weft_overlay::tcp_link::{TcpLinkConfig, TcpLinkDrop, TcpLinkMode, TcpLinkPort, TcpLinkStats};
use weft_switch::{Switch, SwitchConfig};
use weft_tap::Offloads;
use weft_testlab::ports;

const LINK_ADDR: &str = "10.77.0.1:7001";
const LINK_ID: u32 = 61;

/// A host: a switch with a TAP into `endpoint` and a TCP link opened in `host`.
fn host(
    host: &Netns,
    endpoint: &Netns,
    mode: TcpLinkMode,
    ip: &str,
) -> (SwitchThread, std::sync::Arc<TcpLinkStats>) {
    let mut switch = Switch::new("br", SwitchConfig::default()).expect("a switch");
    let mut config = TcpLinkConfig::new(mode).netns(host.path());
    config.link_id = LINK_ID;
    config.dead_after = Duration::from_secs(3);
    config.max_backoff = Duration::from_secs(1);
    let (rx, tx, stats) = TcpLinkPort::open(&config)
        .unwrap_or_else(|e| panic!("open the TCP link: {e}"))
        .split();
    ports::add_port(&mut switch, "link", rx, tx);
    ports::add_tap(&mut switch, endpoint, ip, |tap| tap.offloads(Offloads::ALL));
    (
        SwitchThread::spawn(switch, Vec::new(), IdlePolicy::default()),
        stats,
    )
}

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < timeout, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    start.elapsed()
}

fn transfer_both_ways(e1: &Netns, e2: &Netns, seconds: &str, label: &str) {
    for reverse in [false, true] {
        let mut args = vec!["-t", seconds];
        if reverse {
            args.push("-R");
        }
        let report = iperf3(e2, "10.88.0.2", e1, &args);
        let bytes = tcp_bytes_received(&report);
        assert!(
            bytes > 1 << 20,
            "{label} TCP reverse={reverse}: only {bytes} bytes"
        );
        let bps = report["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .unwrap_or(0.0);
        println!(
            "tcp_link {label}: iperf3 TCP E1{}E2 {:.2} Gbit/s",
            if reverse { "<-" } else { "->" },
            bps / 1e9
        );
    }
}

#[test]
fn two_hosts_over_a_tcp_link_ping_transfer_and_recover_from_a_cut_underlay() {
    if !lab::can_run("two_hosts_over_a_tcp_link") {
        return;
    }
    let _serial = lab::serial();
    let (h1, h2) = (Netns::new("h1"), Netns::new("h2"));
    let (e1, e2) = (Netns::new("e1"), Netns::new("e2"));
    let (u1, u2) = (lab::unique("u1"), lab::unique("u2"));
    h1.ip(&[
        "link", "add", &u1, "type", "veth", "peer", "name", &u2, "netns", &h2.name,
    ]);
    for (ns, dev, addr) in [(&h1, &u1, "10.77.0.1/24"), (&h2, &u2, "10.77.0.2/24")] {
        ns.ip(&["addr", "add", addr, "dev", dev]);
        ns.ip(&["link", "set", dev, "up"]);
    }
    let addr = LINK_ADDR.parse().unwrap();
    let (s1, stats1) = host(&h1, &e1, TcpLinkMode::Listen(addr), "10.88.0.1/24");
    let (s2, stats2) = host(&h2, &e2, TcpLinkMode::Connect(addr), "10.88.0.2/24");
    wait_for("the link to connect", Duration::from_secs(10), || {
        stats1.snapshot().connected && stats2.snapshot().connected
    });

    assert!(e1.ping("10.88.0.2", 3, 56), "ping E1 -> E2");
    assert!(e2.ping("10.88.0.1", 3, 56), "ping E2 -> E1");
    assert!(e1.ping("10.88.0.2", 2, 1472), "full-MTU ping E1 -> E2");
    transfer_both_ways(&e1, &e2, "2", "before the cut");

    // Cut the underlay long enough for both ends to give the connection up.
    h1.ip(&["link", "set", &u1, "down"]);
    let cut = Instant::now();
    assert!(
        !e1.ping("10.88.0.2", 1, 56),
        "a ping crossed a cut underlay"
    );
    wait_for("the link to be given up", Duration::from_secs(15), || {
        !stats2.snapshot().connected
    });
    std::thread::sleep(Duration::from_secs(4).saturating_sub(cut.elapsed()));
    h1.ip(&["link", "set", &u1, "up"]);
    let resumed = wait_for("traffic to resume", Duration::from_secs(20), || {
        e1.ping("10.88.0.2", 1, 56)
    });
    println!(
        "tcp_link: underlay down {:.1} s; traffic resumed {:.1} s after it came back",
        (cut.elapsed() - resumed).as_secs_f64(),
        resumed.as_secs_f64()
    );
    assert!(e2.ping("10.88.0.1", 3, 56), "ping E2 -> E1 after the cut");
    transfer_both_ways(&e1, &e2, "1", "after the cut");

    drop(s1);
    drop(s2);
    for (name, s) in [("h1", stats1.snapshot()), ("h2", stats2.snapshot())] {
        println!("tcp_link {name}: {s:?}");
        assert!(s.connects >= 2, "{name}: the link was made again: {s:?}");
        assert!(s.rx_frames > 1000 && s.tx_frames > 1000, "{name}: {s:?}");
        for reason in [
            TcpLinkDrop::BadMagic,
            TcpLinkDrop::BadVersion,
            TcpLinkDrop::WrongLinkId,
            TcpLinkDrop::BadLength,
            TcpLinkDrop::BadOffload,
        ] {
            assert_eq!(s.drops(reason), 0, "{name}: {reason:?}");
        }
    }
    assert!(
        stats2.snapshot().connect_failures > 0,
        "H2 retried while cut off"
    );
}
