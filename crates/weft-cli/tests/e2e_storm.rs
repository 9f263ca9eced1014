//! End to end: storm control on a real weftd. DPDK testpmd on a vhost-user port sends
//! broadcast as fast as it can while two TAP endpoints in network namespaces ping each
//! other: the broadcast leaving the switch stays at the configured rate, and every ping
//! and answer arrives.
//!
//! Needs root, `/dev/net/tun`, dpdk-testpmd and hugepages; prints SKIP otherwise.

mod common;

use std::io::Write;
use std::process::Child;
use std::time::{Duration, Instant};

use weft_testlab::lab::{self, Netns};
use weft_testlab::testpmd;

use common::taps::{drop_count, port_counters, tap_endpoint};
use common::weftd::Weftd;
use common::{code, stderr};

/// The broadcast rate the generator's port may flood at: far below what even a generator
/// starved of CPU offers (so that the limit, not the generator, sets the rate).
const LIMIT_PPS: u64 = 5_000;

fn tell(testpmd: &mut Child, command: &str) {
    let stdin = testpmd.stdin.as_mut().expect("testpmd's stdin");
    stdin
        .write_all(command.as_bytes())
        .expect("write to testpmd");
    stdin.flush().expect("write to testpmd");
}

/// (tx packets, drops named `reason`) of `port`.
fn counters(d: &Weftd, port: &str, reason: &str) -> (u64, u64) {
    let (tx, drops) = port_counters(d, port);
    (tx, drop_count(&drops, reason))
}

#[test]
fn a_broadcast_storm_from_a_vhost_user_port_is_held_to_its_rate_and_a_pair_loses_nothing() {
    let test =
        "a_broadcast_storm_from_a_vhost_user_port_is_held_to_its_rate_and_a_pair_loses_nothing";
    if !lab::can_run(test) {
        return;
    }
    if let Some(why) = testpmd::missing() {
        println!("SKIP {test}: {why}");
        return;
    }
    let _serial = lab::serial();
    let d = Weftd::start();
    let limit = format!("{LIMIT_PPS}pps");
    let o = d.weft(&[
        "port",
        "add",
        "br0:gen",
        "vhost-user",
        "--storm-broadcast",
        &limit,
    ]);
    assert_eq!(code(&o), 0, "{}\n{}", stderr(&o), d.log());
    let (one, two, sink) = (Netns::new("st1"), Netns::new("st2"), Netns::new("sts"));
    let (p1, p2, ps) = (lab::unique("p"), lab::unique("p"), lab::unique("s"));
    tap_endpoint(&d, &p1, &one, Some("10.79.0.1/24"), None);
    tap_endpoint(&d, &p2, &two, Some("10.79.0.2/24"), None);
    tap_endpoint(&d, &ps, &sink, None, None);
    assert!(one.ping("10.79.0.2", 2, 56), "the pair talks\n{}", d.log());

    let prefix = format!("weftstorm{}", std::process::id());
    let socket = d.path("run/vhost/br0-gen.sock");
    let mut gen = testpmd::spawn_broadcast(&prefix, &socket);
    std::thread::sleep(Duration::from_secs(4));
    tell(&mut gen, "start\n");
    std::thread::sleep(Duration::from_secs(2));

    let sink_port = format!("br0:{ps}");
    let (sink_before, _) = counters(&d, &sink_port, "");
    let (_, dropped_before) = counters(&d, "br0:gen", "storm_broadcast");
    let started = Instant::now();
    // The pair's frames, meanwhile: 300 pings 10 ms apart, each answered.
    let ping = lab::run(
        one.cmd("ping")
            .args(["-c", "300", "-i", "0.01", "-W", "2", "-q", "10.79.0.2"]),
        Duration::from_secs(30),
    )
    .unwrap();
    let elapsed = started.elapsed().as_secs_f64();
    let (sink_after, _) = counters(&d, &sink_port, "");
    let (_, dropped_after) = counters(&d, "br0:gen", "storm_broadcast");
    tell(&mut gen, "stop\nquit\n");
    let _ = gen.wait();
    testpmd::remove_files(&prefix);

    let summary = String::from_utf8_lossy(&ping.stdout).into_owned();
    assert!(
        summary.contains("300 packets transmitted, 300 received"),
        "the pair lost frames under the storm: {summary}"
    );
    let rate = (sink_after - sink_before) as f64 / elapsed;
    let limit = LIMIT_PPS as f64;
    println!(
        "broadcast out: {rate:.0} pps for a limit of {limit} pps; dropped at the port: {} in {elapsed:.1} s",
        dropped_after - dropped_before
    );
    assert!(
        dropped_after > dropped_before,
        "the generator never offered more than the limit (nothing was dropped): it had no CPU?"
    );
    assert!(
        (0.9 * limit..=1.1 * limit).contains(&rate),
        "broadcast left the switch at {rate:.0} pps for a limit of {limit} pps"
    );
}
