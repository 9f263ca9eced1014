//! The directory end to end: three weftd in network-namespace hosts and one real etcd,
//! VXLAN ports with `--directory` and no `--remote` anywhere. Every pair of endpoints pings
//! on two VNIs that never leak into each other; forwarding goes on while etcd is stopped,
//! and a MAC learned meanwhile is published once it is back; a MAC that moves from one host
//! to another is forwarded to its new host everywhere within a second; a weftd killed hard
//! leaves the others' flood lists when its lease expires; bad entries written straight into
//! etcd are counted and ignored.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::hosts::{Endpoint, Host, Underlay};
use weft_control::Response;
use weft_testlab::etcd::{self, Etcd};
use weft_testlab::lab;

/// The underlay subnet; etcd listens on the bridge's address in it.
const NET: &str = "10.97.0";
const ETCD_ADDR: &str = "10.97.0.254";
/// Seconds a host's entries outlive it.
const LEASE_TTL: u64 = 3;

/// Pings with a few tries: the first ARP broadcast may race the directory's first read.
trait Pings {
    fn pings(&self, ip: &str) -> bool;
}

impl Pings for Endpoint {
    fn pings(&self, ip: &str) -> bool {
        (0..5).any(|_| {
            let ok = self.ns.ping(ip, 1, 56);
            if !ok {
                std::thread::sleep(Duration::from_millis(300));
            }
            ok
        })
    }
}

/// The lab: the underlay with etcd on its bridge, and a weftd per host with a
/// `[directory]`.
struct Lab {
    underlay: Underlay,
    etcd: Etcd,
    hosts: Vec<Host>,
}

impl Lab {
    fn new(count: usize) -> Lab {
        let underlay = Underlay::new(NET, count, "d");
        underlay
            .bridge
            .ip(&["addr", "add", &format!("{ETCD_ADDR}/24"), "dev", "ub"]);
        let client: SocketAddr = format!("{ETCD_ADDR}:2379").parse().unwrap();
        let peer: SocketAddr = format!("{ETCD_ADDR}:2380").parse().unwrap();
        let etcd = Etcd::start_at(client, peer, Some(&underlay.bridge.path()));
        let binary = common::weftd_binary();
        let hosts = (0..count)
            .map(|i| {
                let dir = tempfile::tempdir().unwrap();
                let config = dir.path().join("weftd.toml");
                std::fs::write(
                    &config,
                    format!(
                        "[directory]\nendpoints = [\"{}\"]\nhost = \"h{i}\"\n\
                         lease_ttl_secs = {LEASE_TTL}\npublish_interval_ms = 100\n",
                        etcd.url()
                    ),
                )
                .unwrap();
                let host = Host::start(
                    &binary,
                    &underlay.hosts[i],
                    &["--config", config.to_str().unwrap()],
                );
                std::mem::forget(dir);
                host
            })
            .collect();
        Lab {
            underlay,
            etcd,
            hosts,
        }
    }

    /// A VNI on every host: switch `switch`, VXLAN port `vx` with `--directory`, and a TAP
    /// endpoint `10.SUBNET.0.(i+1)`.
    fn vni(&self, switch: &str, vni: u32, subnet: u8) -> Vec<Endpoint> {
        (0..self.hosts.len())
            .map(|i| {
                self.join(i, switch, vni);
                self.endpoint(
                    i,
                    switch,
                    &format!("ep{vni}"),
                    &format!("10.{subnet}.0.{}", i + 1),
                )
            })
            .collect()
    }

    /// Host `i` carries `vni` on switch `switch`.
    fn join(&self, i: usize, switch: &str, vni: u32) {
        let host = &self.hosts[i];
        if switch != "br0" {
            host.json(&["switch", "add", switch]);
        }
        let local = &self.underlay.addresses[i];
        host.json(&[
            "port",
            "add",
            &format!("{switch}:vx"),
            "vxlan",
            "--local",
            local,
            "--vni",
            &vni.to_string(),
            // One UDP socket per port here, so one UDP port per VNI on an address.
            "--udp-port",
            &(4689 + vni).to_string(),
            "--directory",
        ]);
    }

    /// A TAP endpoint `switch:ifname` on host `i` with address `ip`.
    fn endpoint(&self, i: usize, switch: &str, ifname: &str, ip: &str) -> Endpoint {
        self.hosts[i].endpoint(switch, ifname, ip, "de")
    }

    fn logs(&self) -> String {
        let mut s = String::new();
        for (i, h) in self.hosts.iter().enumerate() {
            s.push_str(&format!("--- weftd h{i}\n{}\n", h.log()));
        }
        s.push_str(&format!(
            "--- etcd keys\n{}\n",
            self.etcd.keys("/weft/").join("\n")
        ));
        s
    }
}

fn status(host: &Host) -> weft_control::response::DirectoryStatus {
    match host.json(&["directory", "status"]) {
        Response::Directory { status } => status,
        other => panic!("directory status answered {other:?}"),
    }
}

/// `switch:port`'s remote FDB: (MAC, remote, source).
fn remote_macs(host: &Host, port: &str) -> Vec<(String, String, String)> {
    match host.json(&["remote-mac", "show", port]) {
        Response::RemoteMacs { entries } => entries
            .into_iter()
            .map(|e| {
                let source = e.source_name().to_string();
                (e.mac.to_lowercase(), e.remote, source)
            })
            .collect(),
        other => panic!("remote-mac show answered {other:?}"),
    }
}

fn remote_of(host: &Host, port: &str, mac: &str) -> Option<String> {
    remote_macs(host, port)
        .into_iter()
        .find(|(m, _, _)| m == mac)
        .map(|(_, r, _)| r)
}

fn within(limit: Duration, mut f: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    loop {
        if f() {
            return Some(start.elapsed());
        }
        if start.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn can_run(test: &str) -> bool {
    if !lab::can_run(test) {
        return false;
    }
    if let Some(why) = etcd::missing() {
        println!("SKIP {test}: {why}");
        return false;
    }
    true
}

#[test]
fn three_hosts_find_each_other_in_etcd_and_ping_on_two_vnis_that_never_leak() {
    if !can_run("three_hosts_find_each_other_in_etcd_and_ping_on_two_vnis_that_never_leak") {
        return;
    }
    let _serial = lab::serial();
    let lab = Lab::new(3);
    let vni100 = lab.vni("br0", 100, 100);
    let vni200 = lab.vni("br1", 200, 200);
    for (vni, endpoints) in [(100, &vni100), (200, &vni200)] {
        for a in endpoints.iter() {
            for b in endpoints.iter().filter(|b| b.ip != a.ip) {
                assert!(
                    a.pings(&b.ip),
                    "VNI {vni}: {} cannot ping {}\n{}",
                    a.ip,
                    b.ip,
                    lab.logs()
                );
            }
        }
    }
    // Each VXLAN port knows the other hosts' endpoints of its VNI, from the directory,
    // and no endpoint of the other VNI.
    for (i, host) in lab.hosts.iter().enumerate() {
        let st = status(host);
        assert!(st.connected, "h{i}: {st:?}");
        assert_eq!(st.vnis, vec![100, 200], "h{i}");
        for (port, own, other) in [("br0:vx", &vni100, &vni200), ("br1:vx", &vni200, &vni100)] {
            let entries = remote_macs(host, port);
            for (j, ep) in own.iter().enumerate().filter(|(j, _)| *j != i) {
                let want = (
                    ep.mac(),
                    lab.underlay.addresses[j].clone(),
                    "directory".to_string(),
                );
                assert!(
                    entries.contains(&want),
                    "h{i} {port}: {entries:?} lacks {want:?}"
                );
            }
            for ep in other.iter() {
                assert!(
                    entries.iter().all(|(m, _, _)| *m != ep.mac()),
                    "h{i} {port} has an endpoint of the other VNI: {entries:?}"
                );
            }
        }
    }
    // VNI 100's broadcasts (ARP for an address nobody has) reach no endpoint of VNI 200,
    // and do reach VNI 100's.
    let watch = |e: &Endpoint| {
        e.ns.cmd("tshark")
            .args([
                "-Q",
                "-l",
                "-i",
                &e.ifname,
                "-a",
                "duration:6",
                "-T",
                "fields",
            ])
            .args(["-e", "frame.number", "-f", "arp host 10.100.0.99"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let watchers: Vec<_> = vni200.iter().chain(&vni100[1..]).map(watch).collect();
    std::thread::sleep(Duration::from_secs(2));
    let _ = vni100[0].ns.ping("10.100.0.99", 3, 56);
    let seen: Vec<usize> = watchers
        .into_iter()
        .map(|w| {
            let out = w.wait_with_output().unwrap();
            String::from_utf8_lossy(&out.stdout).lines().count()
        })
        .collect();
    println!("ARP broadcasts of VNI 100 seen by VNI 200's endpoints, then VNI 100's: {seen:?}");
    assert_eq!(
        &seen[..3],
        &[0, 0, 0],
        "VNI 100's broadcasts reached VNI 200"
    );
    assert!(
        seen[3..].iter().all(|n| *n > 0),
        "VNI 100's broadcasts did not flood"
    );
    let keys = lab.etcd.keys("/weft/");
    assert!(
        keys.iter().any(|k| k == "/weft/vni/100/vtep/h0"),
        "{keys:?}"
    );
    drop(lab.hosts);
}

#[test]
fn with_etcd_stopped_pings_go_on_for_a_minute_and_a_mac_learned_meanwhile_is_published_after() {
    if !can_run(
        "with_etcd_stopped_pings_go_on_for_a_minute_and_a_mac_learned_meanwhile_is_published_after",
    ) {
        return;
    }
    let _serial = lab::serial();
    let mut lab = Lab::new(2);
    let eps = lab.vni("br0", 100, 100);
    assert!(eps[0].pings(&eps[1].ip), "{}", lab.logs());
    lab.etcd.stop();
    let down = within(Duration::from_secs(15), || !status(&lab.hosts[0]).connected);
    assert!(down.is_some(), "h0 still says connected\n{}", lab.logs());
    // A minute of pings, one every 200 ms, while etcd is away: none lost.
    let out = eps[0]
        .ns
        .cmd("ping")
        .args(["-q", "-c", "300", "-i", "0.2", "-W", "1", &eps[1].ip])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    println!(
        "pings while etcd was stopped: {}",
        text.lines().rev().nth(1).unwrap_or("")
    );
    assert!(
        text.contains("300 received"),
        "pings lost while etcd was away:\n{text}\n{}",
        lab.logs()
    );
    // A new endpoint on h0, learned while etcd is away.
    let late = lab.endpoint(0, "br0", "late", "10.100.0.50");
    assert!(late.pings(&eps[1].ip), "{}", lab.logs());
    let st = status(&lab.hosts[0]);
    assert!(!st.connected && st.last_error.is_some(), "{st:?}");
    lab.etcd.resume();
    let published = within(Duration::from_secs(20), || {
        remote_of(&lab.hosts[1], "br0:vx", &late.mac()).as_deref()
            == Some(lab.underlay.addresses[0].as_str())
    });
    assert!(
        published.is_some(),
        "h1 never heard of the MAC h0 learned while etcd was away: {:?}\n{}",
        remote_macs(&lab.hosts[1], "br0:vx"),
        lab.logs()
    );
    println!("published {published:?} after etcd came back");
    assert!(status(&lab.hosts[0]).connected);
}

#[test]
fn a_mac_that_moves_to_another_host_is_forwarded_there_by_every_host_within_a_second() {
    if !can_run("a_mac_that_moves_to_another_host_is_forwarded_there_by_every_host_within_a_second")
    {
        return;
    }
    let _serial = lab::serial();
    let lab = Lab::new(3);
    let eps = lab.vni("br0", 100, 100);
    let moving = lab.endpoint(0, "br0", "mv", "10.100.0.77");
    let mac = moving.mac();
    assert!(moving.pings(&eps[2].ip), "{}", lab.logs());
    let (a, b) = (&lab.underlay.addresses[0], &lab.underlay.addresses[1]);
    let known = within(Duration::from_secs(5), || {
        remote_of(&lab.hosts[2], "br0:vx", &mac).as_ref() == Some(a)
    });
    assert!(known.is_some(), "{}", lab.logs());
    // The station leaves host 0 and comes up on host 1 with the same MAC and address.
    lab.hosts[0].json(&["port", "del", "br0:mv"]);
    drop(moving);
    let moved = lab.endpoint(1, "br0", "mv", "10.100.0.77");
    moved.ns.ip(&["link", "set", "mv", "down"]);
    moved.ns.ip(&["link", "set", "mv", "address", &mac]);
    moved.ns.ip(&["link", "set", "mv", "up"]);
    let started = Instant::now();
    // It speaks (to host 2's endpoint): host 1 learns it, the directory carries the move.
    let speaker = std::thread::spawn({
        let path = moved.ns.path();
        let ip = eps[2].ip.clone();
        move || {
            let _ = std::process::Command::new("nsenter")
                .arg(format!("--net={}", path.display()))
                .args(["ping", "-c", "20", "-i", "0.1", "-W", "1", &ip])
                .output();
        }
    });
    let at_c = within(Duration::from_secs(5), || {
        remote_of(&lab.hosts[2], "br0:vx", &mac).as_ref() == Some(b)
    });
    let at_a = within(Duration::from_secs(5), || {
        remote_of(&lab.hosts[0], "br0:vx", &mac).as_ref() == Some(b)
    });
    let took = started.elapsed();
    speaker.join().unwrap();
    println!("the move reached host 2 in {at_c:?} and host 0 {at_a:?} later ({took:?} in all)");
    let at_c = at_c.unwrap_or_else(|| panic!("host 2 never followed the move\n{}", lab.logs()));
    assert!(
        at_a.is_some(),
        "host 0 never followed the move\n{}",
        lab.logs()
    );
    assert!(
        took <= Duration::from_secs(1),
        "the move took {took:?} to reach every host (host 2: {at_c:?})\n{}",
        lab.logs()
    );
    assert!(eps[2].pings("10.100.0.77"));
    assert!(eps[0].pings("10.100.0.77"));
}

#[test]
fn a_weftd_killed_hard_leaves_the_other_hosts_flood_lists_when_its_lease_expires() {
    if !can_run("a_weftd_killed_hard_leaves_the_other_hosts_flood_lists_when_its_lease_expires") {
        return;
    }
    let _serial = lab::serial();
    let mut lab = Lab::new(3);
    let eps = lab.vni("br0", 100, 100);
    assert!(eps[0].pings(&eps[2].ip), "{}", lab.logs());
    // Whether VXLAN datagrams from h0 arrive at host i while h0's endpoint ARPs for an
    // address nobody has (broadcasts, replicated to every remote of the VNI).
    let floods_reach = |lab: &Lab, i: usize| {
        let filter = format!(
            "udp dst port 4789 and src host {}",
            lab.underlay.addresses[0]
        );
        let watcher = lab.underlay.hosts[i]
            .cmd("tshark")
            .args(["-Q", "-l", "-i", "u0", "-a", "duration:5", "-T", "fields"])
            .args(["-e", "frame.number", "-f", &filter])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_secs(2));
        let _ = eps[0].ns.ping("10.100.0.99", 2, 56);
        let out = watcher.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stdout).lines().count() > 0
    };
    assert!(
        floods_reach(&lab, 2),
        "h0's floods do not reach h2 to begin with"
    );
    let killed = lab.hosts.remove(2);
    killed.kill_hard();
    let gone = within(Duration::from_secs(LEASE_TTL + 10), || {
        status(&lab.hosts[0]).vteps == 1 && status(&lab.hosts[1]).vteps == 1
    });
    println!("h2 left the others' tables {gone:?} after it was killed (lease {LEASE_TTL} s)");
    assert!(gone.is_some(), "h2 is still known\n{}", lab.logs());
    assert!(!floods_reach(&lab, 2), "h0 still floods to the dead h2");
    assert!(floods_reach(&lab, 1), "h0 no longer floods to h1");
    assert!(eps[0].pings(&eps[1].ip));
}

#[test]
fn malformed_entries_written_into_etcd_are_counted_and_everything_else_keeps_working() {
    if !can_run("malformed_entries_written_into_etcd_are_counted_and_everything_else_keeps_working")
    {
        return;
    }
    let _serial = lab::serial();
    let lab = Lab::new(2);
    let eps = lab.vni("br0", 100, 100);
    assert!(eps[0].pings(&eps[1].ip), "{}", lab.logs());
    let bad = [
        (
            "/weft/vni/100/mac/not-a-mac/evil",
            r#"{"vtep":"10.97.0.66","seq":9}"#,
        ),
        ("/weft/vni/100/mac/52:54:00:00:00:66/evil", "{garbage"),
        (
            "/weft/vni/100/mac/ff:ff:ff:ff:ff:ff/evil",
            r#"{"vtep":"10.97.0.66","seq":9}"#,
        ),
        (
            "/weft/vni/99999999/vtep/evil",
            r#"{"addr":"10.97.0.66","port":4789}"#,
        ),
        (
            "/weft/vni/100/vtep/evil!",
            r#"{"addr":"10.97.0.66","port":4789}"#,
        ),
    ];
    for (k, v) in bad {
        lab.etcd.put(k, v);
    }
    lab.etcd
        .put("/weft/vni/100/vtep/evil2", &"x".repeat(10_000));
    let counted = within(Duration::from_secs(5), || {
        status(&lab.hosts[0]).refused.values().sum::<u64>() >= 5
    });
    let st = status(&lab.hosts[0]);
    println!("refused: {:?}", st.refused);
    assert!(counted.is_some(), "{st:?}");
    assert_eq!(st.refused.get("malformed_key"), Some(&2), "{st:?}");
    assert_eq!(st.vteps, 1, "{st:?}");
    assert!(st.connected);
    assert!(eps[0].pings(&eps[1].ip), "{}", lab.logs());
    let entries = remote_macs(&lab.hosts[0], "br0:vx");
    assert!(
        entries.iter().all(|(m, _, _)| m != "52:54:00:00:00:66"),
        "{entries:?}"
    );
}
