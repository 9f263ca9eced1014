//! End to end with DPDK's `net_memif`: a `dpdk-testpmd` with two memif ports in an io
//! loop, each connected to a weft memif port, the two joined by a weft switch on a weft
//! worker. testpmd forwards every frame it receives on one port out of the other
//! (`start tx_first 32`), so frames circle through the switch until testpmd stops.
//!
//! Both roles: weft as server (testpmd `role=client` brings the memory) and weft as client
//! (weft allocates; testpmd `role=server` maps). And reconnection: testpmd quits and
//! starts again, and traffic resumes through the same weft ports.
//!
//! Needs `dpdk-testpmd` (Debian `dpdk-dev`); no hugepages (`--no-huge`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use weft_memif::{MemifConfig, MemifPort, MemifStats, Role, SocketDir};
use weft_testlab::testpmd::{self, MemifVdev};
use weft_testlab::worker_switch::WorkerSwitch;

/// Two testpmds at once would compete for the two cores: one at a time.
static ONE_TESTPMD_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn require_testpmd() {
    if let Some(reason) = testpmd::memif_missing() {
        panic!("{reason}: run scripts/install-test-deps as root");
    }
}

struct Rig {
    dir: PathBuf,
    a: MemifPort,
    b: MemifPort,
    worker: WorkerSwitch,
}

impl Rig {
    fn open(tag: &str, role: Role) -> Rig {
        Rig::open_with(
            tag,
            MemifConfig {
                role,
                ..MemifConfig::default()
            },
        )
    }

    fn open_with(tag: &str, config: MemifConfig) -> Rig {
        let dir = std::env::temp_dir().join(format!("weft-memif-e2e-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let sd = Arc::new(SocketDir::open(&dir).unwrap());
        let mut a = MemifPort::open(Arc::clone(&sd), "a.sock".as_ref(), config.clone()).unwrap();
        let mut b = MemifPort::open(sd, "b.sock".as_ref(), config).unwrap();
        let (rx_a, tx_a) = a.take_halves().unwrap();
        let (rx_b, tx_b) = b.take_halves().unwrap();
        let worker = WorkerSwitch::with_ports("br0", [("a", rx_a, tx_a), ("b", rx_b, tx_b)]);
        Rig { dir, a, b, worker }
    }

    fn testpmd(&self, prefix: &str, testpmd_role: &str) -> std::process::Child {
        let (sa, sb) = (self.dir.join("a.sock"), self.dir.join("b.sock"));
        testpmd::spawn_memif(
            &format!("{prefix}-{}", std::process::id()),
            [
                MemifVdev {
                    role: testpmd_role,
                    socket: &sa,
                    id: 0,
                    secret: None,
                },
                MemifVdev {
                    role: testpmd_role,
                    socket: &sb,
                    id: 0,
                    secret: None,
                },
            ],
        )
    }

    fn connected(&self) -> bool {
        self.a.wait_connected(Duration::from_secs(30))
            && self.b.wait_connected(Duration::from_secs(30))
    }

    fn disconnected(&self) -> bool {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while (self.a.is_connected() || self.b.is_connected())
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        !self.a.is_connected() && !self.b.is_connected()
    }

    fn finish(self) {
        self.worker.shutdown();
        drop((self.a, self.b));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One round: testpmd connects, forwards for 3 s, quits; both sides saw traffic, and
/// every frame weft took from one port went out of the other or was counted as dropped.
fn round(rig: &Rig, prefix: &str, testpmd_role: &str) -> (MemifStats, MemifStats) {
    let before = (rig.a.stats(), rig.b.stats());
    let mut tp = rig.testpmd(prefix, testpmd_role);
    let connected = rig.connected();
    let (out, err) = testpmd::run_and_quit(&mut tp, connected);
    assert!(
        connected,
        "testpmd never connected both ports: {:?} {:?}\n{out}\n{err}",
        rig.a, rig.b
    );
    assert!(
        rig.disconnected(),
        "ports still connected after testpmd quit"
    );
    std::thread::sleep(Duration::from_millis(100));
    let (a, b) = (rig.a.stats(), rig.b.stats());
    let rx = testpmd::rx_packets(&out);
    eprintln!("testpmd RX per port: {rx:?}\nweft a: {a:?}\nweft b: {b:?}");
    assert_eq!(rx.len(), 2, "no forward statistics:\n{out}\n{err}");
    assert!(
        rx.iter().all(|n| *n >= 32),
        "too little traffic: {rx:?}\n{out}"
    );
    for (s, s0) in [(&a, &before.0), (&b, &before.1)] {
        assert!(
            s.rx_frames - s0.rx_frames >= 32 && s.tx_frames - s0.tx_frames >= 32,
            "{s:?}"
        );
        assert_eq!(
            s.rx_bad_descriptor + s.rx_bad_chain + s.rx_too_long,
            0,
            "{s:?}"
        );
        assert_eq!(s.ring_faults, 0, "{s:?}");
    }
    // Conservation: what came in on one side went out of the other, or was counted.
    for (from, to) in [(&a, &b), (&b, &a)] {
        assert_eq!(
            from.rx_frames,
            to.tx_frames + to.tx_ring_full + to.tx_not_connected,
            "frames lost between the ports: {from:?} {to:?}"
        );
    }
    (a, b)
}

/// testpmd connects and starts forwarding, then is killed (no DISCONNECT): weft notices
/// the socket close and frees both ports for the next one.
fn killed_round(rig: &Rig, prefix: &str, testpmd_role: &str) {
    use std::io::Write;
    let mut tp = rig.testpmd(prefix, testpmd_role);
    assert!(rig.connected(), "testpmd never connected both ports");
    let mut stdin = tp.stdin.take().unwrap();
    stdin.write_all(b"start tx_first 32\n").unwrap();
    stdin.flush().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    tp.kill().unwrap();
    tp.wait().unwrap();
    assert!(
        rig.disconnected(),
        "ports still connected after testpmd was killed"
    );
    if testpmd_role == "server" {
        // A killed server leaves its socket file behind; DPDK does not replace one.
        for s in ["a.sock", "b.sock"] {
            let _ = std::fs::remove_file(rig.dir.join(s));
        }
    }
}

#[test]
fn testpmd_memif_clients_exchange_traffic_through_weft_memif_servers_and_reconnect() {
    let _serial = ONE_TESTPMD_AT_A_TIME
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    require_testpmd();
    let rig = Rig::open("srv", Role::Server);
    let (a1, _) = round(&rig, "weft-memif-srv", "client");
    killed_round(&rig, "weft-memif-srv-k", "client");
    // A new testpmd finds the same ports and traffic resumes.
    let (a2, _) = round(&rig, "weft-memif-srv2", "client");
    assert!(a2.connects == 3 && a2.rx_frames > a1.rx_frames, "{a2:?}");
    rig.finish();
}

#[test]
fn weft_memif_clients_exchange_traffic_through_testpmd_memif_servers_and_reconnect() {
    let _serial = ONE_TESTPMD_AT_A_TIME
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    require_testpmd();
    let rig = Rig::open("cli", Role::Client);
    let (a1, _) = round(&rig, "weft-memif-cli", "server");
    killed_round(&rig, "weft-memif-cli-k", "server");
    // weft reconnects (with backoff) to the next testpmd on the same sockets.
    let (a2, _) = round(&rig, "weft-memif-cli2", "server");
    assert!(a2.connects == 3 && a2.rx_frames > a1.rx_frames, "{a2:?}");
    rig.finish();
}

#[test]
fn testpmd_with_two_queue_pairs_and_a_secret_negotiates_two_rings_each_way_and_carries_traffic() {
    let _serial = ONE_TESTPMD_AT_A_TIME
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    require_testpmd();
    let config = MemifConfig {
        role: Role::Server,
        queue_pairs: 2,
        secret: Some(b"s3cr3t".to_vec()),
        ..MemifConfig::default()
    };
    let rig = Rig::open_with("mq", config);
    let (sa, sb) = (rig.dir.join("a.sock"), rig.dir.join("b.sock"));
    let vdev = |socket| MemifVdev {
        role: "client",
        socket,
        id: 0,
        secret: Some("s3cr3t"),
    };
    let mut tp = testpmd::spawn_memif_queues(
        &format!("weft-memif-mq-{}", std::process::id()),
        [vdev(&sa), vdev(&sb)],
        2,
    );
    let connected = rig.connected();
    let rings = (rig.a.status().rings, rig.b.status().rings);
    let (out, err) = testpmd::run_and_quit(&mut tp, connected);
    assert_eq!(
        rings,
        ((2, 2), (2, 2)),
        "rings negotiated (to weft, from weft)"
    );
    assert!(
        connected,
        "testpmd never connected: {:?}\n{out}\n{err}",
        rig.a
    );
    assert!(rig.disconnected());
    let rx = testpmd::rx_packets(&out);
    let (a, b) = (rig.a.stats(), rig.b.stats());
    eprintln!("testpmd RX per port: {rx:?}\nweft a: {a:?}\nweft b: {b:?}");
    // testpmd's first bursts go out on both queues of each port (32 each).
    assert!(
        rx.len() == 2 && rx.iter().all(|n| *n >= 64),
        "too little traffic: {rx:?}\n{out}"
    );
    for s in [&a, &b] {
        assert_eq!(s.connects, 1, "{s:?}");
        assert!(s.rx_frames >= 64 && s.tx_frames >= 64, "{s:?}");
        assert_eq!(
            s.rx_bad_descriptor + s.rx_bad_chain + s.ring_faults,
            0,
            "{s:?}"
        );
    }
    rig.finish();
}

#[test]
fn testpmd_with_the_wrong_secret_is_refused_and_counted() {
    let _serial = ONE_TESTPMD_AT_A_TIME
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    require_testpmd();
    let config = MemifConfig {
        role: Role::Server,
        secret: Some(b"right".to_vec()),
        ..MemifConfig::default()
    };
    let rig = Rig::open_with("secret", config);
    let (sa, sb) = (rig.dir.join("a.sock"), rig.dir.join("b.sock"));
    let vdev = |socket, secret| MemifVdev {
        role: "client",
        socket,
        id: 0,
        secret: Some(secret),
    };
    let mut tp = testpmd::spawn_memif(
        &format!("weft-memif-secret-{}", std::process::id()),
        [vdev(&sa, "wrong"), vdev(&sb, "right")],
    );
    // b (right secret) connects; a is refused.
    let b_up = rig.b.wait_connected(Duration::from_secs(30));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while rig
        .a
        .stats()
        .refused(weft_memif::handshake::Refusal::Secret)
        == 0
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let (out, err) = testpmd::run_and_quit(&mut tp, false);
    assert!(
        b_up,
        "the port with the right secret never connected\n{out}\n{err}"
    );
    let a = rig.a.stats();
    assert_eq!(
        a.refused(weft_memif::handshake::Refusal::Secret),
        1,
        "{a:?}"
    );
    assert_eq!(a.connects, 0, "{a:?}");
    rig.finish();
}
