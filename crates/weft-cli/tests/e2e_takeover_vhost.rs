//! End to end: a QEMU guest on a server-mode vhost-user port keeps its connection through
//! `weft upgrade`. QEMU is started without reconnection, so a disconnect would cut the guest
//! off for good: pings from a TAP peer every 2 ms go on being answered across two upgrades,
//! a paced TCP stream into the guest arrives whole (same MD5), and the guest never boots
//! again.
//!
//! Needs root, QEMU, a kernel and busybox (`scripts/install-test-deps`); prints SKIP
//! otherwise.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use common::weftd::Weftd;
use common::{code, stderr};
use weft_testlab::lab::{self, Netns};
use weft_testlab::qemu;

const GUEST_IP: &str = "10.0.0.1";
const PEER_IP: &str = "10.0.0.9";
/// The stream: 12 MiB sent at 2 MiB/s, so it spans the upgrades whatever the guest's speed.
const STREAM_BYTES: usize = 12 << 20;
const STREAM_CHUNK: usize = 64 << 10;
const STREAM_PAUSE: Duration = Duration::from_millis(31);

/// After the guest prelude: no IPv6, a listener on port 5000 that reports the MD5 and size
/// of what it receives.
const GUEST_SCRIPT: &str = r#"echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6
echo 1 > /proc/sys/net/ipv6/conf/eth0/disable_ipv6
while true; do
    echo WEFT-LISTEN
    nc -l -p 5000 > /tmp/f
    echo "WEFT-RECEIVED $(md5sum /tmp/f | cut -d ' ' -f 1) $(wc -c < /tmp/f)"
    rm -f /tmp/f
done &
sleep 1000000
"#;

fn skip_reason() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("not root".into());
    }
    if !lab::installed("ping") {
        return Some("no ping".into());
    }
    qemu::missing()
}

/// An error inside the peer's namespace.
struct InNamespace(String);

impl From<weft_netns::NetnsError> for InNamespace {
    fn from(e: weft_netns::NetnsError) -> Self {
        InNamespace(e.to_string())
    }
}

/// Sends the stream from `ns` to the guest's listener at a steady pace.
fn stream(ns: &Netns, data: Vec<u8>) -> std::thread::JoinHandle<Result<(), String>> {
    let path = ns.path();
    std::thread::spawn(move || {
        let addr = format!("{GUEST_IP}:5000").parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut s = weft_netns::run_in(Some(&path), || loop {
            match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                Ok(s) => return Ok(s),
                Err(e) if Instant::now() > deadline => {
                    return Err(InNamespace(format!("connecting to the guest: {e}")))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        })
        .map_err(|e| e.0)?;
        s.set_write_timeout(Some(Duration::from_secs(60)))
            .map_err(|e| e.to_string())?;
        for chunk in data.chunks(STREAM_CHUNK) {
            s.write_all(chunk).map_err(|e| e.to_string())?;
            std::thread::sleep(STREAM_PAUSE);
        }
        s.shutdown(std::net::Shutdown::Write)
            .map_err(|e| e.to_string())
    })
}

#[test]
fn a_qemu_guest_on_a_server_mode_port_keeps_its_connection_pings_and_tcp_stream_through_upgrades() {
    let test = "a_qemu_guest_on_a_server_mode_port_keeps_its_connection_pings_and_tcp_stream_through_upgrades";
    if let Some(why) = skip_reason() {
        eprintln!("SKIP {test}: {why}");
        return;
    }
    let _one_at_a_time = lab::serial();
    let guests = tempfile::tempdir().unwrap();
    let dir = guests.path();
    let (kernel, version) = qemu::kernel();
    let initrd = qemu::initramfs(dir, &version, GUEST_SCRIPT);
    let mut weftd = Weftd::start();
    let o = weftd.weft(&["port", "add", "br0:vm", "vhost-user"]);
    assert_eq!(code(&o), 0, "{}\n{}", stderr(&o), weftd.log());
    let mut guest = qemu::Guest::start(
        1,
        &weftd.vhost_socket("vm"),
        qemu::SocketSide::SwitchListens,
        dir,
        &kernel,
        &initrd,
    );
    let peer = Netns::new("tkv");
    common::taps::tap_endpoint(&weftd, "peer", &peer, Some(&format!("{PEER_IP}/24")), None);
    let report = |weftd: &Weftd, guest: &qemu::Guest| {
        format!("--- weftd\n{}\n--- guest\n{}", weftd.log(), guest.log())
    };
    if qemu::wait_until(Duration::from_secs(120), || guest.marker("WEFT-LISTEN")).is_none() {
        panic!("the guest never listened\n{}", report(&weftd, &guest));
    }
    assert!(
        qemu::wait_until(Duration::from_secs(30), || peer
            .ping(GUEST_IP, 1, 56)
            .then_some(()))
        .is_some(),
        "no ping before the upgrade\n{}",
        report(&weftd, &guest)
    );

    let data = lab::test_data(STREAM_BYTES, 0x7a4e);
    let file = dir.join("stream.bin");
    std::fs::write(&file, &data).unwrap();
    let md5 = lab::run_ok(Command::new("md5sum").arg(&file), Duration::from_secs(20));
    let md5 = md5.split_whitespace().next().unwrap().to_string();
    let pings = peer
        .cmd("ping")
        .args(["-q", "-i", "0.002", "-W", "1", "-c", "2500", GUEST_IP])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let sender = stream(&peer, data);
    std::thread::sleep(Duration::from_secs(1));
    for round in 1..=2 {
        let before = weftd.answering_pid();
        let o = weftd.upgrade();
        assert_eq!(
            code(&o),
            0,
            "upgrade {round}: {}\n{}",
            stderr(&o),
            report(&weftd, &guest)
        );
        assert_ne!(weftd.answering_pid(), before);
        std::thread::sleep(Duration::from_millis(700));
    }
    assert!(
        !sender.is_finished(),
        "the stream ended before the upgrades were done: it proves nothing"
    );
    sender
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("stream: {e}\n{}", report(&weftd, &guest)));
    let received = qemu::wait_until(Duration::from_secs(60), || guest.marker("WEFT-RECEIVED"))
        .unwrap_or_else(|| {
            panic!(
                "the guest never got the whole stream\n{}",
                report(&weftd, &guest)
            )
        });
    assert_eq!(
        received.split_whitespace().collect::<Vec<_>>(),
        [md5.as_str(), &STREAM_BYTES.to_string()],
        "the stream arrived changed\n{}",
        report(&weftd, &guest)
    );
    let out = pings.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let counts: Vec<u64> = text
        .lines()
        .find(|l| l.contains("packets transmitted"))
        .unwrap_or_else(|| panic!("no ping summary: {text}"))
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    let (sent, answered) = (counts[0], counts[1]);
    eprintln!("{test}: {answered} of {sent} pings (2 ms apart) answered across two upgrades");
    assert!(
        sent - answered <= 25,
        "{} of {sent} pings lost across two upgrades (more than 50 ms of traffic)\n{}",
        sent - answered,
        report(&weftd, &guest)
    );
    // The same guest all along, never told its backend went away.
    assert!(guest.is_running(), "{}", report(&weftd, &guest));
    assert_eq!(guest.log().matches("WEFT-UP").count(), 1, "{}", guest.log());
    let errors = guest.stderr();
    assert!(
        !errors.contains("disconnect") && !errors.contains("closed"),
        "QEMU saw its backend go: {errors}"
    );
    // The socket is the upgraded weftd's: deleting the port removes it.
    let sock = weftd.vhost_socket("vm");
    weftd.json(&["port", "del", "br0:vm"]);
    assert!(!sock.exists(), "the socket outlived its port");
}
