//! End to end: memif ports added to a real weftd with `weft port add ... memif`, and DPDK
//! testpmd's `net_memif` on the other side, in both roles: testpmd forwards (io) between
//! its two ports, so frames circle through weftd's switch. Counted on both sides; a
//! testpmd that quits and starts again finds the same ports (weftd not restarted); a memif
//! port and a vhost-user port on one switch carry testpmd's traffic between memif and
//! virtio-user; `weft upgrade` hands memif ports of both roles to a new weftd while
//! testpmd forwards, without testpmd reconnecting.
//!
//! Needs root and dpdk-testpmd; the vhost-user case also hugepages. Prints SKIP otherwise.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use weft_control::Response;
use weft_testlab::testpmd::{self, MemifVdev};

use common::weftd::Weftd;

fn skip(test: &str, reason: Option<String>) -> bool {
    let reason = if nix::unistd::geteuid().is_root() {
        reason
    } else {
        Some("not root".into())
    };
    match reason {
        Some(r) => {
            eprintln!("SKIP {test}: {r}");
            true
        }
        None => false,
    }
}

/// `port show br0:PORT`: whether it runs, and its switch-side rx and tx frames.
fn port_show(weftd: &Weftd, port: &str) -> (bool, u64, u64) {
    match weftd.json(&["port", "show", &format!("br0:{port}")]) {
        Response::Port { port, counters } => (
            port.offloads.iter().any(|o| o == "running"),
            counters.rx_packets,
            counters.tx_packets,
        ),
        other => panic!("not a port: {other:?}"),
    }
}

fn all_running(weftd: &Weftd, ports: &[&str]) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if ports.iter().all(|p| port_show(weftd, p).0) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// testpmd forwards for 3 s once `ports` run, then quits: each of its ports received at
/// least a first burst's worth, and each weft port both received and sent.
fn forward_round(weftd: &Weftd, mut pmd: Child, ports: &[&str]) {
    let before: Vec<_> = ports.iter().map(|p| port_show(weftd, p)).collect();
    let running = all_running(weftd, ports);
    let (out, err) = testpmd::run_and_quit(&mut pmd, running);
    assert!(
        running,
        "testpmd never connected:\n{out}\n{err}\n{}",
        weftd.log()
    );
    let rx = testpmd::rx_packets(&out);
    eprintln!("testpmd RX per port: {rx:?}");
    assert!(
        rx.len() == 2 && rx.iter().all(|n| *n >= 32),
        "too little traffic through weftd: {rx:?}\n{out}"
    );
    for (p, b) in ports.iter().zip(before) {
        let (_, rx, tx) = port_show(weftd, p);
        assert!(
            rx > b.1 && tx > b.2,
            "{p}: rx {} -> {rx}, tx {} -> {tx}",
            b.1,
            b.2
        );
        for bad in [
            "memif_rx_bad_descriptor",
            "memif_rx_bad_chain",
            "memif_ring_faults",
        ] {
            assert_eq!(weftd.device_counter(p, bad), 0, "{p}: {bad}");
        }
    }
}

fn memif_testpmd(tag: &str, role: &str, a: &Path, b: &Path) -> Child {
    testpmd::spawn_memif(
        &format!("weft-e2e-memif-{tag}-{}", std::process::id()),
        [
            MemifVdev {
                role,
                socket: a,
                id: 0,
                secret: None,
            },
            MemifVdev {
                role,
                socket: b,
                id: 0,
                secret: None,
            },
        ],
    )
}

fn add(weftd: &Weftd, args: &[&str]) {
    let o = weftd.weft(args);
    assert!(
        o.status.success(),
        "weft {args:?}: {}\n{}",
        common::stderr(&o),
        weftd.log()
    );
}

#[test]
fn testpmd_memif_clients_forward_through_weftd_memif_servers_and_a_new_testpmd_resumes() {
    let test =
        "testpmd_memif_clients_forward_through_weftd_memif_servers_and_a_new_testpmd_resumes";
    if skip(test, testpmd::memif_missing()) {
        return;
    }
    let _serial = weft_testlab::lab::serial();
    let weftd = Weftd::start();
    add(&weftd, &["port", "add", "br0:m1", "memif", "--id", "0"]);
    add(&weftd, &["port", "add", "br0:m2", "memif", "--id", "0"]);
    let show = common::stdout(&weftd.weft(&["port", "show", "br0:m1"]));
    assert!(show.contains("memif, server role"), "{show}");
    let (a, b) = (
        weftd.path("run/vhost/br0-m1.memif.sock"),
        weftd.path("run/vhost/br0-m2.memif.sock"),
    );
    assert!(a.exists() && b.exists(), "default sockets not created");
    forward_round(
        &weftd,
        memif_testpmd("srv", "client", &a, &b),
        &["m1", "m2"],
    );
    // The same ports serve the next testpmd without weftd restarting.
    forward_round(
        &weftd,
        memif_testpmd("srv2", "client", &a, &b),
        &["m1", "m2"],
    );
    assert_eq!(weftd.device_counter("m1", "memif_connects"), 2);
    // Deleting the port removes its socket.
    add(&weftd, &["port", "del", "br0:m1"]);
    assert!(!a.exists(), "the socket outlived its port");
}

#[test]
fn weftd_memif_clients_forward_through_testpmd_memif_servers() {
    let test = "weftd_memif_clients_forward_through_testpmd_memif_servers";
    if skip(test, testpmd::memif_missing()) {
        return;
    }
    let _serial = weft_testlab::lab::serial();
    let weftd = Weftd::start();
    let (a, b) = (
        weftd.path("run/vhost/pmd-a.sock"),
        weftd.path("run/vhost/pmd-b.sock"),
    );
    // weftd's ports first: they connect once testpmd's sockets are there.
    for (port, socket) in [("m1", &a), ("m2", &b)] {
        add(
            &weftd,
            &[
                "port",
                "add",
                &format!("br0:{port}"),
                "memif",
                "--role",
                "client",
                "--memif-socket",
                &socket.to_string_lossy(),
            ],
        );
    }
    forward_round(
        &weftd,
        memif_testpmd("cli", "server", &a, &b),
        &["m1", "m2"],
    );
}

/// Frames the switch received from port `port`.
fn rx_of(weftd: &Weftd, port: &str) -> u64 {
    port_show(weftd, port).1
}

fn say(pmd: &mut Child, line: &str) {
    use std::io::Write;
    let stdin = pmd.stdin.as_mut().expect("testpmd's stdin");
    stdin.write_all(line.as_bytes()).expect("write to testpmd");
    stdin.flush().expect("write to testpmd");
}

#[test]
fn memif_ports_of_both_roles_keep_testpmd_forwarding_through_weft_upgrade_without_a_reconnect() {
    let test =
        "memif_ports_of_both_roles_keep_testpmd_forwarding_through_weft_upgrade_without_a_reconnect";
    if skip(test, testpmd::memif_missing()) {
        return;
    }
    let _serial = weft_testlab::lab::serial();
    let mut weftd = Weftd::start();
    // m1: weft listens, testpmd connects; m2: testpmd listens, weft connects.
    let (a, b) = (
        weftd.path("run/vhost/br0-m1.memif.sock"),
        weftd.path("run/vhost/pmd-b.sock"),
    );
    add(&weftd, &["port", "add", "br0:m1", "memif", "--id", "0"]);
    let b_arg = b.to_string_lossy().to_string();
    let m2 = ["port", "add", "br0:m2", "memif", "--role", "client"];
    add(&weftd, &[&m2[..], &["--memif-socket", &b_arg]].concat());
    let mut pmd = testpmd::spawn_memif(
        &format!("weft-e2e-memif-up-{}", std::process::id()),
        [
            MemifVdev {
                role: "client",
                socket: &a,
                id: 0,
                secret: None,
            },
            MemifVdev {
                role: "server",
                socket: &b,
                id: 0,
                secret: None,
            },
        ],
    );
    let running = all_running(&weftd, &["m1", "m2"]);
    if running {
        say(&mut pmd, "start tx_first 32\n");
        std::thread::sleep(Duration::from_secs(1));
    }
    let flowing_before = running && rx_of(&weftd, "m1") > 0 && rx_of(&weftd, "m2") > 0;
    let before = weftd.answering_pid();
    let upgraded = flowing_before && {
        let o = weftd.upgrade();
        o.status.success() && weftd.answering_pid() != before
    };
    // The new weftd's counters start at zero: frames it forwards are counted from here.
    let start = (rx_of(&weftd, "m1"), rx_of(&weftd, "m2"));
    std::thread::sleep(Duration::from_secs(1));
    let end = (rx_of(&weftd, "m1"), rx_of(&weftd, "m2"));
    let mut counters = Vec::new();
    for port in ["m1", "m2"] {
        for c in ["memif_connects", "memif_disconnects"] {
            counters.push((format!("{port} {c}"), weftd.device_counter(port, c)));
        }
    }
    let show = common::stdout(&weftd.weft(&["port", "show", "br0:m2"]));
    if running {
        say(&mut pmd, "stop\n");
    }
    let (out, err) = testpmd::run_and_quit(&mut pmd, false);
    assert!(
        running,
        "testpmd never connected:\n{out}\n{err}\n{}",
        weftd.log()
    );
    assert!(
        flowing_before,
        "no traffic before the upgrade:\n{out}\n{}",
        weftd.log()
    );
    assert!(upgraded, "the upgrade failed:\n{}", weftd.log());
    assert!(show.contains("taken over"), "{show}");
    eprintln!(
        "{test}: in the second after the upgrade, rx (m1, m2) {start:?} -> {end:?}; {counters:?}"
    );
    assert!(
        end.0 > start.0 && end.1 > start.1,
        "no traffic through the new weftd: rx {start:?} -> {end:?}\n{out}\n{}",
        weftd.log()
    );
    // Neither peer reconnected: the new weftd took the connections over.
    assert!(counters.iter().all(|(_, n)| *n == 0), "{counters:?}");
}

#[test]
fn a_memif_port_and_a_vhost_user_port_carry_testpmd_traffic_between_memif_and_virtio_user() {
    let test =
        "a_memif_port_and_a_vhost_user_port_carry_testpmd_traffic_between_memif_and_virtio_user";
    if skip(test, testpmd::missing()) {
        return;
    }
    let _serial = weft_testlab::lab::serial();
    let weftd = Weftd::start();
    add(&weftd, &["port", "add", "br0:m", "memif", "--id", "7"]);
    add(&weftd, &["port", "add", "br0:v", "vhost-user"]);
    let memif = weftd.path("run/vhost/br0-m.memif.sock");
    // One testpmd, one port of each kind, io forwarding between them.
    let pmd = Command::new("dpdk-testpmd")
        .args(["-l", "0,1", "--main-lcore", "0", "--no-pci"])
        .args(["--single-file-segments", "--in-memory", "-m", "256"])
        .args([
            "--file-prefix",
            &format!("weft-e2e-memif-vhost-{}", std::process::id()),
        ])
        .arg(format!(
            "--vdev=net_memif0,role=client,socket={},socket-abstract=no,id=7",
            memif.display()
        ))
        .arg(format!(
            "--vdev=net_virtio_user1,path={},server=0,queue_size=256",
            weftd.vhost_socket("v").display()
        ))
        .args(["--", "-i", "--nb-cores=1", "--forward-mode=io"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start dpdk-testpmd");
    forward_round(&weftd, pmd, &["m", "v"]);
}
