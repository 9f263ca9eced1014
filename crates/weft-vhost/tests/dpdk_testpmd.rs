//! End to end with a real vhost-user frontend: DPDK's `dpdk-testpmd` with two virtio-user
//! ports, each connected to a weft vhost-user port, the two joined by a weft switch run by
//! a weft worker. testpmd forwards in an io loop (`start tx_first 32`): every frame it
//! receives on one port it sends out of the other, so the frames circle through the switch
//! until testpmd stops (or are lost on the way; see the assertions).
//!
//! Needs `dpdk-testpmd` (Debian `dpdk-dev`) and free 2 MB hugepages mounted at
//! /dev/hugepages; `scripts/install-test-deps` (as root) provides both.

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use weft_switch::SwitchRegistry;
use weft_testlab::testpmd;
use weft_testlab::worker_switch::WorkerSwitch;
use weft_vhost::{VhostPortConfig, VhostUserPort};

/// Two testpmds at once would compete for the hugepages and the two cores: one at a time.
static ONE_TESTPMD_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn require_testpmd() {
    if let Some(reason) = testpmd::missing() {
        panic!("{reason}: run scripts/install-test-deps as root");
    }
}

/// Two weft vhost-user ports listening on `a.sock` and `b.sock` in a fresh directory, on
/// switch `br0` of a worker before any frontend connects (the worker sleeps on the ports'
/// readiness descriptors until the rings start).
struct TwoPorts {
    dir: PathBuf,
    a: VhostUserPort,
    b: VhostUserPort,
    worker: WorkerSwitch,
}

impl TwoPorts {
    fn listen(tag: &str, config: VhostPortConfig) -> TwoPorts {
        let dir = std::env::temp_dir().join(format!("weft-e2e-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut a = VhostUserPort::listen(dir.join("a.sock"), config).unwrap();
        let mut b = VhostUserPort::listen(dir.join("b.sock"), config).unwrap();
        let (rx_a, tx_a) = a.take_halves().unwrap();
        let (rx_b, tx_b) = b.take_halves().unwrap();
        let worker = WorkerSwitch::with_ports("br0", [("a", rx_a, tx_a), ("b", rx_b, tx_b)]);
        TwoPorts { dir, a, b, worker }
    }

    fn sock(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.sock"))
    }

    /// testpmd quit: both ports are free for the next frontend within 10 s. Stops the
    /// worker, closes the ports and removes the directory; gives the switches back.
    fn finish(self) -> SwitchRegistry {
        let deadline = Instant::now() + Duration::from_secs(10);
        while (self.a.is_connected() || self.b.is_connected()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!self.a.is_connected() && !self.b.is_connected());
        let registry = self.worker.shutdown();
        drop((self.a, self.b));
        let _ = std::fs::remove_dir_all(&self.dir);
        registry
    }
}

#[test]
fn testpmd_virtio_user_ports_exchange_traffic_through_a_weft_switch() {
    let _serial = ONE_TESTPMD_AT_A_TIME
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    require_testpmd();
    let rig = TwoPorts::listen("testpmd", VhostPortConfig::default());
    let (port_a, port_b) = (&rig.a, &rig.b);
    let mut testpmd = testpmd::spawn(
        &format!("weft-e2e-{}", std::process::id()),
        &rig.sock("a"),
        &rig.sock("b"),
    );

    let running = port_a.wait_running(Duration::from_secs(60))
        && port_b.wait_running(Duration::from_secs(60));
    let (out, err) = testpmd::run_and_quit(&mut testpmd, running);
    assert!(running, "testpmd never started both rings\n{out}\n{err}");

    let rx = testpmd::rx_packets(&out);
    let stats_a = port_a.stats();
    let stats_b = port_b.stats();
    eprintln!("testpmd RX per port: {rx:?}; weft a: {stats_a:?}; weft b: {stats_b:?}");
    assert_eq!(
        rx.len(),
        2,
        "no forward statistics in testpmd's output:\n{out}\n{err}"
    );
    // Each port gets at least the other's first burst of 32. Later rounds may lose frames
    // (the switch drops, and counts, what finds testpmd's receive ring full while its
    // forwarding core is descheduled on this 2-core machine), and a lost frame leaves the
    // loop for good: how many rounds follow depends on the machine's load.
    assert!(
        rx.iter().all(|n| *n >= 32),
        "too little traffic: {rx:?}\n{out}"
    );
    for s in [&stats_a, &stats_b] {
        assert!(
            s.from_guest.frames >= 32 && s.to_guest.frames >= 32,
            "{s:?}"
        );
        common::assert_no_faults_or_drops(s, &format!("{s:?}"));
    }
    let registry = rig.finish();
    assert!(registry.get("br0").is_some());
}

/// True once every queue of the port runs and is enabled.
fn all_queues_running(port: &VhostUserPort, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if port.queue_status().iter().all(|q| q.running && q.enabled) {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn testpmd_with_two_queue_pairs_carries_traffic_on_both_pairs() {
    let _serial = ONE_TESTPMD_AT_A_TIME
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    require_testpmd();
    let config = VhostPortConfig {
        queue_pairs: 2,
        ..VhostPortConfig::default()
    };
    let rig = TwoPorts::listen("testpmd-mq", config);
    let (port_a, port_b) = (&rig.a, &rig.b);
    let mut testpmd = testpmd::spawn_with_queues(
        &format!("weft-e2e-mq-{}", std::process::id()),
        &rig.sock("a"),
        &rig.sock("b"),
        2,
    );
    let running = all_queues_running(port_a, Duration::from_secs(60))
        && all_queues_running(port_b, Duration::from_secs(60));
    let (out, err) = testpmd::run_and_quit(&mut testpmd, running);
    assert!(
        running,
        "testpmd never started all four rings of both ports: {:?} {:?}\n{out}\n{err}",
        port_a.queue_status(),
        port_b.queue_status()
    );

    let rx = testpmd::rx_packets(&out);
    let stats = [port_a.stats(), port_b.stats()];
    for s in &stats {
        common::check_pairs(s, 2);
    }
    eprintln!("testpmd RX per port: {rx:?}");
    assert_eq!(rx.len(), 2, "no forward statistics:\n{out}\n{err}");
    assert!(
        rx.iter().all(|n| *n >= 64),
        "too little traffic: {rx:?}\n{out}"
    );
    for s in &stats {
        // testpmd's first bursts go out on both transmit queues of each port, and their
        // several flows come back on both receive queues.
        for p in &s.pairs {
            assert!(p.from_guest.frames >= 32, "{s:?}");
            assert!(p.to_guest.frames > 0, "{s:?}");
        }
        common::assert_no_faults_or_drops(s, &format!("{s:?}"));
    }
    rig.finish();
}
