//! QEMU 7.2 guests (TCG, the Debian kernel's virtio-net driver, a busybox initramfs) on a
//! vhost-user socket, for end-to-end tests of vhost-user ports. The guest's `/init` is
//! [`INIT_PRELUDE`] (modules, `eth0` up as `10.0.0.<id>/24`, `WEFT-UP <id>` on the console)
//! followed by the test's own script; the console goes to a log file the test reads.
//!
//! Needs `qemu-system-x86_64`, a kernel in /boot with its virtio modules, and a static
//! busybox: `scripts/install-test-deps` (as root) installs qemu-system-x86,
//! linux-image-amd64 and busybox-static.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::qmp::Qmp;

/// The virtio-net driver's modules, in load order.
pub const MODULES: [&str; 8] = [
    "virtio_ring",
    "virtio",
    "virtio_pci_modern_dev",
    "virtio_pci_legacy_dev",
    "virtio_pci",
    "failover",
    "net_failover",
    "virtio_net",
];

/// The start of every guest's `/init`: mounts, modules, `eth0` up as `10.0.0.$id/24` (`id`
/// from the kernel command line's `weft.id=`), then `WEFT-UP $id` on the console.
pub const INIT_PRELUDE: &str = r#"#!/bin/busybox sh
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
"#;

/// Why guests cannot boot here, or `None` when they can.
pub fn missing() -> Option<String> {
    if !crate::lab::installed("qemu-system-x86_64") {
        return Some("qemu-system-x86_64 not found (Debian package qemu-system-x86)".into());
    }
    if !Path::new("/bin/busybox").exists() {
        return Some("no /bin/busybox (Debian package busybox-static)".into());
    }
    if latest_kernel().is_none() {
        return Some("no kernel in /boot (Debian package linux-image-amd64)".into());
    }
    None
}

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
        while !self.out.len().is_multiple_of(4) {
            self.out.push(0);
        }
    }

    fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, &[], (0, 0));
        self.out
    }
}

fn latest_kernel() -> Option<PathBuf> {
    let mut kernels: Vec<PathBuf> = std::fs::read_dir("/boot")
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.to_string_lossy().contains("vmlinuz-"))
                .collect()
        })
        .unwrap_or_default();
    kernels.sort();
    kernels.pop()
}

/// The newest kernel in /boot and its version.
pub fn kernel() -> (PathBuf, String) {
    let path = latest_kernel().unwrap_or_else(|| {
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

/// Writes `dir/initramfs.cpio`: busybox, the virtio modules of kernel `version`, and
/// `/init` = [`INIT_PRELUDE`] + `script`.
pub fn initramfs(dir: &Path, version: &str, script: &str) -> PathBuf {
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
    let init = format!(
        "{}{script}",
        INIT_PRELUDE.replace("MODULES", &MODULES.join(" "))
    );
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

/// Who listens on the guest's vhost-user socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketSide {
    /// The switch listens, QEMU connects (`-chardev socket,path=P`).
    SwitchListens,
    /// QEMU listens (`server=on,wait=off`) and the switch connects. QEMU's network setup
    /// still waits for that first connection before the guest boots.
    QemuListens,
}

/// A running guest; killed when dropped.
pub struct Guest {
    child: Child,
    log: PathBuf,
    qmp: Option<PathBuf>,
    /// Where QEMU's stderr goes, when not to a pipe.
    errors: Option<PathBuf>,
}

impl Guest {
    /// Boots guest `id` (MAC `52:54:00:00:00:0<id>`) on the vhost-user socket `sock`; its
    /// console goes to `dir/guest<id>.log`.
    pub fn start(
        id: u32,
        sock: &Path,
        side: SocketSide,
        dir: &Path,
        kernel: &Path,
        initrd: &Path,
    ) -> Guest {
        Self::start_with_device(id, sock, side, dir, kernel, initrd, 1, 1, "")
    }

    /// As [`Guest::start`], with `queues` queue pairs (`-netdev vhost-user,queues=N`,
    /// `virtio-net-pci,mq=on`) and `cpus` vCPUs (Linux uses as many pairs as it has vCPUs,
    /// up to `queues`), and `device_extra` appended to the `virtio-net-pci` device's
    /// options (`",host_mtu=1400"`: QEMU gives the guest that MTU and tells the backend
    /// with `VHOST_USER_NET_SET_MTU`; `""`: nothing).
    #[allow(clippy::too_many_arguments)]
    pub fn start_with_device(
        id: u32,
        sock: &Path,
        side: SocketSide,
        dir: &Path,
        kernel: &Path,
        initrd: &Path,
        queues: u16,
        cpus: u16,
        device_extra: &str,
    ) -> Guest {
        let log = dir.join(format!("guest{id}.log"));
        let child = qemu_command(&Machine {
            id,
            sock,
            side,
            log: &log,
            kernel,
            initrd,
            queues,
            cpus,
            ram_kib: RAM_KIB,
            device_extra,
        })
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("qemu-system-x86_64 not found: run scripts/install-test-deps as root");
        Guest {
            child,
            log,
            qmp: None,
            errors: None,
        }
    }

    /// Guest `id` as [`Guest::start`] (one queue pair, one vCPU, the switch listening on
    /// `sock`), ready to be migrated: a QMP socket `dir/qmp-<tag>.sock` (see
    /// [`Guest::qmp`]) and its console in `dir/guest<id>-<tag>.log`. `incoming` starts it
    /// as a migration's destination (`-incoming defer`: it waits for `migrate-incoming`
    /// and the source's state, and boots nothing itself); a destination must be started
    /// with the same `id`, kernel, initramfs and `guest_announce` as its source.
    /// `guest_announce: false` sets the device's `guest_announce=off`, so that the guest
    /// cannot announce itself after a migration (QEMU then asks the backend to, with
    /// `VHOST_USER_SEND_RARP`); with `true` the device keeps QEMU's default.
    #[allow(clippy::too_many_arguments)]
    pub fn start_migratable(
        id: u32,
        sock: &Path,
        dir: &Path,
        kernel: &Path,
        initrd: &Path,
        tag: &str,
        incoming: bool,
        guest_announce: bool,
    ) -> Guest {
        let log = dir.join(format!("guest{id}-{tag}.log"));
        let qmp = dir.join(format!("qmp-{tag}.sock"));
        let errors = dir.join(format!("qemu-{tag}.stderr"));
        let mut cmd = qemu_command(&Machine {
            id,
            sock,
            side: SocketSide::SwitchListens,
            log: &log,
            kernel,
            initrd,
            queues: 1,
            cpus: 1,
            ram_kib: MIGRATABLE_RAM_KIB,
            device_extra: if guest_announce {
                ""
            } else {
                ",guest_announce=off"
            },
        });
        cmd.arg("-qmp")
            .arg(format!("unix:{},server=on,wait=off", qmp.display()));
        if incoming {
            cmd.args(["-incoming", "defer"]);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&errors).unwrap())
            .spawn()
            .expect("qemu-system-x86_64 not found: run scripts/install-test-deps as root");
        Guest {
            child,
            log,
            qmp: Some(qmp),
            errors: Some(errors),
        }
    }

    /// A new QMP connection to a guest started with [`Guest::start_migratable`].
    pub fn qmp(&self) -> Qmp {
        let path = self
            .qmp
            .as_ref()
            .expect("a guest started with a QMP socket");
        Qmp::connect(path, Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Kills QEMU (SIGKILL) and waits for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The guest's console so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// QEMU's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// True while QEMU runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// QEMU's own messages so far, QEMU left running (a guest started with
    /// [`Guest::start_migratable`], whose stderr goes to a file).
    pub fn errors(&self) -> String {
        let path = self
            .errors
            .as_ref()
            .expect("a guest whose stderr goes to a file");
        std::fs::read_to_string(path).unwrap_or_default()
    }

    /// QEMU's own messages (after it exited or was killed).
    pub fn stderr(&mut self) -> String {
        if self.errors.is_some() {
            self.kill();
            return self.errors();
        }
        use std::io::Read;
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut s = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut s);
        }
        s
    }

    /// The rest of the first whole console line starting with `marker`.
    pub fn marker(&self, marker: &str) -> Option<String> {
        let log = self.log();
        // Whole lines only: QEMU may be halfway through writing the last one, and a marker
        // read then would be cut short.
        let whole = log.rfind('\n').map_or("", |end| &log[..end]);
        whole
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

/// What one QEMU command line is made of.
struct Machine<'a> {
    id: u32,
    sock: &'a Path,
    side: SocketSide,
    log: &'a Path,
    kernel: &'a Path,
    initrd: &'a Path,
    queues: u16,
    cpus: u16,
    /// Guest memory in KiB.
    ram_kib: u32,
    /// Appended to the `virtio-net-pci` device's options (`,name=value...`).
    device_extra: &'a str,
}

/// Memory of a guest that is not migrated: 256 MiB.
const RAM_KIB: u32 = 256 << 10;

/// Memory of a guest that may be migrated: 8 KiB more than [`RAM_KIB`], so that its size is
/// not a multiple of 64 pages. QEMU 7.2 under TCG loses guest writes when it migrates a
/// block of that shape: the word-at-a-time path that syncs the dirty bitmap clears dirty
/// bits without re-arming TCG's write tracking, so pages written through translations
/// cached before the sync never get dirty again (fixed upstream in QEMU 9.0, "physmem: Fix
/// migration dirty bitmap coherency with TCG memory access"). A block of any other size
/// takes the page-at-a-time path, which re-arms it. Same guest, QEMU's own user network,
/// no vhost-user: 20, 0, 1, 38 and 0 pages of guest memory differed between source and
/// destination with 256 MiB; 0 in each of 16 runs with this size.
const MIGRATABLE_RAM_KIB: u32 = RAM_KIB + 8;

/// The QEMU command line of guest `m.id`: TCG, shared memory (a memfd, as a
/// vhost-user backend needs to map it, and live migration with it), the console to
/// `m.log`, a virtio-net device on vhost-user socket `m.sock`.
fn qemu_command(m: &Machine<'_>) -> Command {
    let (netdev_mq, device_mq) = if m.queues > 1 {
        (format!(",queues={}", m.queues), ",mq=on".to_string())
    } else {
        (String::new(), String::new())
    };
    let cpus = m.cpus.max(1).to_string();
    let ram = format!("{}K", m.ram_kib);
    let server = match m.side {
        SocketSide::SwitchListens => "",
        SocketSide::QemuListens => ",server=on,wait=off",
    };
    let id = m.id;
    let mut cmd = Command::new("qemu-system-x86_64");
    cmd.args([
        "-accel",
        "tcg",
        "-m",
        &ram,
        "-smp",
        &cpus,
        "-nodefaults",
        "-no-reboot",
    ])
    .args(["-display", "none", "-kernel"])
    .arg(m.kernel)
    .arg("-initrd")
    .arg(m.initrd)
    .arg("-append")
    .arg(format!("console=ttyS0 panic=-1 quiet weft.id={id}"))
    .arg("-serial")
    .arg(format!("file:{}", m.log.display()))
    .arg("-object")
    .arg(format!("memory-backend-memfd,id=mem,size={ram},share=on"))
    .args(["-numa", "node,memdev=mem"])
    .arg("-chardev")
    .arg(format!("socket,id=c0,path={}{server}", m.sock.display()))
    .arg("-netdev")
    .arg(format!("vhost-user,id=n0,chardev=c0{netdev_mq}"))
    .arg("-device")
    .arg(format!(
        "virtio-net-pci,netdev=n0,mac=52:54:00:00:00:0{id},vectors=0,romfile={device_mq}{}",
        m.device_extra
    ));
    cmd
}

/// Polls `f` every 100 ms until it gives a value or `timeout` passes.
pub fn wait_until<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
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
