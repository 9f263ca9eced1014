//! Starting, stopping, restarting: the configuration survives SIGTERM and SIGKILL, state
//! files that cannot be used are refused as documented, hand-edited ones are loaded.

mod common;

use std::os::unix::fs::{FileTypeExt, PermissionsExt};

use common::Daemon;
use serde_json::json;

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// A configuration with a bit of everything the protocol can set without devices.
fn configure(d: &Daemon) -> u64 {
    d.ok(
        json!({"op": "switch_add", "name": "br1", "settings": {"batch_size": 32, "max_rules": 10}}),
    );
    d.ok(json!({"op": "switch_add", "name": "lab"}));
    d.ok(json!({"op": "switch_del", "name": "lab"}));
    d.ok(json!({"op": "rule_add", "switch": "br1", "rule": {"priority": 9, "match": {"ethertype": 2048, "ip_dst": "10.0.0.0/8"}, "actions": ["drop"]}}));
    let id = d.ok(json!({"op": "rule_add", "switch": "br0", "rule": {"match": {"dst_mac": "01:00:00:00:00:00/01:00:00:00:00:00"}, "actions": ["flood"], "cookie": 7}}))["id"]
        .as_u64()
        .unwrap();
    d.ok(
        json!({"op": "rule_add", "switch": "br0", "rule": {"priority": 2, "actions": ["normal"]}}),
    );
    id
}

#[test]
fn the_embedded_default_runs_br0_with_private_files() {
    let d = Daemon::start();
    let switches = d.ok(json!({"op": "switch_list"}))["switches"].clone();
    assert_eq!(switches.as_array().unwrap().len(), 1);
    assert_eq!(switches[0]["name"], "br0");
    assert_eq!(mode(&d.run_dir()), 0o700);
    assert_eq!(mode(&d.socket()), 0o600);
    assert!(std::fs::metadata(d.socket())
        .unwrap()
        .file_type()
        .is_socket());
    assert_eq!(mode(&d.run_dir().join("vhost")), 0o700);
    assert_eq!(
        mode(&d.state_file()),
        0o600,
        "a first start writes the state"
    );
    let pid: u32 = std::fs::read_to_string(d.run_dir().join("weftd.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(pid, d.child.as_ref().unwrap().id());
}

#[test]
fn configuration_survives_sigterm_and_sigkill() {
    let mut d = Daemon::start();
    configure(&d);
    let before = d.config();
    assert_eq!(before["switches"].as_array().unwrap().len(), 2);
    d.stop();
    assert!(!d.socket().exists(), "a clean stop removes the socket");
    d.launch();
    assert_eq!(d.config(), before, "after SIGTERM");
    d.ok(json!({"op": "switch_add", "name": "br2"}));
    let before = d.config();
    d.kill();
    assert!(d.socket().exists(), "SIGKILL leaves a stale socket behind");
    d.launch();
    assert_eq!(d.config(), before, "after SIGKILL");
    let rules = d.ok(json!({"op": "rule_list", "switch": "br0"}))["rules"].clone();
    assert_eq!(
        rules[0]["rule"]["priority"], 2,
        "rules come back in lookup order"
    );
    assert_eq!(rules[1]["rule"]["cookie"], 7);
}

#[test]
fn a_second_weftd_on_the_same_runtime_dir_is_refused() {
    let d = Daemon::start();
    let out = d.run_to_exit(&[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("another weftd"), "{err}");
    d.ok(json!({"op": "hello"}));
}

#[test]
fn a_corrupt_state_file_is_refused_and_reset_state_moves_it_aside() {
    let mut d = Daemon::new();
    std::fs::create_dir_all(d.state_file().parent().unwrap()).unwrap();
    let garbage = "{\n  \"version\": 1,\n  \"switches\": [\n    {\"name\": \"br0\",}\n  ]\n}\n";
    std::fs::write(d.state_file(), garbage).unwrap();
    let out = d.run_to_exit(&[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let file = d.state_file().display().to_string();
    assert!(
        err.contains(&format!("{file}: line 4")),
        "names the file and the line: {err}"
    );
    assert!(err.contains("--reset-state"), "says how to proceed: {err}");
    assert_eq!(
        std::fs::read_to_string(d.state_file()).unwrap(),
        garbage,
        "left as it was"
    );

    d.extra_args = vec!["--reset-state".into()];
    d.launch();
    let aside: Vec<_> = std::fs::read_dir(d.state_file().parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("state.json.corrupt-"))
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    let kept = std::fs::read_to_string(d.state_file().parent().unwrap().join(&aside[0])).unwrap();
    assert_eq!(kept, garbage, "never discarded");
    assert_eq!(
        d.config()["switches"][0]["name"],
        "br0",
        "starts from the configuration"
    );
}

#[test]
fn an_invalid_state_file_is_refused_with_the_part_at_fault() {
    let d = Daemon::new();
    std::fs::create_dir_all(d.state_file().parent().unwrap()).unwrap();
    let text = json!({"version": 1, "switches": [{"name": "br0", "rules": [{"actions": [{"output": "vm9"}]}]}]});
    std::fs::write(d.state_file(), text.to_string()).unwrap();
    let out = d.run_to_exit(&[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rules[0]") && err.contains("vm9"), "{err}");
    let out = d.run_to_exit(&["--check-config"]);
    assert!(!out.status.success(), "--check-config finds it too");
}

#[test]
fn a_hand_edited_state_file_is_loaded_and_failed_ports_are_kept() {
    let mut d = Daemon::new();
    std::fs::create_dir_all(d.state_file().parent().unwrap()).unwrap();
    let state = json!({
        "version": 1,
        "switches": [
            {"name": "edge", "settings": {"fdb_ageing_secs": 60},
             "ports": [
                {"name": "uplink", "kind": {"type": "af_packet", "ifname": "weft-absent9"}},
                {"name": "vm1", "kind": {"type": "tap", "ifname": "weft-vm1", "netns": "weft-absent-ns"}, "options": {"vlan": {"mode": "access", "vlan": 10}}}
             ],
             "static_macs": [{"vlan": 10, "mac": "52:54:00:00:00:01", "port": "vm1"}],
             "rules": [{"priority": 100, "match": {"in_port": "uplink", "ethertype": 2054}, "actions": [{"output": "vm1"}]}]}
        ]
    });
    std::fs::write(
        d.state_file(),
        serde_json::to_string_pretty(&state).unwrap(),
    )
    .unwrap();
    d.launch();
    let ports = d.ok(json!({"op": "port_list", "switch": "edge"}))["ports"].clone();
    assert_eq!(ports.as_array().unwrap().len(), 2);
    for p in ports.as_array().unwrap() {
        assert!(p["failed"].as_str().is_some_and(|f| !f.is_empty()), "{p}");
    }
    assert!(
        d.log().contains("could not be recreated"),
        "reported in the log"
    );
    let fdb = d.ok(json!({"op": "fdb_show", "switch": "edge"}))["entries"].clone();
    assert_eq!(fdb[0]["port"], "vm1");
    assert_eq!(
        d.ok(json!({"op": "rule_list", "switch": "edge"}))["rules"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let shown = d.config();
    assert_eq!(
        shown["switches"][0]["ports"].as_array().unwrap().len(),
        2,
        "failed ports stay configured"
    );
    // The state file is not rewritten by a restore; a change rewrites it in full.
    d.ok(json!({"op": "fdb_del", "switch": "edge", "vlan": 10, "mac": "52:54:00:00:00:01"}));
    d.kill();
    d.launch();
    assert!(d.config()["switches"][0]["static_macs"]
        .as_array()
        .unwrap()
        .is_empty());
    assert_eq!(
        d.config()["switches"][0]["ports"].as_array().unwrap().len(),
        2
    );
}

#[test]
fn a_bad_configuration_file_is_refused_with_its_line() {
    let d = Daemon::new();
    let conf = d.dir.path().join("weftd.toml");
    std::fs::write(&conf, "[control]\nmax_clients = 32\nsocket_mode = 644\n").unwrap();
    let out = d.run_to_exit(&["--config", conf.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("weftd.toml") && err.contains("line 3") && err.contains("0o600"),
        "{err}"
    );
}

#[test]
fn the_sample_configuration_checks_clean() {
    let d = Daemon::new();
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/weftd.toml");
    let out = d.run_to_exit(&["--config", sample, "--check-config"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn seed_switches_of_a_configuration_file_make_the_first_state() {
    let mut d = Daemon::new();
    let conf = d.dir.path().join("weftd.toml");
    std::fs::write(
        &conf,
        "[workers]\ncount = 2\n\n[[switch]]\nname = \"a\"\n\n[[switch]]\nname = \"b\"\n[[switch.rules]]\nactions = [\"drop\"]\n",
    )
    .unwrap();
    d.extra_args = vec!["--config".into(), conf.to_str().unwrap().into()];
    d.launch();
    let list = d.ok(json!({"op": "switch_list"}))["switches"].clone();
    let names: Vec<_> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["a", "b"]);
    assert_ne!(
        list[0]["worker"], list[1]["worker"],
        "spread over the two workers"
    );
    let stats = d.ok(json!({"op": "stats"}));
    assert_eq!(stats["workers"].as_array().unwrap().len(), 2);
}

#[test]
fn without_foreground_weftd_detaches_once_ready() {
    let d = Daemon::new();
    let mut cmd = std::process::Command::new(common::WEFTD);
    cmd.arg("--runtime-dir")
        .arg(d.run_dir())
        .arg("--state-file")
        .arg(d.state_file())
        .arg("--metrics-listen")
        .arg("off");
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("running (pid"));
    let pid: i32 = std::fs::read_to_string(d.run_dir().join("weftd.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let pid = nix::unistd::Pid::from_raw(pid);
    let guard = KillOnDrop(pid);
    d.ok(json!({"op": "hello"}));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while nix::sys::signal::kill(pid, None).is_ok() {
        assert!(std::time::Instant::now() < deadline, "did not stop");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Gone: its pid may be reused, so the guard must not fire.
    std::mem::forget(guard);
    assert!(!d.socket().exists());
    assert!(std::fs::read_to_string(d.run_dir().join("weftd.log"))
        .unwrap()
        .contains("weftd ready"));
}

/// Kills a detached weftd if the test fails before stopping it.
struct KillOnDrop(nix::unistd::Pid);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(self.0, nix::sys::signal::Signal::SIGKILL);
    }
}
