//! End to end with real guests: two QEMU 7.2 VMs (TCG, the Debian kernel's virtio-net
//! driver, a busybox initramfs) on two weft vhost-user ports joined by a weft switch. The
//! guests ping each other and move 2 MB over TCP (busybox httpd and wget); the checksums
//! must match; then guest 1 fetches guest 2's copy back.
//!
//! Guest 1's port is on the switch before the guest negotiates (the switch then sees plain
//! capabilities and segments the TSO super-frames guest 2 sends it); guest 2's port is added
//! after negotiation (it takes guest 1's super-frames whole). Both paths carry the TCP
//! stream.
//!
//! Needs `qemu-system-x86_64`, a kernel in /boot with its virtio modules, and a static
//! busybox: `scripts/install-test-deps` (as root) installs qemu-system-x86,
//! linux-image-amd64 and busybox-static.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use weft_runtime::{spawn_worker, WorkerConfig};
use weft_switch::{PortOptions, SwitchConfig};
use weft_vhost::{DispatchMode, NotifyPolicy, VhostPortConfig, VhostPortStats, VhostUserPort};

const MODULES: [&str; 8] = [
    "virtio_ring",
    "virtio",
    "virtio_pci_modern_dev",
    "virtio_pci_legacy_dev",
    "virtio_pci",
    "failover",
    "net_failover",
    "virtio_net",
];

const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
for m in MODULES; do insmod /lib/modules/$m.ko || echo "WEFT-FAIL insmod $m"; done
id=$(sed -n 's/.*weft\.id=\([0-9]*\).*/\1/p' /proc/cmdline)
ip link set lo up
ip link set eth0 up
ip addr add 10.0.0.$id/24 dev eth0
echo "WEFT-UP $id"
mkdir -p /www
if [ "$id" = 1 ]; then
    dd if=/dev/urandom of=/www/data bs=1024 count=2048 2>/dev/null
    echo "WEFT-MD5 $(md5sum /www/data | cut -d' ' -f1)"
    httpd -p 80 -h /www
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

/// A `newc` cpio archive, as the kernel unpacks an initramfs.
#[derive(Default)]
struct Cpio {
    out: Vec<u8>,
    ino: u32,
}

impl Cpio {
    fn entry(&mut self, name: &str, mode: u32, data: &[u8], rdev: (u32, u32)) {
        self.ino += 1;
        let fields = [
            self.ino,
            mode,
            0,
            0,
            1,
            0,
            u32::try_from(data.len()).unwrap(),
            0,
            0,
            rdev.0,
            rdev.1,
            u32::try_from(name.len() + 1).unwrap(),
            0,
        ];
        self.out.extend_from_slice(b"070701");
        for f in fields {
            self.out.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        self.out.extend_from_slice(name.as_bytes());
        self.out.push(0);
        self.pad();
        self.out.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while self.out.len() % 4 != 0 {
            self.out.push(0);
        }
    }

    fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, &[], (0, 0));
        self.out
    }
}

fn kernel() -> (PathBuf, String) {
    let mut kernels: Vec<PathBuf> = std::fs::read_dir("/boot")
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.to_string_lossy().contains("vmlinuz-"))
                .collect()
        })
        .unwrap_or_default();
    kernels.sort();
    let path = kernels.pop().unwrap_or_else(|| {
        panic!("no kernel in /boot: run scripts/install-test-deps as root (linux-image-amd64)")
    });
    let version = path
        .file_name()
        .unwrap()
        .to_string_lossy()
        .trim_start_matches("vmlinuz-")
        .to_string();
    (path, version)
}

fn initramfs(dir: &Path, version: &str) -> PathBuf {
    let busybox = std::fs::read("/bin/busybox")
        .expect("no /bin/busybox: run scripts/install-test-deps as root (busybox-static)");
    let mut cpio = Cpio::default();
    for d in [
        "bin",
        "dev",
        "proc",
        "sys",
        "tmp",
        "lib",
        "lib/modules",
        "www",
    ] {
        cpio.entry(d, 0o040_755, &[], (0, 0));
    }
    cpio.entry("dev/console", 0o020_600, &[], (5, 1));
    cpio.entry("bin/busybox", 0o100_755, &busybox, (0, 0));
    let init = INIT.replace("MODULES", &MODULES.join(" "));
    cpio.entry("init", 0o100_755, init.as_bytes(), (0, 0));
    let root = PathBuf::from(format!("/lib/modules/{version}/kernel"));
    for m in MODULES {
        let found = find_module(&root, &format!("{m}.ko"))
            .unwrap_or_else(|| panic!("module {m}.ko not found under {}", root.display()));
        let data = std::fs::read(found).unwrap();
        cpio.entry(&format!("lib/modules/{m}.ko"), 0o100_644, &data, (0, 0));
    }
    let path = dir.join("initramfs.cpio");
    std::fs::write(&path, cpio.finish()).unwrap();
    path
}

fn find_module(dir: &Path, name: &str) -> Option<PathBuf> {
    for e in std::fs::read_dir(dir).ok()?.filter_map(Result::ok) {
        let p = e.path();
        if p.is_dir() {
            if let Some(found) = find_module(&p, name) {
                return Some(found);
            }
        } else if p.file_name().is_some_and(|f| f == name) {
            return Some(p);
        }
    }
    None
}

struct Guest {
    child: Child,
    log: PathBuf,
}

impl Guest {
    fn start(id: u32, sock: &Path, dir: &Path, kernel: &Path, initrd: &Path) -> Guest {
        let log = dir.join(format!("guest{id}.log"));
        let child = Command::new("qemu-system-x86_64")
            .args([
                "-accel",
                "tcg",
                "-m",
                "256",
                "-smp",
                "1",
                "-nodefaults",
                "-no-reboot",
            ])
            .args(["-display", "none", "-kernel"])
            .arg(kernel)
            .arg("-initrd")
            .arg(initrd)
            .arg("-append")
            .arg(format!("console=ttyS0 panic=-1 quiet weft.id={id}"))
            .arg("-serial")
            .arg(format!("file:{}", log.display()))
            .args(["-object", "memory-backend-memfd,id=mem,size=256M,share=on"])
            .args(["-numa", "node,memdev=mem"])
            .arg("-chardev")
            .arg(format!("socket,id=c0,path={}", sock.display()))
            .args(["-netdev", "vhost-user,id=n0,chardev=c0"])
            .arg("-device")
            .arg(format!(
                "virtio-net-pci,netdev=n0,mac=52:54:00:00:00:0{id},vectors=0,romfile="
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("qemu-system-x86_64 not found: run scripts/install-test-deps as root");
        Guest { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// QEMU's own messages (after it exited or was killed).
    fn stderr(&mut self) -> String {
        use std::io::Read;
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut s = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut s);
        }
        s
    }

    /// The rest of the first line starting with `marker`.
    fn marker(&self, marker: &str) -> Option<String> {
        self.log()
            .lines()
            .find_map(|l| l.strip_prefix(marker).map(|r| r.trim().to_string()))
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_until<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The guest pairs run one after the other: two at once would starve each other of the
/// machine's two cores under TCG.
static ONE_PAIR_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn two_linux_guests_ping_and_move_data_over_tcp_through_weft() {
    let _serial = ONE_PAIR_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let config = VhostPortConfig::default();
    run_two_guests("default", config, config);
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
    let stats = run_two_guests("modes", optimistic, coalesced);
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

/// Two guests behind ports set up as given: they ping, and move a 2 MB file each way over
/// TCP; returns the ports' counters.
fn run_two_guests(
    tag: &str,
    config1: VhostPortConfig,
    config2: VhostPortConfig,
) -> [VhostPortStats; 2] {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let dir = std::env::temp_dir().join(format!("weft-e2e-qemu-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (kernel, version) = kernel();
    let initrd = initramfs(&dir, &version);

    let mut port1 = VhostUserPort::listen(dir.join("g1.sock"), config1).unwrap();
    let mut port2 = VhostUserPort::listen(dir.join("g2.sock"), config2).unwrap();
    let (rx1, tx1) = port1.take_halves().unwrap();
    let (rx2, tx2) = port2.take_halves().unwrap();
    let worker = spawn_worker(WorkerConfig::default()).unwrap();
    worker
        .exec(move |reg, _| {
            reg.create("br0", SwitchConfig::default()).unwrap();
            reg.add_port(
                "br0:g1",
                Some(Box::new(rx1)),
                Box::new(tx1),
                PortOptions::default(),
            )
            .unwrap();
        })
        .unwrap();

    let mut g1 = Guest::start(1, port1.path(), &dir, &kernel, &initrd);
    let mut g2 = Guest::start(2, port2.path(), &dir, &kernel, &initrd);
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
    let caps2 = port2.caps();
    assert!(
        caps2.tso4 && caps2.partial_csum,
        "Linux takes TSO: {caps2:?}"
    );
    worker
        .exec(move |reg, _| {
            reg.add_port(
                "br0:g2",
                Some(Box::new(rx2)),
                Box::new(tx2),
                PortOptions::default(),
            )
            .unwrap();
        })
        .unwrap();

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
        assert_eq!(
            s.from_guest.total_faults() + s.to_guest.total_faults(),
            0,
            "{report}"
        );
        assert_eq!(
            s.from_guest.total_drops() + s.to_guest.total_drops(),
            0,
            "{report}"
        );
    }
    eprintln!("{report}");
    drop((g1, g2));
    let _ = worker.shutdown();
    let stats = [port1.stats(), port2.stats()];
    drop((port1, port2));
    let _ = std::fs::remove_dir_all(&dir);
    stats
}
