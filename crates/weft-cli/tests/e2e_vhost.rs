//! End to end with a real vhost-user frontend through the CLI: a real weftd, two
//! `vhost-user` ports added with `weft port add`, DPDK `dpdk-testpmd` connecting a
//! virtio-user port to each and forwarding between them (`start tx_first 32`), and
//! `weft port show` counting the frames and showing the negotiated connection.
//!
//! A testpmd whose hugepage files are shrunk to nothing while it forwards through weftd:
//! testpmd dies of the SIGBUS, weftd does not, and its ports serve the next testpmd.
//!
//! Then weftd with two client-mode ports to two QEMU guests (QEMU listens): ping between
//! the guests resumes within 3 s of weftd being killed (-9) and started again, the guests
//! never rebooting.
//!
//! Needs root (weftd's default runtime directory and hugepages), `dpdk-testpmd` (Debian
//! `dpdk-dev`) and 128 free 2 MB hugepages at /dev/hugepages, or QEMU, a kernel and busybox
//! (`scripts/install-test-deps`); without them a test says SKIP and passes.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::weftd::Weftd;
use common::{code, stderr, stdout};
use weft_control::Response;
use weft_testlab::{lab, qemu, testpmd};

/// Why this machine cannot run the test, if it cannot.
fn skip_reason() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("not root".into());
    }
    testpmd::missing()
}

/// `port show`'s answer for `br0:PORT`: its offloads and its received and sent frames.
fn port_show(weftd: &Weftd, port: &str) -> (Vec<String>, u64, u64) {
    match weftd.json(&["port", "show", &format!("br0:{port}")]) {
        Response::Port { port, counters } => {
            (port.offloads, counters.rx_packets, counters.tx_packets)
        }
        other => panic!("not a port: {other:?}"),
    }
}

/// testpmd with `queues` queue pairs on each of ports `br0:a` and `br0:b`, forwarding
/// between them once both are running; its output.
fn forward_with_testpmd(weftd: &Weftd, queues: u16) -> String {
    let mut pmd = testpmd::spawn_with_queues(
        &format!("weft-cli-e2e-{}-{queues}", std::process::id()),
        &weftd.vhost_socket("a"),
        &weftd.vhost_socket("b"),
        queues,
    );
    let started = both_running(weftd);
    let (out, _) = testpmd::run_and_quit(&mut pmd, started);
    assert!(
        started,
        "testpmd never started both rings\n{out}\n{}",
        weftd.log()
    );
    out
}

/// Whether ports `br0:a` and `br0:b` both have their rings running within 60 s. Decided
/// once: while testpmd starts its ports a ring may stop and start again (a new memory
/// table), so a second look could see a moment between the two.
fn both_running(weftd: &Weftd) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    let running = |p: &str| port_show(weftd, p).0.iter().any(|o| o == "running");
    while Instant::now() < deadline {
        if running("a") && running("b") {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

#[test]
fn testpmd_traffic_through_vhost_user_ports_added_with_weft_is_counted() {
    if let Some(why) = skip_reason() {
        eprintln!("SKIP: {why}");
        return;
    }
    // Not beside the other test: testpmd's busy polling would skew its timing.
    let _one_at_a_time = lab::serial();
    let weftd = Weftd::with_vhost_ports_a_and_b();
    let (sock_a, sock_b) = (weftd.vhost_socket("a"), weftd.vhost_socket("b"));
    assert!(sock_a.exists() && sock_b.exists());
    let (offloads, _, _) = port_show(&weftd, "a");
    assert!(offloads.iter().any(|o| o == "disconnected"), "{offloads:?}");

    let out = forward_with_testpmd(&weftd, 1);

    for port in ["a", "b"] {
        let (offloads, rx, tx) = port_show(&weftd, port);
        eprintln!("br0:{port}: rx {rx}, tx {tx}, offloads {offloads:?}");
        // At least testpmd's first burst of 32 each way (see weft-vhost's dpdk_testpmd.rs
        // for why later rounds may lose frames on a loaded machine).
        assert!(rx >= 32 && tx >= 32, "br0:{port}: rx {rx}, tx {tx}\n{out}");
    }
    for port in ["a", "b"] {
        let o = weftd.weft(&["port", "del", &format!("br0:{port}")]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
    }
    assert!(
        !sock_a.exists() && !sock_b.exists(),
        "the sockets outlived their ports"
    );
}

/// A vhost-user port's counter from `port show` (device counters at zero are not listed).
#[test]
fn testpmd_queue_pairs_are_served_by_two_lanes_on_two_workers() {
    if let Some(why) = skip_reason() {
        eprintln!("SKIP: {why}");
        return;
    }
    let _one_at_a_time = lab::serial();
    let weftd = Weftd::start_with(Some(
        "[workers]\ncount = 2\n\n[[switch]]\nname = \"br0\"\n\n[switch.settings]\nlanes = 2\n",
    ));
    let Response::Switches { switches } = weftd.json(&["switch", "list"]) else {
        panic!("not switches")
    };
    assert_eq!(switches[0].workers, vec![0, 1], "one lane per worker");
    for port in ["a", "b"] {
        let o = weftd.weft(&[
            "port",
            "add",
            &format!("br0:{port}"),
            "vhost-user",
            "--queues",
            "2",
        ]);
        assert_eq!(code(&o), 0, "{}\n{}", stderr(&o), weftd.log());
    }
    let out = forward_with_testpmd(&weftd, 2);
    // Each of testpmd's two transmit queues per port was read (pair 0 by the lane on
    // worker 0, pair 1 by the lane on worker 1), and each lane filled its own pair of the
    // other port.
    for port in ["a", "b"] {
        for pair in 0..2 {
            for way in ["from_guest", "to_guest"] {
                let name = format!("vhost_pair{pair}_{way}_frames");
                let n = weftd.device_counter(port, &name);
                eprintln!("br0:{port} {name} {n}");
                assert!(n >= 32, "br0:{port} {name} = {n}\n{out}\n{}", weftd.log());
            }
        }
    }
    // The guest's kicks (or the switch's notifications) are counted per queue too.
    let per_queue_events: u64 = ["kicks", "notifications", "notifications_suppressed"]
        .iter()
        .map(|c| weftd.device_counter("a", &format!("vhost_pair1_from_guest_{c}")))
        .sum::<u64>()
        + ["notifications", "notifications_suppressed"]
            .iter()
            .map(|c| weftd.device_counter("a", &format!("vhost_pair1_to_guest_{c}")))
            .sum::<u64>();
    assert!(
        per_queue_events > 0,
        "pair 1 counts its kicks and notifications"
    );
    let Response::Stats { switches, workers } = weftd.json(&["stats"]) else {
        panic!("not stats")
    };
    assert!(workers
        .iter()
        .all(|w| w.switches == vec!["br0".to_string()]));
    assert!(workers.iter().all(|w| w.batches > 0), "{workers:?}");
    let (_, rx_a, tx_a) = port_show(&weftd, "a");
    let (_, rx_b, tx_b) = port_show(&weftd, "b");
    assert_eq!(
        switches[0].rx_packets,
        rx_a + rx_b,
        "the lanes' counts add up"
    );
    assert!(tx_a > 0 && tx_b > 0);
}

/// After the common guest prelude: guest 2 pings guest 1 for ever, one console line per
/// reply (`WEFT-PONG n`), at most a few per second.
const PING_FOREVER: &str = r#"if [ "$id" = 2 ]; then
    n=0
    while true; do
        if ping -c 1 -W 1 10.0.0.1 >/dev/null 2>&1; then
            n=$((n+1))
            echo "WEFT-PONG $n"
            usleep 200000
        fi
    done
fi
sleep 100000
"#;

/// How many replies guest 2 has logged.
fn pongs(guest: &qemu::Guest) -> usize {
    guest
        .log()
        .lines()
        .filter(|l| l.starts_with("WEFT-PONG"))
        .count()
}

/// Waits up to `timeout` for guest 2 to log more than `seen` replies; how long it took.
fn next_pong(guest: &qemu::Guest, seen: usize, timeout: Duration) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < timeout {
        if pongs(guest) > seen {
            return Some(started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn weftd_killed_and_restarted_reconnects_to_running_guests_in_client_mode() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIP: not root");
        return;
    }
    if let Some(why) = qemu::missing() {
        eprintln!("SKIP: {why}");
        return;
    }
    let _one_at_a_time = lab::serial();
    let guests_dir = tempfile::tempdir().unwrap();
    let dir = guests_dir.path();
    let (kernel, version) = qemu::kernel();
    let initrd = qemu::initramfs(dir, &version, PING_FOREVER);
    // QEMU's sockets are in the guests' directory: allowed in weftd's configuration.
    let mut weftd = Weftd::start_with(Some(&format!("vhost_socket_dirs = [{dir:?}]\n")));
    // The ports come first: weftd keeps trying until QEMU listens.
    for id in [1, 2] {
        let sock = dir.join(format!("g{id}.sock"));
        let o = weftd.weft(&[
            "port",
            "add",
            &format!("br0:g{id}"),
            "vhost-user",
            "--vhost-mode",
            "client",
            "--vhost-socket",
            sock.to_str().unwrap(),
        ]);
        assert_eq!(code(&o), 0, "{}\n{}", stderr(&o), weftd.log());
    }
    let side = qemu::SocketSide::QemuListens;
    let g1 = qemu::Guest::start(1, &dir.join("g1.sock"), side, dir, &kernel, &initrd);
    let mut g2 = qemu::Guest::start(2, &dir.join("g2.sock"), side, dir, &kernel, &initrd);
    let report = |weftd: &Weftd, g2: &qemu::Guest| {
        format!(
            "--- weftd\n{}\n--- guest 1\n{}\n--- guest 2\n{}",
            weftd.log(),
            g1.log(),
            g2.log()
        )
    };
    if next_pong(&g2, 0, Duration::from_secs(90)).is_none() {
        panic!("guest 2 never reached guest 1\n{}", report(&weftd, &g2));
    }
    let o = weftd.weft(&["port", "show", "br0:g1"]);
    assert!(stdout(&o).contains("client mode"), "{}", stdout(&o));
    let (offloads, _, _) = port_show(&weftd, "g1");
    assert!(offloads.iter().any(|o| o == "connected"), "{offloads:?}");

    for round in 1..=2 {
        let seen = pongs(&g2);
        let restarted = Instant::now();
        weftd.kill_and_restart();
        eprintln!(
            "round {round}: weftd answering {:?} after kill -9",
            restarted.elapsed()
        );
        let resumed = next_pong(&g2, pongs(&g2).max(seen), Duration::from_secs(10));
        let Some(after) = resumed.map(|_| restarted.elapsed()) else {
            panic!(
                "round {round}: no ping got through within 10 s of the restart\n{}",
                report(&weftd, &g2)
            );
        };
        eprintln!("round {round}: ping resumed {after:?} after kill -9 and restart");
        assert!(
            after < Duration::from_secs(3),
            "round {round}: ping resumed only {after:?} after the restart\n{}",
            report(&weftd, &g2)
        );
    }
    // The same guests all along: QEMU kept running and neither guest booted again.
    assert!(g2.is_running());
    for g in [&g1, &g2] {
        assert_eq!(g.log().matches("WEFT-UP").count(), 1, "{}", g.log());
    }
    // weftd never removes the sockets QEMU created.
    for port in ["g1", "g2"] {
        let o = weftd.weft(&["port", "del", &format!("br0:{port}")]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
    }
    assert!(dir.join("g1.sock").exists() && dir.join("g2.sock").exists());
}

#[test]
fn a_dpdk_frontend_whose_hugepage_files_shrink_under_weftd_leaves_it_serving() {
    if let Some(why) = skip_reason() {
        eprintln!("SKIP: {why}");
        return;
    }
    let _one_at_a_time = lab::serial();
    let weftd = Weftd::with_vhost_ports_a_and_b();
    // testpmd's memory in named hugepage files, as a DPDK application has it by default.
    let prefix = format!("weft-cli-shrink-{}", std::process::id());
    testpmd::remove_files(&prefix);
    let (a, b) = (weftd.vhost_socket("a"), weftd.vhost_socket("b"));
    let mut pmd = testpmd::spawn_with_files(&prefix, &a, &b);
    let started = both_running(&weftd);
    let mut stdin = pmd.stdin.take().expect("testpmd's stdin");
    if started {
        stdin.write_all(b"start tx_first 32\n").unwrap();
        stdin.flush().unwrap();
        std::thread::sleep(Duration::from_secs(1));
    }
    let files = testpmd::hugepage_files(&prefix);
    // Shrunk to nothing while testpmd forwards through weftd: weftd's worker touches those
    // pages on every poll.
    for f in &files {
        let file = std::fs::OpenOptions::new().write(true).open(f).unwrap();
        file.set_len(0).unwrap();
    }
    // testpmd dies of the SIGBUS in its own memory (killed if it does not).
    let deadline = Instant::now() + Duration::from_secs(10);
    while pmd.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = pmd.kill();
    let status = pmd.wait().unwrap();
    drop(stdin);
    testpmd::remove_files(&prefix);
    assert!(started, "testpmd never started both rings\n{}", weftd.log());
    assert!(!files.is_empty(), "testpmd made no hugepage files");
    eprintln!("testpmd ended with {status}");

    std::thread::sleep(Duration::from_millis(500));
    let alive = weftd.weft(&["hello"]);
    assert_eq!(code(&alive), 0, "weftd died:\n{}", weftd.log());
    let truncated: u64 = ["a", "b"]
        .iter()
        .flat_map(|p| {
            ["from_guest", "to_guest"]
                .map(|q| weftd.device_counter(p, &format!("vhost_{q}_fault_memory_truncated")))
        })
        .sum();
    eprintln!("rings broken by the shrunk memory: {truncated}");
    let before: Vec<u64> = ["a", "b"].iter().map(|p| port_show(&weftd, p).1).collect();

    // The ports serve the next frontend.
    let deadline = Instant::now() + Duration::from_secs(10);
    let disconnected = |p: &str| port_show(&weftd, p).0.iter().any(|o| o == "disconnected");
    while !(disconnected("a") && disconnected("b")) {
        assert!(
            Instant::now() < deadline,
            "the dead frontend stays connected"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = forward_with_testpmd(&weftd, 1);
    for (port, before) in ["a", "b"].iter().zip(before) {
        let (_, rx, tx) = port_show(&weftd, port);
        assert!(
            rx >= before + 32 && tx >= 32,
            "br0:{port}: rx {rx} (before {before}), tx {tx}\n{out}"
        );
    }
}
