//! End to end: a controller on upcalls. A real weftd with three TAP ports whose far ends
//! are in network namespaces, and the example ARP responder (`examples/arp-responder`)
//! answering for their addresses through `upcall_read` and `packet_out`: pings resolve
//! through it while tshark on the third namespace's interface sees none of their ARP; a
//! request for an address it does not know is passed back to the switch (`normal`) and
//! floods there as it does without the responder.
//!
//! Needs root and `/dev/net/tun`; prints SKIP otherwise.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use weft_control::Response;
use weft_testlab::lab::{self, Netns};

use common::taps::tap_endpoint;
use common::weftd::Weftd;

/// The example responder, built on first use like weftd.
fn responder_binary() -> PathBuf {
    let weft = PathBuf::from(env!("CARGO_BIN_EXE_weft"));
    let dir = weft
        .parent()
        .expect("weft lives in a directory")
        .to_path_buf();
    let mut build = Command::new(env!("CARGO"));
    build.args(["build", "--quiet", "-p", "weft-arp-responder"]);
    if dir.ends_with("release") {
        build.arg("--release");
    }
    assert!(
        build.status().unwrap().success(),
        "building weft-arp-responder failed"
    );
    dir.join("weft-arp-responder")
}

fn mac_of(ns: &Netns, dev: &str) -> String {
    lab::run_ok(
        ns.cmd("cat").arg(format!("/sys/class/net/{dev}/address")),
        Duration::from_secs(5),
    )
    .trim()
    .to_string()
}

/// The ARP frames (sender IP, target IP) tshark sees arrive on `dev` in `ns` while
/// `during` runs, and for 2 s after.
fn arp_seen(ns: &Netns, dev: &str, during: impl FnOnce()) -> Vec<String> {
    let mut tshark = ns
        .cmd("tshark")
        .args(["-Q", "-l", "-i", dev, "-f", "arp", "-T", "fields"])
        .args(["-e", "arp.src.proto_ipv4", "-e", "arp.dst.proto_ipv4"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // tshark needs a moment before it captures.
    std::thread::sleep(Duration::from_secs(3));
    during();
    std::thread::sleep(Duration::from_secs(2));
    let _ = Command::new("kill")
        .args(["-INT", &tshark.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while tshark.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "tshark did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut out = String::new();
    use std::io::Read;
    tshark
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    out.lines().map(str::to_owned).collect()
}

/// The responder, stopped with SIGKILL if the test fails before it stops it.
struct Responder(Child);

impl Responder {
    /// SIGTERM: it removes its rule and exits.
    fn stop(mut self) -> String {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let out = std::mem::replace(&mut self.0, Command::new("true").spawn().unwrap())
            .wait_with_output()
            .unwrap();
        assert!(out.status.success(), "the responder failed");
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn rule_ids(d: &Weftd) -> Vec<u64> {
    let Response::Rules { rules } = d.json(&["rule", "list", "br0"]) else {
        panic!("rule list answered something else")
    };
    rules.iter().map(|r| r.id).collect()
}

#[test]
fn the_arp_responder_answers_known_addresses_without_a_flood_and_passes_the_rest_on() {
    if !lab::can_run(
        "the_arp_responder_answers_known_addresses_without_a_flood_and_passes_the_rest_on",
    ) {
        return;
    }
    let _serial = lab::serial();
    let responder = responder_binary();
    let d = Weftd::start();
    let ns: Vec<Netns> = (1..=3).map(|i| Netns::new(&format!("up{i}"))).collect();
    let devs: Vec<String> = (1..=3).map(|i| lab::unique(&format!("u{i}"))).collect();
    for (i, (n, dev)) in ns.iter().zip(&devs).enumerate() {
        // No IPv6: its router solicitations and neighbour discovery would flood too.
        lab::run_ok(
            n.cmd("sysctl")
                .args(["-qw", "net.ipv6.conf.all.disable_ipv6=1"]),
            Duration::from_secs(5),
        );
        lab::run_ok(
            n.cmd("sysctl")
                .args(["-qw", "net.ipv6.conf.default.disable_ipv6=1"]),
            Duration::from_secs(5),
        );
        tap_endpoint(&d, dev, n, Some(&format!("10.78.0.{}/24", i + 1)), None);
    }
    let macs: Vec<String> = ns.iter().zip(&devs).map(|(n, d)| mac_of(n, d)).collect();

    // Without a controller, ARP for a missing address floods to the third namespace: the
    // capture there sees it (so it would see a flood later).
    let seen = arp_seen(&ns[2], &devs[2], || {
        assert!(!ns[0].ping("10.78.0.99", 1, 56));
    });
    assert!(
        seen.iter().any(|l| l.contains("10.78.0.99")),
        "the capture saw no flood without the responder: {seen:?}"
    );

    // The rule an earlier responder left (killed, or cut off by an upgrade): the new one
    // replaces it rather than adding a second.
    let Response::RuleAdded { id: stale } = d.json(&[
        "rule",
        "add",
        "br0",
        "priority=60000,cookie=0xa4b,arp actions=controller",
    ]) else {
        panic!("rule add answered something else")
    };
    let mut cmd = Command::new(responder);
    cmd.arg("br0").arg("--socket").arg(d.path("run/weftd.sock"));
    for (i, mac) in macs.iter().enumerate() {
        cmd.args(["--entry", &format!("10.78.0.{}={mac}", i + 1)]);
    }
    let running = Responder(
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let ids = rule_ids(&d);
        if ids.len() == 1 && ids[0] != stale {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the responder did not replace the stale rule {stale}: {ids:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // ns1 and ns2 resolve each other through the responder and none of their ARP reaches
    // ns3; a request for an address the table lacks goes back to the switch and floods, as
    // it would without the responder (answered by nobody: no one has it).
    let seen = arp_seen(&ns[2], &devs[2], || {
        assert!(ns[0].ping("10.78.0.2", 3, 56), "{}", d.log());
        assert!(ns[1].ping("10.78.0.1", 2, 56));
        assert!(!ns[0].ping("10.78.0.98", 1, 56));
    });
    let (unknown, answered): (Vec<&String>, Vec<&String>) =
        seen.iter().partition(|l| l.ends_with("10.78.0.98"));
    assert!(
        answered.is_empty(),
        "answered ARP reached the third port: {seen:?}"
    );
    assert!(
        !unknown.is_empty(),
        "the unknown request did not flood: {seen:?}"
    );
    let neigh = ns[0].ip(&["neigh", "show", "10.78.0.2"]);
    assert!(
        neigh.to_lowercase().contains(&macs[1].to_lowercase()),
        "ns1 learned {neigh:?}, not ns2's {}",
        macs[1]
    );
    let Response::Stats { switches, .. } = d.json(&["stats", "br0"]) else {
        panic!("stats answered something else")
    };
    assert!(
        switches[0].upcalls >= 2,
        "the ARP requests went up: {switches:?}"
    );

    // Stopped, the responder takes its rule away: ARP floods again.
    let said = running.stop();
    assert!(said.contains("answered"), "{said}");
    assert_eq!(
        rule_ids(&d),
        Vec::<u64>::new(),
        "the responder left its rule"
    );
    let seen = arp_seen(&ns[2], &devs[2], || {
        assert!(!ns[0].ping("10.78.0.97", 1, 56));
    });
    assert!(seen.iter().any(|l| l.contains("10.78.0.97")), "{seen:?}");
}
