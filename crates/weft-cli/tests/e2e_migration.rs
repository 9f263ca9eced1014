//! Live migration of a QEMU guest between vhost-user ports of real weftd processes, driven
//! through QMP and checked from the network: the guest (TCG, busybox, `10.0.0.1`, MAC
//! `52:54:00:00:00:01`) boots on one port; a destination QEMU started with `-incoming` on
//! another port takes it over while a peer pings it every 20 ms and streams a file into it
//! over one TCP connection.
//!
//! - One host, the backend announcing the guest (`guest_announce=off`: QEMU asks weft with
//!   `VHOST_USER_SEND_RARP`) and the guest announcing itself (QEMU's default): the migration
//!   completes, the stream arrives whole (same MD5), the guest answers pings from its new
//!   port, the FDB has its MAC there, and the longest gap in ping replies is printed.
//! - A migration cancelled half-way, one to a destination that never listens and one whose
//!   destination dies half-way leave the source running: it answers pings on its old port,
//!   where the FDB still has it.
//! - Three weftd "hosts" joined by VXLAN: the guest moves from host A to host B; an endpoint
//!   behind host C reaches it within a second, host A sends nothing more to the old port and
//!   learns the guest's MAC on its VXLAN port.
//!
//! Needs root, `/dev/net/tun`, QEMU, a kernel and busybox (`scripts/install-test-deps`);
//! without them a test says SKIP and passes.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::hosts::{Host, Underlay};
use common::weftd::Weftd;
use weft_control::Response;
use weft_testlab::lab::{self, Netns};
use weft_testlab::qemu::{self, Guest};
use weft_testlab::qmp::Qmp;

/// The guest: id 1 of the guest prelude.
const GUEST_ID: u32 = 1;
const GUEST_IP: &str = "10.0.0.1";
const GUEST_MAC: &str = "52:54:00:00:00:01";
/// The peer that pings the guest and streams into it.
const PEER_IP: &str = "10.0.0.9";
const PEER_MAC: &str = "02:00:00:00:00:09";
/// Where the guest listens for the stream.
const STREAM_PORT: u16 = 5000;
/// The stream: its size and the pace it is sent at (so that it spans the migration
/// whatever the guest's speed).
const STREAM_BYTES: usize = 24 << 20;
const STREAM_RATE: u64 = 3 << 20;
/// The longest gap in ping replies across a switch-over that the tests accept: the goal
/// is 100 ms, this bound leaves room for a loaded two-core machine.
const GAP_LIMIT_MS: f64 = 1000.0;

/// After the guest prelude: no IPv6 (nothing but the test's own traffic), a static ARP
/// entry for the peer (no ARP broadcast of the guest's own), the device's negotiated
/// features on the console, then a TCP listener on port 5000 that writes what it receives
/// to a file and reports its MD5 and size, again and again.
const GUEST_SCRIPT: &str = r#"echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6
echo 1 > /proc/sys/net/ipv6/conf/eth0/disable_ipv6
arp -s 10.0.0.9 02:00:00:00:00:09
echo "WEFT-FEATURES $(cat /sys/class/net/eth0/device/features)"
while true; do
    echo WEFT-LISTEN
    nc -l -p 5000 > /tmp/f
    echo "WEFT-RECEIVED $(md5sum /tmp/f | cut -d ' ' -f 1) $(wc -c < /tmp/f)"
    rm -f /tmp/f
done &
sleep 1000000
"#;

/// Why this machine cannot run these tests, if it cannot.
fn skip_reason() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("not root".into());
    }
    if !Path::new("/dev/net/tun").exists() {
        return Some("no /dev/net/tun".into());
    }
    qemu::missing()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Seconds since the epoch, as `ping -D` prints them.
fn epoch_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// What the tests ask of a weftd, whichever way it runs.
trait Daemon {
    fn log(&self) -> String;

    /// `weft --json ARGS`, which must succeed; the answer.
    fn json(&self, args: &[&str]) -> Response;

    /// The port of `switch`'s FDB entry for `mac`, if it has one.
    fn fdb_port(&self, switch: &str, mac: &str) -> Option<String> {
        let Response::Fdb { entries } = self.json(&["fdb", "show", switch]) else {
            panic!("fdb show answered something else")
        };
        entries
            .into_iter()
            .find(|e| e.mac.eq_ignore_ascii_case(mac))
            .map(|e| e.port)
    }

    /// `switch:port`'s status words (`connected`, `running`, `logging`...).
    fn status_words(&self, port: &str) -> Vec<String> {
        let Response::Port { port, .. } = self.json(&["port", "show", port]) else {
            panic!("port show answered something else")
        };
        port.offloads
    }

    /// The device counter `name` of `switch:port`, 0 when it has none.
    fn counter(&self, port: &str, name: &str) -> u64 {
        let Response::Port { counters, .. } = self.json(&["port", "show", port]) else {
            panic!("port show answered something else")
        };
        counters.device.get(name).copied().unwrap_or(0)
    }

    /// Frames `switch:port` sent, and frames it dropped (all reasons).
    fn sent_and_dropped(&self, port: &str) -> (u64, u64) {
        let Response::Port { counters, .. } = self.json(&["port", "show", port]) else {
            panic!("port show answered something else")
        };
        (counters.tx_packets, counters.drops.values().sum())
    }
}

impl Daemon for Weftd {
    fn json(&self, args: &[&str]) -> Response {
        Weftd::json(self, args)
    }

    fn log(&self) -> String {
        Weftd::log(self)
    }
}

/// A peer: a TAP port of `daemon` whose interface (named as the port) is in a namespace
/// of its own, `PEER_IP`/24 with MAC `PEER_MAC`, no IPv6, and a static neighbour entry for
/// the guest.
fn peer(daemon: &dyn Daemon, switch_port: &str, tag: &str) -> Netns {
    let ns = Netns::new(tag);
    let ifname = switch_port.split(':').nth(1).unwrap();
    daemon.json(&["port", "add", switch_port, "tap", "--netns", &ns.name]);
    let no_ipv6 = format!("echo 1 > /proc/sys/net/ipv6/conf/{ifname}/disable_ipv6");
    lab::run_ok(ns.cmd("sh").args(["-c", &no_ipv6]), Duration::from_secs(10));
    ns.ip(&["link", "set", ifname, "address", PEER_MAC]);
    ns.ip(&["addr", "add", &format!("{PEER_IP}/24"), "dev", ifname]);
    ns.ip(&["link", "set", ifname, "up"]);
    ns.ip(&[
        "neigh",
        "replace",
        GUEST_IP,
        "lladdr",
        GUEST_MAC,
        "dev",
        ifname,
        "nud",
        "permanent",
    ]);
    ns
}

/// The guests' files: kernel, initramfs, consoles, QMP and migration sockets.
struct Lab {
    dir: tempfile::TempDir,
    kernel: PathBuf,
    initrd: PathBuf,
}

impl Lab {
    fn new() -> Lab {
        let dir = tempfile::tempdir().unwrap();
        let (kernel, version) = qemu::kernel();
        let initrd = qemu::initramfs(dir.path(), &version, GUEST_SCRIPT);
        Lab {
            dir,
            kernel,
            initrd,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The guest on vhost-user socket `sock` (the switch listening); a migration's
    /// destination when `incoming`. `tag` names its console log and QMP socket.
    fn guest(&self, sock: &Path, tag: &str, incoming: bool, guest_announce: bool) -> Guest {
        Guest::start_migratable(
            GUEST_ID,
            sock,
            self.dir.path(),
            &self.kernel,
            &self.initrd,
            tag,
            incoming,
            guest_announce,
        )
    }

    /// The source guest booted and listening for the stream (panics with its console and
    /// QEMU's messages when it does not within 120 s).
    fn boot(&self, sock: &Path, guest_announce: bool, daemon: &dyn Daemon) -> (Guest, Qmp) {
        let guest = self.guest(sock, "src", false, guest_announce);
        let qmp = guest.qmp();
        let up = qemu::wait_until(Duration::from_secs(120), || guest.marker("WEFT-LISTEN"));
        assert!(
            up.is_some(),
            "the guest did not boot\n--- console\n{}\n--- QEMU\n{}\n--- weftd\n{}",
            guest.log(),
            guest.errors(),
            daemon.log()
        );
        (guest, qmp)
    }
}

/// The first line of a kernel oops or panic on the guest's console, if it has one.
fn crashed(guest: &Guest) -> Option<String> {
    guest
        .log()
        .lines()
        .find(|l| {
            ["BUG:", "Oops:", "Kernel panic", "general protection"]
                .iter()
                .any(|m| l.contains(m))
        })
        .map(str::to_string)
}

/// Pings from `ns` until one is answered, at most `limit`; how long it took.
fn reachable_within(ns: &Netns, ip: &str, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if ns.ping(ip, 1, 56) {
            return Some(start.elapsed());
        }
    }
    None
}

/// `ping -i 0.02 -D` running in a namespace, its output in a file.
struct Pinger {
    child: Child,
    out: PathBuf,
}

impl Pinger {
    fn start(ns: &Netns, dst: &str, out: PathBuf) -> Pinger {
        let file = std::fs::File::create(&out).unwrap();
        // `ip netns exec` runs ping in its own place: the child is ping itself.
        let child = ns
            .cmd("ping")
            .args(["-n", "-D", "-i", "0.02", "-w", "600", dst])
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Pinger { child, out }
    }

    /// Stops ping (SIGINT); the receive time (epoch seconds) of every reply, in order.
    fn stop(mut self) -> Vec<f64> {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let out = std::fs::read_to_string(&self.out).unwrap_or_default();
        reply_times(&out)
    }
}

impl Drop for Pinger {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The times of the replies in `ping -D`'s output (`[1700000000.123456] 64 bytes from
/// ...: icmp_seq=N ...`).
fn reply_times(out: &str) -> Vec<f64> {
    out.lines()
        .filter(|l| l.contains("bytes from"))
        .filter_map(|l| l.strip_prefix('[')?.split(']').next()?.parse().ok())
        .collect()
}

/// The longest time without a reply between `from` and `to` (epoch seconds; a reply
/// before `from` may open it), in ms, and where it ended relative to `switched` (ms).
fn longest_gap(replies: &[f64], from: f64, to: f64, switched: f64) -> (f64, f64) {
    let mut last = replies
        .iter()
        .copied()
        .filter(|t| *t <= from)
        .fold(from, |_, t| t);
    let mut gap = (0.0, 0.0);
    for t in replies.iter().copied().filter(|t| *t > from && *t <= to) {
        if (t - last) * 1000.0 > gap.0 {
            gap = ((t - last) * 1000.0, (t - switched) * 1000.0);
        }
        last = t;
    }
    if (to - last) * 1000.0 > gap.0 {
        gap = ((to - last) * 1000.0, f64::NAN);
    }
    gap
}

/// Why a socket could not be opened inside a namespace.
struct InNamespace(String);

impl From<weft_netns::NetnsError> for InNamespace {
    fn from(e: weft_netns::NetnsError) -> Self {
        InNamespace(e.to_string())
    }
}

/// A TCP stream from a namespace into the guest, sent at a steady pace by its own thread.
struct Stream {
    written: Arc<AtomicU64>,
    sender: JoinHandle<Result<(), String>>,
    md5: String,
}

impl Stream {
    /// Connects from `ns` to the guest's listener (retrying for up to 20 s) and sends
    /// `STREAM_BYTES` of test data at `STREAM_RATE`.
    fn start(ns: &Netns, scratch: &Path) -> Stream {
        let data = lab::test_data(STREAM_BYTES, 0x5eed);
        let file = scratch.join("stream.bin");
        std::fs::write(&file, &data).unwrap();
        let md5 = lab::run_ok(Command::new("md5sum").arg(&file), Duration::from_secs(20));
        let md5 = md5.split_whitespace().next().unwrap().to_string();
        let written = Arc::new(AtomicU64::new(0));
        let progress = Arc::clone(&written);
        let path = ns.path();
        let sender = std::thread::spawn(move || {
            let addr = format!("{GUEST_IP}:{STREAM_PORT}").parse().unwrap();
            let deadline = Instant::now() + Duration::from_secs(20);
            let mut stream = weft_netns::run_in(Some(&path), || loop {
                match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                    Ok(s) => return Ok(s),
                    Err(e) if Instant::now() > deadline => {
                        return Err(InNamespace(format!("connecting to the guest: {e}")))
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(100)),
                }
            })
            .map_err(|e| e.0)?;
            stream
                .set_write_timeout(Some(Duration::from_secs(60)))
                .map_err(|e| e.to_string())?;
            let started = Instant::now();
            for chunk in data.chunks(64 << 10) {
                let sent = progress.load(Ordering::Relaxed);
                let due = Duration::from_secs_f64(sent as f64 / STREAM_RATE as f64);
                if let Some(wait) = due.checked_sub(started.elapsed()) {
                    std::thread::sleep(wait);
                }
                stream
                    .write_all(chunk)
                    .map_err(|e| format!("sending after {sent} bytes: {e}"))?;
                progress.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            }
            stream
                .shutdown(std::net::Shutdown::Write)
                .map_err(|e| e.to_string())
        });
        Stream {
            written,
            sender,
            md5,
        }
    }

    fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }
}

/// What one migration did.
struct Migrated {
    /// `query-migrate`'s last answer on the source.
    answer: serde_json::Value,
    /// When the source reported the migration completed (epoch seconds).
    switched: f64,
    /// When it was started (epoch seconds).
    started: f64,
}

/// Migrates the guest of `src` to a new QEMU on vhost-user socket `sock` (tagged `tag`),
/// with a high bandwidth and a 50 ms downtime limit; the destination and what happened.
/// Panics with both QEMUs' messages when the migration does not complete.
fn migrate(
    lab: &Lab,
    src: &mut (Guest, Qmp),
    sock: &Path,
    tag: &str,
    guest_announce: bool,
    daemon_log: &dyn Fn() -> String,
) -> (Guest, Qmp, Migrated) {
    let dst = lab.guest(sock, tag, true, guest_announce);
    let mut dst_qmp = dst.qmp();
    let uri = format!(
        "unix:{}",
        lab.path(&format!("migrate-{tag}.sock")).display()
    );
    dst_qmp.migrate_incoming(&uri);
    let qmp = &mut src.1;
    qmp.set_migration_limits(10_000_000_000, 50);
    let started = epoch_now();
    let begun = qmp.migrate(&uri);
    let answer = if begun.is_ok() {
        qmp.wait_migration(
            &["completed", "failed", "cancelled"],
            Duration::from_secs(90),
        )
    } else {
        qmp.query_migrate()
    };
    let switched = epoch_now();
    let status = answer["status"].as_str().unwrap_or("?");
    if begun.is_err() || status != "completed" {
        std::thread::sleep(Duration::from_millis(500));
        panic!(
            "migration did not complete: migrate {begun:?}, query-migrate {answer}\n\
             --- source QEMU\n{}\n--- destination QEMU\n{}\n--- destination status {:?}\n{}",
            src.0.errors(),
            dst.errors(),
            dst_qmp.execute("query-status", serde_json::json!({})),
            daemon_log()
        );
    }
    (
        dst,
        dst_qmp,
        Migrated {
            answer,
            switched,
            started,
        },
    )
}

/// One host: the guest moves from `br0:a` to `br0:b` while the peer on `br0:p` pings it
/// and streams a file into it.
fn migrate_under_load_on_one_host(guest_announce: bool) {
    let _one_at_a_time = lab::serial();
    let which = if guest_announce {
        "the guest announcing itself"
    } else {
        "the backend announcing the guest (guest_announce=off)"
    };
    let weftd = Weftd::with_vhost_ports_a_and_b();
    let p = peer(&weftd, "br0:p", "mp");
    let lab = Lab::new();
    let mut src = lab.boot(&weftd.vhost_socket("a"), guest_announce, &weftd);
    let features = src.0.marker("WEFT-FEATURES").unwrap_or_default();
    // Bit 21 of the device's features: VIRTIO_NET_F_GUEST_ANNOUNCE.
    let announces = features.as_bytes().get(21) == Some(&b'1');
    eprintln!("{which}: guest's virtio-net features {features} (GUEST_ANNOUNCE {announces})");
    if !guest_announce {
        assert!(!announces, "guest_announce=off, yet the guest announces");
    }
    let report = |src: &Guest, dst: Option<&Guest>| {
        format!(
            "--- source console\n{}\n--- source QEMU\n{}\n--- destination console\n{}\n\
             --- destination QEMU\n{}\n--- weftd\n{}",
            src.log(),
            src.errors(),
            dst.map(Guest::log).unwrap_or_default(),
            dst.map(Guest::errors).unwrap_or_default(),
            weftd.log()
        )
    };
    assert!(
        reachable_within(&p, GUEST_IP, Duration::from_secs(20)).is_some(),
        "the peer cannot ping the guest before the migration\n{}",
        report(&src.0, None)
    );
    assert_eq!(weftd.fdb_port("br0", GUEST_MAC).as_deref(), Some("a"));

    let pinger = Pinger::start(&p, GUEST_IP, lab.path("ping.txt"));
    let stream = Stream::start(&p, lab.dir.path());
    // Well into the stream before the migration starts.
    let into = qemu::wait_until(Duration::from_secs(30), || {
        (stream.written() >= 6 << 20).then_some(())
    });
    assert!(
        into.is_some(),
        "the stream did not get going ({} bytes sent)\n{}",
        stream.written(),
        report(&src.0, None)
    );
    let (dst, mut dst_qmp, migrated) = migrate(
        &lab,
        &mut src,
        &weftd.vhost_socket("b"),
        "dst",
        guest_announce,
        &|| format!("--- weftd\n{}", weftd.log()),
    );
    let written_at_switch = stream.written();
    eprintln!(
        "{which}: migration completed in {:.0} ms (QEMU: total {} ms, downtime {} ms, \
         setup {} ms), {written_at_switch} of {STREAM_BYTES} stream bytes sent by then",
        (migrated.switched - migrated.started) * 1000.0,
        migrated.answer["total-time"],
        migrated.answer["downtime"],
        migrated.answer["setup-time"],
    );
    assert!(
        written_at_switch < STREAM_BYTES as u64,
        "the stream was over before the switch-over: make it longer"
    );
    assert_eq!(dst_qmp.run_state(), "running");
    assert_eq!(src.1.run_state(), "postmigrate");

    // The stream arrives whole in the guest, now on the destination.
    let received = qemu::wait_until(Duration::from_secs(60), || {
        dst.marker("WEFT-RECEIVED")
            .or_else(|| crashed(&dst).map(|_| String::new()))
    });
    if let Some(oops) = crashed(&dst) {
        panic!(
            "the guest crashed after the migration: {oops}\n{}",
            report(&src.0, Some(&dst))
        );
    }
    let Some(received) = received else {
        // Whether the guest still answers tells a stuck stream from a stuck guest.
        let written = stream.written();
        let replies = pinger.stop();
        let after: Vec<f64> = replies
            .iter()
            .filter(|t| **t > migrated.switched)
            .map(|t| (t - migrated.switched) * 1000.0)
            .collect();
        let show = |port: &str| text(&weftd.weft(&["port", "show", port]).stdout);
        // The sender's view of the connection tells lost segments from a receiver that
        // stopped acknowledging.
        let sender = p
            .cmd("ss")
            .args(["-tinoe", "dst", GUEST_IP])
            .output()
            .map(|o| text(&o.stdout))
            .unwrap_or_else(|e| format!("ss: {e}"));
        panic!(
            "the stream never completed in the guest ({written} bytes sent); {} ping replies \
             after the switch-over, the last {:?} ms after it\n--- the sender's socket\n{}\n\
             --- br0:a\n{}\n--- br0:b\n{}\n{}",
            after.len(),
            after.last(),
            sender,
            show("br0:a"),
            show("br0:b"),
            report(&src.0, Some(&dst))
        );
    };
    let sent = stream.sender.join().unwrap();
    assert_eq!(sent, Ok(()));
    assert_eq!(
        received,
        format!("{} {STREAM_BYTES}", stream.md5),
        "the guest received something else\n{}",
        report(&src.0, Some(&dst))
    );

    // A second of pings after the stream, then the gap across the switch-over.
    std::thread::sleep(Duration::from_secs(1));
    let end = epoch_now();
    let replies = pinger.stop();
    let (gap, at) = longest_gap(&replies, migrated.started, end, migrated.switched);
    let (across, _) = longest_gap(
        &replies,
        migrated.switched - 1.0,
        migrated.switched + 1.0,
        migrated.switched,
    );
    let after = replies.iter().filter(|t| **t > migrated.switched).count();
    eprintln!(
        "{which}: longest gap in ping replies across the switch-over (1 s either side): \
         {across:.0} ms; from the migration's start on: {gap:.0} ms (ending {at:.0} ms after \
         the switch-over); {after} replies after the switch-over"
    );
    assert!(
        after >= 10,
        "the guest stopped answering pings after the switch-over ({after} replies)\n{}",
        report(&src.0, Some(&dst))
    );
    assert!(
        gap <= GAP_LIMIT_MS,
        "{gap:.0} ms without a ping reply\n{}",
        report(&src.0, Some(&dst))
    );
    assert!(p.ping(GUEST_IP, 3, 56), "no ping after the migration");
    assert_eq!(
        weftd.fdb_port("br0", GUEST_MAC).as_deref(),
        Some("b"),
        "the FDB has not moved the guest to its new port\n{}",
        report(&src.0, Some(&dst))
    );
    // The source's port logged the pages it wrote; the announcement came from weft (QEMU's
    // VHOST_USER_SEND_RARP) only when the guest could not make its own.
    let logged = weftd.counter("br0:a", "vhost_pages_logged");
    let announcements = weftd.counter("br0:b", "vhost_announcements");
    eprintln!("{which}: {logged} pages logged on br0:a, {announcements} announcements by br0:b");
    assert!(logged > 0, "br0:a logged no page during the migration");
    if guest_announce {
        assert_eq!(
            announcements, 0,
            "weft announced a guest that announces itself"
        );
    } else {
        assert!(announcements > 0, "weft never announced the guest");
    }
}

#[test]
fn a_guest_migrated_to_another_port_keeps_its_tcp_stream_and_pings_when_weft_announces_it() {
    if let Some(why) = skip_reason() {
        eprintln!("SKIP: {why}");
        return;
    }
    migrate_under_load_on_one_host(false);
}

#[test]
fn a_guest_migrated_to_another_port_keeps_its_tcp_stream_and_pings_when_it_announces_itself() {
    if let Some(why) = skip_reason() {
        eprintln!("SKIP: {why}");
        return;
    }
    migrate_under_load_on_one_host(true);
}

/// The source after a migration that did not happen: still running, its MAC still on
/// `port` in the FDB (read before any new traffic could teach it again), answering pings.
fn source_unchanged(
    daemon: &dyn Daemon,
    src: &mut (Guest, Qmp),
    p: &Netns,
    port: &str,
    case: &str,
) {
    assert_eq!(src.1.run_state(), "running", "{case}: the source stopped");
    // QEMU turns logging off when its migration ends (it may take a moment).
    let switch_port = format!("br0:{port}");
    let stopped_logging = qemu::wait_until(Duration::from_secs(5), || {
        (!daemon
            .status_words(&switch_port)
            .iter()
            .any(|w| w == "logging"))
        .then_some(())
    });
    assert!(
        stopped_logging.is_some(),
        "{case}: {switch_port} still logs: {:?}",
        daemon.status_words(&switch_port)
    );
    assert_eq!(
        daemon.fdb_port("br0", GUEST_MAC).as_deref(),
        Some(port),
        "{case}: the FDB moved the guest\n{}",
        daemon.log()
    );
    assert!(
        p.ping(GUEST_IP, 3, 56),
        "{case}: the source no longer answers\n--- console\n{}\n--- QEMU\n{}\n--- weftd\n{}",
        src.0.log(),
        src.0.errors(),
        daemon.log()
    );
    assert_eq!(daemon.fdb_port("br0", GUEST_MAC).as_deref(), Some(port));
}

/// Starts a slow migration (2 MB/s: it would take minutes) of `src` to a new destination
/// QEMU on `sock`; waits until it is active and a second into it. The destination.
fn start_slow_migration(lab: &Lab, src: &mut (Guest, Qmp), sock: &Path, tag: &str) -> Guest {
    let dst = lab.guest(sock, tag, true, true);
    let mut dst_qmp = dst.qmp();
    let uri = format!(
        "unix:{}",
        lab.path(&format!("migrate-{tag}.sock")).display()
    );
    dst_qmp.migrate_incoming(&uri);
    src.1.set_migration_limits(2 << 20, 50);
    let begun = src.1.migrate(&uri);
    assert!(
        begun.is_ok(),
        "{tag}: migrate refused: {begun:?}\n--- source QEMU\n{}",
        src.0.errors()
    );
    let answer = src.1.wait_migration(&["active"], Duration::from_secs(30));
    assert_eq!(
        answer["status"],
        "active",
        "{tag}: {answer}\n--- source QEMU\n{}\n--- destination QEMU\n{}",
        src.0.errors(),
        dst.errors()
    );
    std::thread::sleep(Duration::from_secs(1));
    dst
}

#[test]
fn cancelled_or_failed_migrations_leave_the_source_running_and_reachable_on_its_port() {
    if let Some(why) = skip_reason() {
        eprintln!("SKIP: {why}");
        return;
    }
    let _one_at_a_time = lab::serial();
    let weftd = Weftd::with_vhost_ports_a_and_b();
    let p = peer(&weftd, "br0:p", "mf");
    let lab = Lab::new();
    let mut src = lab.boot(&weftd.vhost_socket("a"), true, &weftd);
    assert!(
        reachable_within(&p, GUEST_IP, Duration::from_secs(20)).is_some(),
        "the peer cannot ping the guest\n{}",
        weftd.log()
    );
    source_unchanged(&weftd, &mut src, &p, "a", "before any migration");

    // A destination that never listens: the migration fails at once.
    let nobody = format!("unix:{}", lab.path("nobody.sock").display());
    let begun = src.1.migrate(&nobody);
    assert!(begun.is_ok(), "migrate refused: {begun:?}");
    let answer = src.1.wait_migration(
        &["completed", "failed", "cancelled"],
        Duration::from_secs(30),
    );
    eprintln!(
        "migration to a socket nobody listens on: {} ({})",
        answer["status"], answer["error-desc"]
    );
    assert_eq!(answer["status"], "failed", "{answer}");
    source_unchanged(&weftd, &mut src, &p, "a", "no destination");

    // Cancelled while it copies memory (the guest reachable meanwhile, its pages logged).
    let mut dst = start_slow_migration(&lab, &mut src, &weftd.vhost_socket("b"), "cancel");
    let words = weftd.status_words("br0:a");
    assert!(
        words.iter().any(|w| w == "logging"),
        "br0:a does not log the pages it writes while the guest's memory is copied: {words:?}"
    );
    assert!(
        p.ping(GUEST_IP, 3, 56),
        "the guest stopped answering while its memory was being copied\n{}",
        weftd.log()
    );
    src.1.must("migrate_cancel", serde_json::json!({}));
    let answer = src.1.wait_migration(
        &["cancelled", "failed", "completed"],
        Duration::from_secs(30),
    );
    eprintln!("cancelled migration: {}", answer["status"]);
    assert_eq!(answer["status"], "cancelled", "{answer}");
    dst.kill();
    source_unchanged(&weftd, &mut src, &p, "a", "cancelled");

    // The destination killed half-way: the migration fails.
    let mut dst = start_slow_migration(&lab, &mut src, &weftd.vhost_socket("b"), "killed");
    dst.kill();
    let answer = src.1.wait_migration(
        &["failed", "cancelled", "completed"],
        Duration::from_secs(30),
    );
    eprintln!(
        "migration whose destination died: {} ({})",
        answer["status"], answer["error-desc"]
    );
    assert_eq!(answer["status"], "failed", "{answer}");
    source_unchanged(&weftd, &mut src, &p, "a", "destination killed");
}

/// The underlay subnet of hosts A, B and C.
const UNDERLAY_NET: &str = "10.98.0";

impl Daemon for Host {
    fn json(&self, args: &[&str]) -> Response {
        Host::json(self, args)
    }

    fn log(&self) -> String {
        Host::log(self)
    }
}

#[test]
fn a_guest_migrated_to_another_weftd_host_is_reached_over_vxlan_at_its_new_host_within_a_second() {
    if let Some(why) = skip_reason() {
        eprintln!("SKIP: {why}");
        return;
    }
    let _one_at_a_time = lab::serial();
    let binary = common::weftd_binary();
    let underlay = Underlay::new(UNDERLAY_NET, 3, "m");
    let hosts: Vec<Host> = (underlay.hosts.iter())
        .map(|ns| Host::start(&binary, ns, &[]))
        .collect();
    let addresses = &underlay.addresses;
    for (i, host) in hosts.iter().enumerate() {
        let mut args = vec![
            "port",
            "add",
            "br0:vx",
            "vxlan",
            "--local",
            &addresses[i],
            "--vni",
            "100",
            "--remote-learning",
        ];
        for remote in addresses.iter().filter(|r| **r != addresses[i]) {
            args.extend(["--remote", remote]);
        }
        host.json(&args);
    }
    let (a, b, c) = (&hosts[0], &hosts[1], &hosts[2]);
    a.json(&["port", "add", "br0:a", "vhost-user"]);
    b.json(&["port", "add", "br0:b", "vhost-user"]);
    let p = peer(c, "br0:p", "mc");
    let logs = || {
        format!(
            "--- weftd A\n{}\n--- weftd B\n{}\n--- weftd C\n{}",
            a.log(),
            b.log(),
            c.log()
        )
    };

    let lab = Lab::new();
    let mut src = lab.boot(&a.vhost_socket("a"), false, a);
    assert!(
        reachable_within(&p, GUEST_IP, Duration::from_secs(20)).is_some(),
        "C's endpoint cannot ping the guest on A\n{}",
        logs()
    );
    assert_eq!(a.fdb_port("br0", GUEST_MAC).as_deref(), Some("a"));

    let pinger = Pinger::start(&p, GUEST_IP, lab.path("ping.txt"));
    std::thread::sleep(Duration::from_secs(1));
    let (dst, _dst_qmp, migrated) =
        migrate(&lab, &mut src, &b.vhost_socket("b"), "dst", false, &logs);
    eprintln!(
        "across hosts: migration completed in {:.0} ms (QEMU: downtime {} ms)",
        (migrated.switched - migrated.started) * 1000.0,
        migrated.answer["downtime"],
    );
    // Frames A sent to the old port until now may have been on their way at the
    // switch-over; none may follow.
    std::thread::sleep(Duration::from_millis(1500));
    let old_port_before = a.sent_and_dropped("br0:a");
    std::thread::sleep(Duration::from_secs(2));
    let end = epoch_now();
    let replies = pinger.stop();
    let old_port_after = a.sent_and_dropped("br0:a");

    let first_after = replies.iter().copied().find(|t| *t > migrated.switched);
    let (gap, at) = longest_gap(&replies, migrated.started, end, migrated.switched);
    let reached = first_after.map(|t| (t - migrated.switched) * 1000.0);
    eprintln!(
        "across hosts: first reply {reached:?} ms after the switch-over; longest gap in \
         replies {gap:.0} ms (ending {at:.0} ms after the switch-over); br0:a (sent, \
         dropped) {old_port_before:?} -> {old_port_after:?} over 2 s of pings"
    );
    let report = format!(
        "--- source console\n{}\n--- destination console\n{}\n{}",
        src.0.log(),
        dst.log(),
        logs()
    );
    assert!(
        reached.is_some_and(|ms| ms <= 1000.0),
        "C's endpoint did not reach the guest on B within 1 s of the switch-over \
         ({reached:?} ms)\n{report}"
    );
    let after = replies.iter().filter(|t| **t > migrated.switched).count();
    assert!(
        after >= 50,
        "only {after} replies after the switch-over\n{report}"
    );
    assert_eq!(
        old_port_after, old_port_before,
        "A still sends the guest's frames to its old port\n{report}"
    );
    assert_eq!(
        a.fdb_port("br0", GUEST_MAC).as_deref(),
        Some("vx"),
        "A's FDB\n{report}"
    );
    assert_eq!(b.fdb_port("br0", GUEST_MAC).as_deref(), Some("b"));
    // The guest cannot announce itself (guest_announce=off): B's port did, for QEMU.
    assert!(b.counter("br0:b", "vhost_announcements") > 0);
    drop(hosts);
    drop(underlay);
}
