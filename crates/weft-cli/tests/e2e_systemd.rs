//! End to end under a real systemd (a user manager in a private mount namespace,
//! `common/systemd.rs`): weftd as a `Type=notify` service with a file descriptor store.
//! Killed with SIGKILL, it is restarted by systemd and re-attaches to the devices the store
//! kept — the same TAPs (index, address), the same vhost-user listening socket, the same
//! VXLAN sockets — while a ping runs; `systemctl reload` (weft upgrade) hands over with
//! systemd following the new main process, and the store holds one record per port
//! through all of it; `port del` takes a port's record out; `systemctl stop` lets the
//! devices go.
//!
//! Needs root, `/dev/net/tun`, `unshare`/`nsenter` and systemd's binary; prints SKIP
//! otherwise.

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use weft_control::Response;
use weft_testlab::lab::{self, Netns};

use common::systemd::{self, UserManager};
use common::taps::ifindex;
use common::{stderr, stdout, weft_cmd, weftd_binary};

const UNIT: &str = "weftd-store.service";

fn can_run(test: &str) -> bool {
    if !(lab::can_run(test) && lab::installed("ping") && lab::installed("nsenter")) {
        return false;
    }
    if systemd::binary().is_none() {
        eprintln!("SKIP {test}: no systemd binary");
        return false;
    }
    true
}

fn weft(run: &Path, args: &[&str]) -> std::process::Output {
    weft_cmd()
        .arg("--socket")
        .arg(run.join("weftd.sock"))
        .args(args)
        .output()
        .unwrap()
}

fn weft_ok(run: &Path, args: &[&str], log: &Path) -> String {
    let o = weft(run, args);
    assert!(
        o.status.success(),
        "weft {args:?}: {}\n{}",
        stderr(&o),
        std::fs::read_to_string(log).unwrap_or_default()
    );
    stdout(&o)
}

fn attached(run: &Path, port: &str, log: &Path) -> String {
    let text = weft_ok(run, &["--json", "port", "show", port], log);
    let Response::Port { port, .. } = serde_json::from_str(&text).unwrap() else {
        panic!("port show answered something else")
    };
    port.attached.unwrap_or_default()
}

/// Waits until weftd answers on `run` with a pid other than `not`.
fn wait_answering(run: &Path, not: u32, log: &Path) -> u32 {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let o = weft(run, &["--json", "hello"]);
        if o.status.success() {
            if let Ok(Response::Hello { pid: Some(pid), .. }) = serde_json::from_slice(&o.stdout) {
                if pid != not {
                    return pid;
                }
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no new weftd answers:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn under_systemd_a_killed_weftd_comes_back_on_the_devices_its_store_kept() {
    let test = "under_systemd_a_killed_weftd_comes_back_on_the_devices_its_store_kept";
    if !can_run(test) {
        return;
    }
    let _serial = lab::serial();
    // The namespaces first: the manager's mount namespace is a copy taken when it starts.
    let (na, nb) = (Netns::new("sda"), Netns::new("sdb"));
    let manager = UserManager::start();
    let run = manager.dir().join("run");
    let log = manager.dir().join("weftd.log");
    std::fs::create_dir(&run).unwrap();
    let weftd = weftd_binary();
    let weft_bin = env!("CARGO_BIN_EXE_weft");
    manager.install_unit(
        UNIT,
        &format!(
            "[Service]\n\
             Type=notify\n\
             NotifyAccess=main\n\
             ExecStart={weftd} --foreground --runtime-dir {run} --state-file {run}/state.json --metrics-listen off\n\
             ExecReload={weft_bin} --socket {run}/weftd.sock upgrade --weftd {weftd}\n\
             FileDescriptorStoreMax=512\n\
             Environment=FDSTORE=512\n\
             Restart=always\n\
             RestartSec=100ms\n\
             StandardError=append:{log}\n",
            weftd = weftd.display(),
            run = run.display(),
            log = log.display(),
        ),
    );
    manager.systemctl_ok(&["start", UNIT]);
    let first = manager.wait_main_pid(UNIT, None);
    let stored = || -> u64 {
        manager
            .property(UNIT, "NFileDescriptorStore")
            .parse()
            .unwrap()
    };
    assert_eq!(stored(), 0, "nothing stored before a port");

    for (port, ns, addr) in [("ta", &na, "10.204.0.1/24"), ("tb", &nb, "10.204.0.2/24")] {
        weft_ok(
            &run,
            &[
                "port",
                "add",
                &format!("br0:{port}"),
                "tap",
                "--netns",
                &ns.name,
            ],
            &log,
        );
        ns.ip(&["addr", "add", addr, "dev", port]);
        ns.ip(&["link", "set", port, "up"]);
    }
    weft_ok(&run, &["port", "add", "br0:vm", "vhost-user"], &log);
    weft_ok(
        &run,
        &[
            "port",
            "add",
            "br0:vx",
            "vxlan",
            "--local",
            "127.0.0.1",
            "--vni",
            "42",
            "--udp-port",
            "47990",
            "--remote",
            "127.0.0.2",
        ],
        &log,
    );
    assert!(na.ping("10.204.0.2", 3, 56), "no ping:\n{}", manager.log());
    // Two TAPs and a listener: a description and one descriptor each; the VXLAN port's
    // sockets beside its description.
    let with_all = stored();
    assert!(with_all >= 2 * 3 + 2, "{with_all} descriptors stored");
    let devices = (ifindex(&na, "ta"), ifindex(&nb, "tb"));
    let socket = run.join("vhost/br0-vm.sock");
    let socket_ino = std::fs::metadata(&socket).unwrap().ino();

    // SIGKILL under a ping every 2 ms: systemd restarts weftd on what it kept.
    let ping = na
        .cmd("ping")
        .args(["-q", "-i", "0.002", "-W", "1", "-c", "1500", "10.204.0.2"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(600));
    lab::run_ok(
        std::process::Command::new("kill").args(["-KILL", &first.to_string()]),
        Duration::from_secs(5),
    );
    let second = manager.wait_main_pid(UNIT, Some(first));
    wait_answering(&run, first, &log);
    let out = ping.wait_with_output().unwrap();
    let (sent, received) = common::ping_summary(&out);
    let lost = sent - received;
    // Pings that reach the TAP while no weftd runs wait in its queue (systemd holds it
    // open): late, not lost; the longest round trip is the gap.
    let rtt = stdout(&out)
        .lines()
        .find(|l| l.starts_with("rtt"))
        .unwrap_or_default()
        .to_string();
    eprintln!("kill -9 under systemd: {lost} of {sent} pings lost (2 ms apart); {rtt}");
    assert!(
        lost <= 500,
        "{lost} of {sent} pings lost: more than a second"
    );
    for port in ["br0:ta", "br0:tb", "br0:vm", "br0:vx"] {
        let how = attached(&run, port, &log);
        assert!(how.contains("kept by systemd"), "{port}: {how:?}");
    }
    assert_eq!((ifindex(&na, "ta"), ifindex(&nb, "tb")), devices);
    assert!(na.ip(&["-o", "addr"]).contains("10.204.0.1"));
    assert_eq!(
        std::fs::metadata(&socket).unwrap().ino(),
        socket_ino,
        "the vhost-user socket was bound again instead of kept"
    );
    assert_eq!(stored(), with_all, "records replaced, not added to");

    // port del takes the port's record out.
    weft_ok(&run, &["port", "del", "br0:tb"], &log);
    assert_eq!(stored(), with_all - 2);

    // systemctl reload = weft upgrade: systemd follows the new main process; the new weftd
    // replaces the old one's records.
    let before_reload = stored();
    manager.systemctl_ok(&["reload", UNIT]);
    let third = manager.wait_main_pid(UNIT, Some(second));
    assert_eq!(wait_answering(&run, second, &log), third);
    assert!(attached(&run, "br0:ta", &log).contains("taken over"));
    assert_eq!(
        stored(),
        before_reload,
        "one record per port after the upgrade"
    );
    assert_eq!(manager.property(UNIT, "ActiveState"), "active");

    // A clean stop: the store goes with the service, and the TAP with it.
    manager.systemctl_ok(&["stop", UNIT]);
    assert_eq!(
        manager.property(UNIT, "Result"),
        "success",
        "weftd did not stop cleanly (SIGKILL?):\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert!(
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("stopped"),
        "weftd did not finish its clean stop"
    );
    // The kernel takes the device down a moment after its last descriptor closes.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let shown = lab::run(
            na.cmd("ip").args(["link", "show", "ta"]),
            Duration::from_secs(5),
        )
        .unwrap();
        if !shown.status.success() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the TAP outlived a clean stop: {}\n{}\n{}",
            stdout(&shown),
            std::fs::read_to_string(&log).unwrap_or_default(),
            manager.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
