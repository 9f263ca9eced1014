//! End to end: `weft upgrade` hands a running weftd's ports to a new weftd without a gap, and
//! a weftd killed with SIGKILL leaves its TAPs for the next one. TAP endpoints in network
//! namespaces keep their devices (same interface index), addresses and traffic; learned
//! MACs survive; a new weftd that cannot carry the state leaves the running one serving.
//!
//! Needs root and `/dev/net/tun`; prints SKIP otherwise.

mod common;

use std::time::Duration;

use weft_control::Response;
use weft_testlab::lab::{self, Netns};

use common::taps::{drop_count, ifindex, port_counters, tap_endpoint};
use common::weftd::Weftd;
use common::{code, stderr};

fn can_run(test: &str) -> bool {
    lab::can_run(test) && lab::installed("ping")
}

fn has_address(ns: &Netns, dev: &str, addr: &str) -> bool {
    ns.ip(&["-o", "addr", "show", "dev", dev]).contains(addr)
}

/// A ping every 2 ms from `ns` to `dst` for `count` pings, in the background; `finish`
/// gives (sent, received).
struct PingStream(std::process::Child);

impl PingStream {
    fn start(ns: &Netns, dst: &str, count: u32) -> PingStream {
        let child = ns
            .cmd("ping")
            .args([
                "-q",
                "-i",
                "0.002",
                "-W",
                "1",
                "-c",
                &count.to_string(),
                dst,
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        PingStream(child)
    }

    fn finish(self) -> (u64, u64) {
        common::ping_summary(&self.0.wait_with_output().unwrap())
    }
}

fn upgrade_ok(d: &mut Weftd) {
    let before = d.answering_pid();
    let o = d.upgrade();
    assert_eq!(code(&o), 0, "weft upgrade: {}\n{}", stderr(&o), d.log());
    assert_ne!(d.answering_pid(), before, "the same weftd still answers");
}

/// What `port show` says of how the port's device was got.
fn attached(d: &Weftd, port: &str) -> String {
    let Response::Port { port, .. } = d.json(&["port", "show", port]) else {
        panic!("port show answered something else")
    };
    port.attached.unwrap_or_default()
}

/// The learned (dynamic) FDB entries of br0: (MAC, port, age in seconds).
fn learned(d: &Weftd) -> Vec<(String, String, u64)> {
    let Response::Fdb { entries } = d.json(&["fdb", "show", "br0"]) else {
        panic!("fdb show answered something else")
    };
    entries
        .into_iter()
        .filter(|e| !e.is_static)
        .map(|e| (e.mac, e.port, e.age_secs.unwrap_or(0)))
        .collect()
}

#[test]
fn tap_endpoints_keep_their_devices_addresses_and_traffic_through_upgrades_and_a_kill() {
    let test = "tap_endpoints_keep_their_devices_addresses_and_traffic_through_upgrades_and_a_kill";
    if !can_run(test) {
        return;
    }
    let _serial = lab::serial();
    let mut d = Weftd::start();
    let (na, nb) = (Netns::new("tka"), Netns::new("tkb"));
    tap_endpoint(&d, "ta", &na, Some("10.203.0.1/24"), None);
    tap_endpoint(&d, "tb", &nb, Some("10.203.0.2/24"), None);
    assert!(na.ping("10.203.0.2", 3, 56), "no ping before:\n{}", d.log());
    let devices = (ifindex(&na, "ta"), ifindex(&nb, "tb"));

    // Learned MACs travel (with their age; the namespaces' own chatter may refresh one).
    let before = learned(&d);
    assert!(before.len() >= 2, "{before:?}");
    upgrade_ok(&mut d);
    let after = learned(&d);
    for (mac, port, _) in &before {
        assert!(
            after.iter().any(|(m, p, _)| m == mac && p == port),
            "{mac} on {port} was not carried: {after:?}"
        );
    }

    // Pings every 2 ms and a TCP stream across two upgrades in a row.
    let pings = PingStream::start(&na, "10.203.0.2", 1500);
    // 16 MiB in 64 KiB pieces 8 ms apart: a stream of about 2 s, whatever the speed.
    let data = lab::test_data(16 << 20, 33);
    let (got, sum) = std::thread::scope(|s| {
        let transfer = s.spawn(|| {
            lab::tcp_transfer_paced(
                &na,
                &nb,
                "10.203.0.2",
                &data,
                (64 << 10, Duration::from_millis(8)),
                Duration::from_secs(120),
            )
        });
        std::thread::sleep(Duration::from_millis(300));
        upgrade_ok(&mut d);
        std::thread::sleep(Duration::from_millis(300));
        upgrade_ok(&mut d);
        assert!(
            !transfer.is_finished(),
            "the TCP stream ended before the second upgrade: it proves nothing"
        );
        transfer.join().unwrap()
    });
    assert_eq!(
        (got, sum),
        (data.len(), lab::fnv1a(&data)),
        "the TCP stream lost or changed bytes"
    );
    let (sent, received) = pings.finish();
    eprintln!("{test}: {received} of {sent} pings (2 ms apart) answered across two upgrades");
    assert!(
        sent - received <= 10,
        "{} of {sent} pings lost across two upgrades (more than 20 ms of traffic)\n{}",
        sent - received,
        d.log()
    );
    assert_eq!(
        (ifindex(&na, "ta"), ifindex(&nb, "tb")),
        devices,
        "a TAP was replaced"
    );
    assert!(has_address(&na, "ta", "10.203.0.1/24") && has_address(&nb, "tb", "10.203.0.2/24"));
    let how = attached(&d, "br0:ta");
    assert!(how.starts_with("taken over from weftd"), "{how}");

    // kill -9: the TAPs stay with their addresses, and the next weftd attaches to them.
    d.kill_and_restart();
    assert_eq!(
        (ifindex(&na, "ta"), ifindex(&nb, "tb")),
        devices,
        "a TAP was replaced"
    );
    assert!(has_address(&na, "ta", "10.203.0.1/24"));
    assert!(
        na.ping("10.203.0.2", 3, 56),
        "no ping after the restart:\n{}",
        d.log()
    );
    let how = attached(&d, "br0:ta");
    assert!(how.starts_with("re-attached to the TAP"), "{how}");

    // A port deleted goes with its TAP (weft made it).
    d.json(&["port", "del", "br0:tb"]);
    assert!(
        !lab::run(
            nb.cmd("ip").args(["link", "show", "tb"]),
            Duration::from_secs(5)
        )
        .unwrap()
        .status
        .success(),
        "tb outlived its port"
    );
}

#[test]
fn a_new_weftd_that_cannot_carry_the_state_leaves_the_running_one_serving() {
    let test = "a_new_weftd_that_cannot_carry_the_state_leaves_the_running_one_serving";
    if !can_run(test) {
        return;
    }
    let _serial = lab::serial();
    let config = |workers: u32| format!("[workers]\ncount = {workers}\n");
    let mut d = Weftd::start_with(Some(&config(2)));
    let (na, nb) = (Netns::new("tfa"), Netns::new("tfb"));
    tap_endpoint(&d, "ta", &na, Some("10.204.0.1/24"), None);
    tap_endpoint(&d, "tb", &nb, Some("10.204.0.2/24"), None);
    d.json(&["switch", "add", "wide", "--lanes", "2"]);
    assert!(na.ping("10.204.0.2", 2, 56));
    let serving = d.answering_pid();

    // The new weftd is given one worker: it cannot run a switch of two lanes.
    std::fs::write(d.path("weftd.toml"), config(1)).unwrap();
    let pings = PingStream::start(&na, "10.204.0.2", 500);
    let o = d.upgrade();
    assert_ne!(code(&o), 0, "the upgrade succeeded:\n{}", stderr(&o));
    assert!(
        stderr(&o).contains("lanes") && stderr(&o).contains("carries on"),
        "{}",
        stderr(&o)
    );
    assert_eq!(d.answering_pid(), serving, "the running weftd was replaced");
    let (sent, received) = pings.finish();
    assert!(
        sent - received <= 10,
        "{} of {sent} pings lost while the failed takeover held the workers",
        sent - received
    );
    assert!(na.ping("10.204.0.2", 3, 56), "no ping after:\n{}", d.log());
    assert!(d.log().contains("carries on"), "{}", d.log());

    // Given what it needs, the same upgrade goes through.
    std::fs::write(d.path("weftd.toml"), config(2)).unwrap();
    upgrade_ok(&mut d);
    assert!(
        na.ping("10.204.0.2", 3, 56),
        "no ping after the upgrade:\n{}",
        d.log()
    );
    let Response::Switches { switches } = d.json(&["switch", "list"]) else {
        panic!("switch list answered something else")
    };
    assert_eq!(switches.len(), 2, "{switches:?}");
}

#[test]
fn under_a_service_manager_the_old_weftd_names_the_new_one_its_main_process() {
    let test = "under_a_service_manager_the_old_weftd_names_the_new_one_its_main_process";
    if !can_run(test) {
        return;
    }
    let _serial = lab::serial();
    // A stand-in for systemd's notification socket (NOTIFY_SOCKET, sd_notify's datagrams).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify.sock");
    let notify = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let messages = || {
        let mut got = Vec::new();
        let mut buf = [0u8; 512];
        while let Ok(n) = notify.recv(&mut buf) {
            got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
            notify
                .set_read_timeout(Some(Duration::from_millis(300)))
                .unwrap();
        }
        notify
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        got
    };
    let mut d = Weftd::start_with_env(&[("NOTIFY_SOCKET", path.to_str().unwrap())]);
    assert!(messages().contains(&"READY=1".to_string()));
    upgrade_ok(&mut d);
    let new = d.answering_pid();
    let got = messages();
    assert!(
        got.contains(&format!("MAINPID={new}")),
        "the old weftd did not name pid {new} the main process: {got:?}"
    );
    let main_at = got.iter().position(|m| m == &format!("MAINPID={new}"));
    let ready_at = got.iter().rposition(|m| m == "READY=1");
    assert!(
        main_at < ready_at,
        "the new weftd said it was ready before it was the main process: {got:?}"
    );
}

#[test]
fn a_tcp_link_between_two_weftd_carries_on_through_an_upgrade_of_each_end() {
    let test = "a_tcp_link_between_two_weftd_carries_on_through_an_upgrade_of_each_end";
    if !can_run(test) {
        return;
    }
    let _serial = lab::serial();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut listening = Weftd::start();
    let mut connecting = Weftd::start();
    // An authenticated link: the key's state must travel too.
    let key = listening.path("link.key");
    std::fs::write(&key, [0x5au8; 32]).unwrap();
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let key = key.to_string_lossy().into_owned();
    let o = listening.weft(&[
        "port",
        "add",
        "br0:link",
        "tcp-link",
        "--listen",
        &addr,
        "--key-file",
        &key,
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = connecting.weft(&[
        "port",
        "add",
        "br0:link",
        "tcp-link",
        "--peer",
        &addr,
        "--key-file",
        &key,
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let (na, nb) = (Netns::new("tla"), Netns::new("tlb"));
    tap_endpoint(&listening, "ta", &na, Some("10.205.0.1/24"), None);
    tap_endpoint(&connecting, "tb", &nb, Some("10.205.0.2/24"), None);
    // The connecting end retries until the listener is there: wait for the link.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !na.ping("10.205.0.2", 1, 56) {
        assert!(
            std::time::Instant::now() < deadline,
            "no ping over the link:\n{}\n{}",
            listening.log(),
            connecting.log()
        );
    }
    // An end that loses its connection counts it (`tcp_disconnects`, among its drops).
    let disconnects = |d: &Weftd| drop_count(&port_counters(d, "br0:link").1, "tcp_disconnects");

    let pings = PingStream::start(&na, "10.205.0.2", 1500);
    std::thread::sleep(Duration::from_millis(500));
    upgrade_ok(&mut listening);
    assert_eq!(
        disconnects(&connecting),
        0,
        "the connecting end lost its connection when the listening end was upgraded"
    );
    std::thread::sleep(Duration::from_millis(500));
    upgrade_ok(&mut connecting);
    assert_eq!(
        disconnects(&listening),
        0,
        "the listening end lost its connection when the connecting end was upgraded"
    );
    let (sent, received) = pings.finish();
    eprintln!("{test}: {received} of {sent} pings (2 ms apart) across an upgrade of each end");
    assert!(
        sent - received <= 10,
        "{} of {sent} pings lost\n{}\n{}",
        sent - received,
        listening.log(),
        connecting.log()
    );
    assert!(attached(&listening, "br0:link").starts_with("taken over"));
}
