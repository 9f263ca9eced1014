//! DPDK `dpdk-testpmd` as a real vhost-user frontend: two virtio-user ports in an io loop.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Why testpmd cannot run here (not installed, or no hugepages), or `None` when it can.
pub fn missing() -> Option<String> {
    if !crate::lab::installed("dpdk-testpmd") {
        return Some("dpdk-testpmd not found (Debian package dpdk-dev)".into());
    }
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let free = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("HugePages_Free:"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    let mounted = std::fs::read_to_string("/proc/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.contains(" /dev/hugepages hugetlbfs"));
    (free < 128 || !mounted).then(|| {
        format!("need 128 free 2 MB hugepages at /dev/hugepages (free {free}, mounted {mounted})")
    })
}

/// Starts interactive testpmd with virtio-user ports on the vhost-user sockets `a` and `b`
/// (io forwarding between them), under its own `--file-prefix`.
pub fn spawn(prefix: &str, a: &Path, b: &Path) -> Child {
    spawn_with_queues(prefix, a, b, 1)
}

/// As [`spawn`], with `queues` queue pairs per port (virtio-user `queues=`, testpmd
/// `--rxq`/`--txq`); above 1 the first bursts are of several flows
/// (`--txonly-multi-flow`: the source address varies), so that a backend spreading flows
/// over its receive queues uses them all.
pub fn spawn_with_queues(prefix: &str, a: &Path, b: &Path, queues: u16) -> Child {
    let vdev = |i: u32, path: &Path| {
        let mq = if queues > 1 {
            format!(",queues={queues}")
        } else {
            String::new()
        };
        format!(
            "--vdev=net_virtio_user{i},path={},server=0,queue_size=256{mq}",
            path.display()
        )
    };
    let mq_args = if queues > 1 {
        vec![
            format!("--rxq={queues}"),
            format!("--txq={queues}"),
            "--txonly-multi-flow".to_string(),
        ]
    } else {
        Vec::new()
    };
    Command::new("dpdk-testpmd")
        .args([
            "-l",
            "0,1",
            "--main-lcore",
            "0",
            "--no-pci",
            "--single-file-segments",
            // Hugepage memory in unlinked files: DPDK leaves a named hugepage file behind at
            // exit (128 of the machine's pages per run, until none are free).
            "--in-memory",
        ])
        .args(["-m", "256", "--file-prefix", prefix])
        .arg(vdev(0, a))
        .arg(vdev(1, b))
        .args(["--", "-i", "--nb-cores=1", "--forward-mode=io"])
        .args(mq_args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start dpdk-testpmd")
}

/// When `forward` is set, has testpmd send a first burst of 32 on each port and forward for
/// 3 s; then quits it (killed after 60 s) and returns its standard output and error.
pub fn run_and_quit(testpmd: &mut Child, forward: bool) -> (String, String) {
    let mut stdin = testpmd.stdin.take().expect("testpmd's stdin");
    if forward {
        stdin
            .write_all(b"start tx_first 32\n")
            .expect("write to testpmd");
        stdin.flush().expect("write to testpmd");
        std::thread::sleep(Duration::from_secs(3));
        stdin.write_all(b"stop\n").expect("write to testpmd");
    }
    stdin.write_all(b"quit\n").expect("write to testpmd");
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(60);
    while testpmd.try_wait().expect("testpmd's status").is_none() {
        if Instant::now() > deadline {
            let _ = testpmd.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut s) = testpmd.stdout.take() {
        let _ = s.read_to_string(&mut out);
    }
    if let Some(mut s) = testpmd.stderr.take() {
        let _ = s.read_to_string(&mut err);
    }
    let _ = testpmd.wait();
    (out, err)
}
