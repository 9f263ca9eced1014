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
///
/// Its hugepage memory is in unlinked files (`--in-memory`): DPDK leaves named hugepage
/// files behind at exit (128 of the machine's pages per run, until none are free).
pub fn spawn_with_queues(prefix: &str, a: &Path, b: &Path, queues: u16) -> Child {
    command(prefix, a, b, queues, true)
        .spawn()
        .expect("start dpdk-testpmd")
}

/// As [`spawn`], with its memory in named hugepage files (`/dev/hugepages/PREFIX*`, see
/// [`hugepage_files`]), as a DPDK application has it by default: files another process can
/// shrink. The caller removes them ([`remove_files`]).
pub fn spawn_with_files(prefix: &str, a: &Path, b: &Path) -> Child {
    command(prefix, a, b, 1, false)
        .spawn()
        .expect("start dpdk-testpmd")
}

/// The hugepage files of the testpmd started with `prefix`.
pub fn hugepage_files(prefix: &str) -> Vec<std::path::PathBuf> {
    std::fs::read_dir("/dev/hugepages")
        .map(|dir| {
            dir.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(prefix))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Removes what a testpmd started with `prefix` and named files left behind.
pub fn remove_files(prefix: &str) {
    for f in hugepage_files(prefix) {
        let _ = std::fs::remove_file(f);
    }
    let _ = std::fs::remove_dir_all(Path::new("/var/run/dpdk").join(prefix));
}

/// Starts interactive testpmd with one virtio-user port on the vhost-user socket `socket`
/// that sends 64-byte broadcast frames as fast as it can once told `start` (`txonly`, its
/// peer set to ff:ff:ff:ff:ff:ff): a broadcast storm.
pub fn spawn_broadcast(prefix: &str, socket: &Path) -> Child {
    eal(prefix, true)
        .arg(format!(
            "--vdev=net_virtio_user0,path={},server=0,mac=02:00:00:00:0a:01",
            socket.display()
        ))
        .args(["--", "-i", "--nb-cores=1", "--forward-mode=txonly"])
        .args(["--eth-peer=0,ff:ff:ff:ff:ff:ff", "--txpkts=64"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start dpdk-testpmd")
}

/// testpmd with its EAL options: two lcores (main 0), no PCI, 256 MB under `prefix`, in
/// unlinked hugepage files when `in_memory`.
fn eal(prefix: &str, in_memory: bool) -> Command {
    let mut cmd = Command::new("dpdk-testpmd");
    cmd.args([
        "-l",
        "0,1",
        "--main-lcore",
        "0",
        "--no-pci",
        "--single-file-segments",
    ])
    .args(["-m", "256", "--file-prefix", prefix])
    .args(in_memory.then_some("--in-memory"));
    cmd
}

/// testpmd's command line (interactive, io forwarding between two virtio-user ports), its
/// memory in unlinked hugepage files when `in_memory`.
fn command(prefix: &str, a: &Path, b: &Path, queues: u16, in_memory: bool) -> Command {
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
    let mut cmd = eal(prefix, in_memory);
    cmd.arg(vdev(0, a))
        .arg(vdev(1, b))
        .args(["--", "-i", "--nb-cores=1", "--forward-mode=io"])
        .args(mq_args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
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

/// One `net_memif` port of a testpmd: its role (`server` or `client`), socket and
/// interface id.
#[derive(Debug, Clone, Copy)]
pub struct MemifVdev<'a> {
    /// `server` (testpmd listens) or `client` (testpmd connects and allocates the memory).
    pub role: &'a str,
    /// The memif socket (a path, not abstract).
    pub socket: &'a Path,
    /// The interface id.
    pub id: u32,
    /// The secret both ends must give, if any.
    pub secret: Option<&'a str>,
}

/// Starts interactive testpmd with two `net_memif` ports in io forwarding between them,
/// under its own `--file-prefix`. memif needs no hugepages (its regions are memfds, and
/// copy mode is the default): testpmd runs with `--no-huge` and a small mbuf pool, so it
/// takes none of the hugepages other tests share.
pub fn spawn_memif(prefix: &str, ports: [MemifVdev<'_>; 2]) -> Child {
    spawn_memif_queues(prefix, ports, 1)
}

/// As [`spawn_memif`], with `queues` queue pairs per port (`--rxq`/`--txq`: a memif port
/// has as many rings each way).
pub fn spawn_memif_queues(prefix: &str, ports: [MemifVdev<'_>; 2], queues: u16) -> Child {
    let mut cmd = Command::new("dpdk-testpmd");
    cmd.args(["-l", "0,1", "--main-lcore", "0", "--no-pci", "--no-huge"])
        .args(["-m", "64", "--file-prefix", prefix]);
    for (i, p) in ports.iter().enumerate() {
        let secret = p.secret.map(|s| format!(",secret={s}")).unwrap_or_default();
        cmd.arg(format!(
            "--vdev=net_memif{i},role={},socket={},socket-abstract=no,id={}{secret}",
            p.role,
            p.socket.display(),
            p.id
        ));
    }
    cmd.args(["--", "-i", "--nb-cores=1", "--forward-mode=io"])
        .arg("--total-num-mbufs=8192")
        .arg(format!("--rxq={queues}"))
        .arg(format!("--txq={queues}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start dpdk-testpmd")
}

/// Why testpmd cannot run memif ports here, or `None` when it can (no hugepages needed).
pub fn memif_missing() -> Option<String> {
    (!crate::lab::installed("dpdk-testpmd"))
        .then(|| "dpdk-testpmd not found (Debian package dpdk-dev)".into())
}

/// The RX-packets of testpmd's forward statistics (what `run_and_quit` returns as its
/// output), in port order.
pub fn rx_packets(output: &str) -> Vec<u64> {
    output
        .split("Forward statistics for port")
        .skip(1)
        .filter_map(|section| {
            let rest = section.split("RX-packets:").nth(1)?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .collect()
}
