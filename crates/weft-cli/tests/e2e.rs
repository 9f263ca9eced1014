//! End to end: a real weftd in a temporary directory, driven only through `weft --json`.
//! Switches, rules and (refused) FDB entries are added and removed; weftd is restarted
//! gracefully and with SIGKILL and must come back with the same configuration.
//!
//! Ports and real traffic (TAPs in network namespaces, as root) are in `e2e_traffic.rs`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{code, stderr, stdout, weft_cmd};
use weft_cli::rule_syntax::parse_rule;
use weft_control::response::RuleInfo;
use weft_control::state::State;
use weft_control::Response;

/// A weftd with its runtime directory and state file in a temporary directory; killed when
/// dropped.
struct Weftd {
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl Weftd {
    fn new() -> Weftd {
        Weftd {
            dir: tempfile::tempdir().unwrap(),
            child: None,
        }
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("run").join("weftd.sock")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("weftd.log")).unwrap_or_default()
    }

    fn start(&mut self) {
        assert!(self.child.is_none());
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("weftd.log"))
            .unwrap();
        let child = Command::new(common::weftd_binary())
            .arg("--foreground")
            .arg("--runtime-dir")
            .arg(self.dir.path().join("run"))
            .arg("--state-file")
            .arg(self.dir.path().join("state.json"))
            .args(["--metrics-listen", "off"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let socket = self.socket();
        common::wait_until_answering(
            self.child.as_mut().unwrap(),
            &socket,
            &self.dir.path().join("weftd.log"),
        );
    }

    /// SIGTERM, then wait for the exit.
    fn stop_gracefully(&mut self) {
        let mut child = self.child.take().unwrap();
        let term = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(term.success());
        let deadline = Instant::now() + Duration::from_secs(30);
        while child.try_wait().unwrap().is_none() {
            assert!(
                Instant::now() < deadline,
                "weftd ignored SIGTERM:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL.
    fn kill_hard(&mut self) {
        let mut child = self.child.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }

    fn weft(&self, args: &[&str]) -> Output {
        weft_cmd()
            .arg("--socket")
            .arg(self.socket())
            .args(args)
            .output()
            .unwrap()
    }

    /// `weft --json ARGS`, which must succeed; the answer.
    fn json(&self, args: &[&str]) -> Response {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let o = self.weft(&all);
        assert_eq!(
            code(&o),
            0,
            "weft {args:?} failed: {}\nweftd log:\n{}",
            stderr(&o),
            self.log()
        );
        serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)))
    }

    fn config(&self) -> State {
        match self.json(&["config", "show"]) {
            Response::Config { state } => state,
            other => panic!("config show answered {other:?}"),
        }
    }

    fn switch_names(&self) -> Vec<String> {
        match self.json(&["switch", "list"]) {
            Response::Switches { switches } => switches.into_iter().map(|s| s.name).collect(),
            other => panic!("switch list answered {other:?}"),
        }
    }

    fn rules(&self, switch: &str) -> Vec<RuleInfo> {
        match self.json(&["rule", "list", switch]) {
            Response::Rules { rules } => rules,
            other => panic!("rule list answered {other:?}"),
        }
    }
}

impl Drop for Weftd {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

const WEB: &str = "priority=10,tcp,tp_dst=80 actions=push_vlan:20,flood";
const TEN: &str = "ip,nw_dst=10.0.0.0/8 actions=drop";

#[test]
fn configuration_made_with_weft_survives_restarts() {
    let mut d = Weftd::new();
    d.start();
    assert_eq!(d.switch_names(), ["br0"], "the embedded default");

    // Switches.
    assert_eq!(
        d.json(&["switch", "add", "br1", "--ageing", "600", "--batch", "32"]),
        Response::Done
    );
    let again = d.weft(&["switch", "add", "br1"]);
    assert_eq!(code(&again), 4, "{}", stderr(&again));
    assert_eq!(code(&d.weft(&["switch", "add", "bad name"])), 4);
    d.json(&["switch", "add", "br2"]);
    d.json(&["switch", "del", "br2"]);
    assert_eq!(code(&d.weft(&["switch", "del", "br2"])), 3);
    assert_eq!(d.switch_names(), ["br0", "br1"]);
    let Response::Switches { switches } = d.json(&["switch", "list"]) else {
        unreachable!()
    };
    assert_eq!(switches[1].settings.fdb_ageing_secs, 600);
    assert_eq!(switches[1].settings.batch_size, 32);

    // Rules, in the text syntax, printed back the same.
    let Response::RuleAdded { id: web } = d.json(&["rule", "add", "br1", WEB]) else {
        panic!("rule add did not answer rule_added")
    };
    let Response::RuleAdded { id: ten } = d.json(&["rule", "add", "br1", TEN]) else {
        panic!("rule add did not answer rule_added")
    };
    let drop_all = d.json(&["rule", "add", "br1", "actions=drop"]);
    let Response::RuleAdded { id: drop_all } = drop_all else {
        panic!("rule add did not answer rule_added")
    };
    let rules = d.rules("br1");
    assert_eq!(rules.len(), 3);
    let web_rule = rules.iter().find(|r| r.id == web).unwrap();
    assert_eq!(web_rule.rule, parse_rule(WEB).unwrap());
    assert_eq!(
        rules.iter().find(|r| r.id == ten).unwrap().rule,
        parse_rule(TEN).unwrap()
    );
    d.json(&["rule", "del", "br1", &drop_all.to_string()]);
    assert_eq!(code(&d.weft(&["rule", "del", "br1", "999"])), 3);
    let bad = d.weft(&["rule", "add", "br1", "in_port=nope actions=drop"]);
    assert_eq!(code(&bad), 3, "{}", stderr(&bad));
    let human = d.weft(&["rule", "list", "br1"]);
    assert!(
        stdout(&human).contains("priority=10,tcp,tp_dst=80 actions=push_vlan:20,flood"),
        "{}",
        stdout(&human)
    );

    // FDB: static entries need a port, and this weftd can create none.
    let fdb = d.weft(&["fdb", "add", "br1", "52:54:00:00:00:01", "nope"]);
    assert_eq!(code(&fdb), 3, "{}", stderr(&fdb));
    assert_eq!(
        d.json(&["fdb", "show", "br1"]),
        Response::Fdb { entries: vec![] }
    );
    assert_eq!(
        d.json(&["fdb", "flush", "br1", "--dynamic"]),
        Response::Done
    );
    assert_eq!(code(&d.weft(&["fdb", "show", "nope"])), 3);

    let before = d.config();
    assert_eq!(before.switches.len(), 2);
    assert_eq!(before.switches[1].rules.len(), 2);

    d.stop_gracefully();
    d.start();
    assert_eq!(d.config(), before, "after SIGTERM and restart");
    assert_eq!(d.rules("br1").len(), 2);

    d.json(&["rule", "add", "br1", "priority=99,arp actions=normal"]);
    let after_arp = d.config();
    d.kill_hard();
    d.start();
    assert_eq!(d.config(), after_arp, "after SIGKILL and restart");
}

#[test]
fn config_apply_dry_run_changes_nothing_and_apply_persists() {
    let mut d = Weftd::new();
    d.start();
    let mut wanted = d.config();
    let mut br5 = wanted.switches[0].clone();
    br5.name = "br5".into();
    br5.rules = vec![parse_rule("priority=1,udp,tp_dst=53 actions=controller").unwrap()];
    wanted.switches.push(br5);
    let file = d.dir.path().join("wanted.json");
    std::fs::write(&file, serde_json::to_string_pretty(&wanted).unwrap()).unwrap();
    let file = file.to_str().unwrap();

    let Response::Applied { changes } = d.json(&["config", "apply", file, "--dry-run"]) else {
        panic!("config apply did not answer applied")
    };
    assert!(!changes.is_empty());
    assert_eq!(d.switch_names(), ["br0"], "a dry run changes nothing");

    d.json(&["config", "apply", file]);
    assert_eq!(d.switch_names(), ["br0", "br5"]);
    let applied = d.config();
    assert_eq!(applied.switches[1].rules, wanted.switches[1].rules);

    let broken = d.dir.path().join("broken.json");
    std::fs::write(&broken, "{\"switches\": [{\"name\": 5}]}").unwrap();
    let o = d.weft(&["config", "apply", broken.to_str().unwrap()]);
    assert_eq!(code(&o), 4, "{}", stderr(&o));

    d.kill_hard();
    d.start();
    assert_eq!(d.config(), applied);
}

#[test]
fn stats_top_and_refusals_through_the_real_daemon() {
    let mut d = Weftd::new();
    d.start();
    let Response::Stats { switches, workers } = d.json(&["stats"]) else {
        panic!("stats did not answer stats")
    };
    assert_eq!(switches[0].name, "br0");
    assert!(!workers.is_empty());
    let top = d.weft(&["--json", "top", "--interval", "0.2"]);
    assert_eq!(code(&top), 0, "{}", stderr(&top));
    let v: serde_json::Value = serde_json::from_str(&stdout(&top)).unwrap();
    assert!(v["ports"].as_array().unwrap().is_empty());

    let pcap = d.dir.path().join("x.pcap");
    let cap = d.weft(&[
        "capture",
        "br0:nope",
        "-w",
        pcap.to_str().unwrap(),
        "-c",
        "1",
    ]);
    assert_eq!(code(&cap), 3, "{}", stderr(&cap));
    assert_eq!(code(&d.weft(&["port", "show", "br0:nope"])), 3);
    assert_eq!(code(&d.weft(&["port", "del", "br0:nope"])), 3);
    assert_eq!(d.json(&["port", "list"]), Response::Ports { ports: vec![] });
    let v = d.weft(&["version"]);
    assert!(stdout(&v).contains("weftd "), "{}", stdout(&v));
    let missing = weft_cmd()
        .arg("--socket")
        .arg(Path::new("/nonexistent/weftd.sock"))
        .args(["switch", "list"])
        .output()
        .unwrap();
    assert_eq!(code(&missing), 5);
}
