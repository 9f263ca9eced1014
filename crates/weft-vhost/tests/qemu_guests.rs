//! End to end with real guests: two QEMU 7.2 VMs (TCG, the Debian kernel's virtio-net
//! driver, a busybox initramfs: `weft_testlab::qemu`) on two weft vhost-user ports joined by
//! a weft switch. The guests ping each other and move 2 MB over TCP (busybox httpd and
//! wget); the checksums must match; then guest 1 fetches guest 2's copy back. Once with weft
//! listening (server mode), once with QEMU listening and weft connecting (client mode).
//!
//! Guest 1's port is on the switch before the guest negotiates (the switch then sees plain
//! capabilities and segments the TSO super-frames guest 2 sends it); guest 2's port is added
//! after negotiation (it takes guest 1's super-frames whole). Both paths carry the TCP
//! stream.
//!
//! Needs `qemu-system-x86_64`, a kernel in /boot with its virtio modules, and a static
//! busybox: `scripts/install-test-deps` (as root) installs qemu-system-x86,
//! linux-image-amd64 and busybox-static.

mod common;

use std::time::Duration;

use weft_testlab::qemu::{initramfs, kernel, wait_until, Guest, SocketSide};
use weft_testlab::worker_switch::WorkerLanes;
use weft_vhost::{
    DispatchMode, NotifyPolicy, VhostMode, VhostPortConfig, VhostPortStats, VhostUserPort,
};

/// After the common prelude: guest 1 serves 2 MB and fetches guest 2's copy back; guest 2
/// pings guest 1, fetches the file and serves it. With several vCPUs guest 1 serves from
/// its last one, so that what the server writes leaves on its last transmit queue (Linux
/// maps each vCPU to its own queue pair).
const WORKLOAD: &str = r#"mkdir -p /www
if [ "$id" = 1 ]; then
    dd if=/dev/urandom of=/www/data bs=1024 count=2048 2>/dev/null
    echo "WEFT-MD5 $(md5sum /www/data | cut -d' ' -f1)"
    last=$(( $(nproc) - 1 ))
    taskset -c "$last" httpd -p 80 -h /www
    # Then fetch it back from guest 2, once guest 2 serves its copy.
    for i in $(seq 1 300); do
        wget -q -O /tmp/back http://10.0.0.2/data 2>/dev/null && break
        sleep 1
    done
    echo "WEFT-BACK $(md5sum /tmp/back | cut -d' ' -f1) $(wc -c < /tmp/back)"
else
    ok=0
    for i in $(seq 1 120); do
        if ping -c 1 -W 1 10.0.0.1 >/dev/null 2>&1; then ok=1; break; fi
    done
    echo "WEFT-PING $ok"
    for i in $(seq 1 30); do
        wget -q -O /www/data http://10.0.0.1/data 2>/dev/null && break
        sleep 1
    done
    echo "WEFT-GOT $(md5sum /www/data | cut -d' ' -f1) $(wc -c < /www/data)"
    httpd -p 80 -h /www
fi
sleep 100000
"#;

/// Two guest pairs at once would share two cores with each other: one pair at a time.
static ONE_PAIR_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn two_linux_guests_ping_and_move_data_over_tcp_through_weft() {
    let _serial = ONE_PAIR_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let config = VhostPortConfig::default();
    run_two_guests("server", VhostMode::Server, config, config, 1);
}

#[test]
fn two_linux_guests_move_data_through_weft_connecting_to_qemu_as_a_client() {
    let _serial = ONE_PAIR_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let config = VhostPortConfig::default();
    run_two_guests("client", VhostMode::Client, config, config, 1);
}

/// Two guests of two vCPUs with two queue pairs each, on a switch of `lanes` lanes: both
/// send on both transmit queues, and the flows (ARP, ping, two TCP streams each way) hash
/// onto both receive queues, so the second pair carries frames (with two lanes, the
/// second lane does).
fn two_pairs_carry_frames(tag: &str, lanes: usize) {
    let config = VhostPortConfig {
        queue_pairs: 2,
        ..VhostPortConfig::default()
    };
    let stats = run_two_guests_on_lanes(tag, VhostMode::Server, config, config, [2, 2], lanes);
    for s in &stats {
        common::check_pairs(s, 2);
    }
    let second: u64 = stats
        .iter()
        .map(|s| s.pairs[1].from_guest.frames + s.pairs[1].to_guest.frames)
        .sum();
    assert!(second > 0, "{stats:?}");
}

#[test]
fn two_linux_guests_with_two_queue_pairs_move_data_through_weft() {
    let _serial = ONE_PAIR_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    two_pairs_carry_frames("mq", 1);
}

#[test]
fn a_one_vcpu_guest_using_one_pair_of_two_moves_data_through_weft() {
    let _serial = ONE_PAIR_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let config = VhostPortConfig {
        queue_pairs: 2,
        ..VhostPortConfig::default()
    };
    // Linux uses one pair (one vCPU) and never fills the second pair's receive queue; QEMU
    // disables that pair (SET_VRING_ENABLE 0), and weft sends it nothing (a flow hashed
    // onto it would stall).
    let stats = run_two_guests("mq1", VhostMode::Server, config, config, 1);
    for s in &stats {
        assert_eq!(s.pairs.len(), 2, "{s:?}");
        assert_eq!(s.pairs[1].to_guest.frames, 0, "{s:?}");
        assert_eq!(s.pairs[1].to_guest.no_buffers, 0, "{s:?}");
        assert_eq!(s.pairs[1].from_guest.frames, 0, "{s:?}");
    }
}

#[test]
fn two_guests_with_two_queue_pairs_on_a_switch_of_two_lanes_move_data_through_weft() {
    let _serial = ONE_PAIR_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    // Pair 0 of each port on the lane of one worker, pair 1 on the other's; what one lane
    // learns (the guests' addresses) the other forwards by.
    two_pairs_carry_frames("lanes", 2);
}

#[test]
fn a_one_vcpu_guest_beside_a_two_vcpu_guest_on_a_switch_of_two_lanes_loses_nothing() {
    let _serial = ONE_PAIR_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let config = VhostPortConfig {
        queue_pairs: 2,
        ..VhostPortConfig::default()
    };
    // Guest 1 serves the file from its second vCPU, so partly on pair 1; guest 2 (one vCPU) uses
    // pair 0 only: what the second lane receives from guest 1's pair 1 it must put into
    // guest 2's pair 0, whose lane it shares that receive queue with.
    let stats = run_two_guests_on_lanes("lanes1", VhostMode::Server, config, config, [2, 1], 2);
    // Part of the file went out on pair 1, through the second lane: what the server wrote
    // from its own vCPU (what TCP sends from the interrupt, on vCPU 0, takes pair 0).
    assert!(stats[0].pairs[1].from_guest.frames > 0, "{:?}", stats[0]);
    assert_eq!(stats[1].pairs[1].to_guest.frames, 0, "{:?}", stats[1]);
    assert_eq!(stats[1].pairs[1].from_guest.frames, 0, "{:?}", stats[1]);
}

#[test]
fn guests_behind_optimistic_and_coalesced_ports_with_eager_adaptive_dispatch_lose_nothing() {
    let _serial = ONE_PAIR_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    // Bounds low enough that the transfer crosses them (3 frames in 20 ms, even under TCG
    // and with 64 KB TSO frames) and silence drops below.
    let adaptive = DispatchMode::Adaptive {
        low_pps: 10,
        high_pps: 100,
        window: Duration::from_millis(20),
    };
    let optimistic = VhostPortConfig {
        dispatch: adaptive,
        notify: NotifyPolicy::Optimistic,
        ..VhostPortConfig::default()
    };
    let coalesced = VhostPortConfig {
        dispatch: adaptive,
        notify: NotifyPolicy::Coalesced {
            frames: 32,
            max_delay: Duration::from_micros(50),
        },
        ..VhostPortConfig::default()
    };
    let stats = run_two_guests("modes", VhostMode::Server, optimistic, coalesced, 1);
    assert!(
        stats.iter().any(|s| s.from_guest.dispatch_changes >= 1),
        "the transfer took a port switch-driven: {stats:?}"
    );
    for s in &stats {
        assert!(
            s.to_guest.notifications > 0 && s.to_guest.batches() > 0,
            "{s:?}"
        );
    }
    assert!(
        stats[1].to_guest.notifications_held > 0,
        "the coalesced port held notifications back: {:?}",
        stats[1]
    );
}

/// Two guests behind ports set up as given (weft listening or connecting): they ping, and
/// move a 2 MB file each way over TCP; returns the ports' counters.
fn run_two_guests(
    tag: &str,
    mode: VhostMode,
    config1: VhostPortConfig,
    config2: VhostPortConfig,
    cpus: u16,
) -> [VhostPortStats; 2] {
    run_two_guests_on_lanes(tag, mode, config1, config2, [cpus, cpus], 1)
}

/// [`run_two_guests`] with guests of `cpus` vCPUs each, on a switch of `lanes` lanes, one
/// worker each.
fn run_two_guests_on_lanes(
    tag: &str,
    mode: VhostMode,
    config1: VhostPortConfig,
    config2: VhostPortConfig,
    cpus: [u16; 2],
    lanes: usize,
) -> [VhostPortStats; 2] {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let dir = std::env::temp_dir().join(format!("weft-e2e-qemu-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (kernel, version) = kernel();
    let initrd = initramfs(&dir, &version, WORKLOAD);
    let side = match mode {
        VhostMode::Server => SocketSide::SwitchListens,
        VhostMode::Client => SocketSide::QemuListens,
    };

    let (sock1, sock2) = (dir.join("g1.sock"), dir.join("g2.sock"));
    let mut port1 = VhostUserPort::open(&sock1, mode, config1).unwrap();
    let mut port2 = VhostUserPort::open(&sock2, mode, config2).unwrap();
    let halves1 = port1.take_lane_halves(lanes).unwrap();
    let halves2 = port2.take_lane_halves(lanes).unwrap();
    let worker = WorkerLanes::spawn("br0", lanes);
    worker.add_port("g1", halves1);

    let (q1, q2) = (config1.queue_pairs, config2.queue_pairs);
    // Guest 1 is given the MTU it would have anyway through QEMU's `host_mtu`: QEMU then
    // tells the port (`NET_SET_MTU`), and nothing else changes.
    let mtu = ",host_mtu=1500";
    let mut g1 =
        Guest::start_with_device(1, &sock1, side, &dir, &kernel, &initrd, q1, cpus[0], mtu);
    let mut g2 = Guest::start_with_device(2, &sock2, side, &dir, &kernel, &initrd, q2, cpus[1], "");
    let both_running = wait_until(Duration::from_secs(120), || {
        (port1.is_running() && port2.is_running()).then_some(())
    });
    if both_running.is_none() {
        panic!(
            "guests never started their queues (connected: {} {}, features: {:#x} {:#x}, \
             queues: {:?} {:?}, stats {:?} {:?})\n\
             --- guest 1\n{}\n{}\n--- guest 2\n{}\n{}",
            port1.is_connected(),
            port2.is_connected(),
            port1.features(),
            port2.features(),
            port1.queue_status(),
            port2.queue_status(),
            port1.stats(),
            port2.stats(),
            g1.log(),
            g1.stderr(),
            g2.log(),
            g2.stderr()
        );
    }
    assert_eq!(port1.stats().guest_mtu, Some(1500), "QEMU's NET_SET_MTU");
    assert_eq!(port2.stats().guest_mtu, None);
    let caps2 = port2.caps();
    assert!(
        caps2.tso4 && caps2.partial_csum,
        "Linux takes TSO: {caps2:?}"
    );
    worker.add_port("g2", halves2);

    let back = wait_until(Duration::from_secs(240), || g1.marker("WEFT-BACK"));
    let got = g2.marker("WEFT-GOT");
    let report = format!(
        "--- guest 1\n{}\n--- guest 2\n{}\n--- weft g1 {:?}\n--- weft g2 {:?}",
        g1.log(),
        g2.log(),
        port1.stats(),
        port2.stats()
    );
    let back = back.unwrap_or_else(|| panic!("the transfers did not finish\n{report}"));
    assert_eq!(g2.marker("WEFT-PING").as_deref(), Some("1"), "{report}");
    let sent = g1.marker("WEFT-MD5").unwrap_or_else(|| panic!("{report}"));
    let expected = format!("{sent} {}", 2048 * 1024);
    assert_eq!(got.as_deref(), Some(expected.as_str()), "{report}");
    assert_eq!(back, expected, "{report}");
    for s in [port1.stats(), port2.stats()] {
        // Each guest sent the 2 MB file once, and received it once.
        assert!(
            s.from_guest.bytes > 2 << 20 && s.to_guest.bytes > 2 << 20,
            "{report}"
        );
        common::assert_no_faults_or_drops(&s, &report);
    }
    eprintln!("{report}");
    for (port, pairs) in [(&port1, q1), (&port2, q2)] {
        let status = port.queue_status();
        assert_eq!(status.len(), 2 * usize::from(pairs), "{report}");
        if pairs > 1 {
            let mq = 1u64 << virtio_bindings::bindings::virtio_net::VIRTIO_NET_F_MQ;
            assert_ne!(port.features() & mq, 0, "the guest took MQ\n{report}");
        }
        eprintln!("queues: {status:?}");
    }
    drop((g1, g2));
    worker.shutdown();
    let stats = [port1.stats(), port2.stats()];
    drop((port1, port2));
    let _ = std::fs::remove_dir_all(&dir);
    stats
}
