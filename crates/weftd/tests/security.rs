//! Who may use the control socket. A client runs as `nobody` (uid 65534) through
//! `setpriv`: the client is this test binary itself, re-run in probe mode (see
//! [`probe_connects_and_reports_what_weftd_answered`]), copied where `nobody` can run it.
//! Needs root and setpriv; without them each test says so and skips.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::Daemon;
use serde_json::json;

const PROBE_SOCKET: &str = "WEFTD_PROBE_SOCKET";
/// The request the probe sends (JSON); `hello` when unset.
const PROBE_REQUEST: &str = "WEFTD_PROBE_REQUEST";
const NOBODY: u32 = 65534;

/// The probe's side: connect, send `request` (`hello` when `None`), print what came back
/// (or why nothing did).
fn probe(socket: &str, request: Option<&str>) -> String {
    let request: serde_json::Value = request.map_or(json!({"op": "hello"}), |r| {
        serde_json::from_str(r).expect("the probe's request is JSON")
    });
    let mut stream = match UnixStream::connect(socket) {
        Ok(s) => s,
        Err(e) => return format!("connect failed: {e}"),
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = writeln!(
        stream,
        "{}",
        json!({"version": 1, "id": 1, "request": request})
    );
    let mut line = String::new();
    match BufReader::new(&stream).read_line(&mut line) {
        Ok(n) if n > 0 => line.trim().to_string(),
        Ok(_) => "closed".into(),
        Err(e) => format!("read failed: {e}"),
    }
}

/// Runs the probe against `socket` as uid/gid given (with these supplementary groups),
/// from a copy of this binary in `dir`; returns its report.
fn run_probe(dir: &Path, socket: &Path, ids: Option<(u32, u32, &[u32])>) -> String {
    run_probe_asking(dir, socket, ids, None)
}

/// [`run_probe`] sending `request` instead of `hello`.
fn run_probe_asking(
    dir: &Path,
    socket: &Path,
    ids: Option<(u32, u32, &[u32])>,
    request: Option<&serde_json::Value>,
) -> String {
    let exe = dir.join("probe");
    if !exe.exists() {
        std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut cmd = match ids {
        Some((uid, gid, groups)) => {
            let mut c = Command::new("setpriv");
            c.arg(format!("--reuid={uid}"))
                .arg(format!("--regid={gid}"));
            if groups.is_empty() {
                c.arg("--clear-groups");
            } else {
                let list: Vec<String> = groups.iter().map(u32::to_string).collect();
                c.arg(format!("--groups={}", list.join(",")));
            }
            c.arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    cmd.args([
        "--exact",
        "probe_connects_and_reports_what_weftd_answered",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(PROBE_SOCKET, socket);
    if let Some(r) = request {
        cmd.env(PROBE_REQUEST, r.to_string());
    }
    // A child another test thread forks while the copy above is open for writing holds
    // that descriptor until it execs: running the copy meanwhile fails with ETXTBSY.
    let mut attempts = 0;
    let out = loop {
        match cmd.output() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && attempts < 100 => {
                attempts += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => break other.unwrap(),
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .find_map(|l| l.split_once("PROBE: ").map(|(_, rest)| rest))
        .map(str::to_string)
        .unwrap_or_else(|| {
            panic!(
                "the probe did not report:\n{stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

/// Why these tests cannot run here, if they cannot.
fn cannot_run() -> Option<&'static str> {
    if !nix::unistd::geteuid().is_root() {
        return Some("not root: cannot run a client as another user");
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        return Some("setpriv (util-linux) is not installed");
    }
    None
}

/// A daemon whose directories `nobody` may traverse (the temporary directory is 0700).
fn daemon(config: &str) -> Daemon {
    let mut d = Daemon::with_config(config);
    std::fs::set_permissions(d.dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    d.launch();
    d
}

fn dir_of(d: &Daemon) -> PathBuf {
    d.dir.path().to_path_buf()
}

/// In probe mode (run by the tests below) this is the client; run on its own, it checks
/// that the probe works at all, as root, so that the refusals below mean something.
#[test]
fn probe_connects_and_reports_what_weftd_answered() {
    if let Ok(socket) = std::env::var(PROBE_SOCKET) {
        let request = std::env::var(PROBE_REQUEST).ok();
        println!("\nPROBE: {}", probe(&socket, request.as_deref()));
        return;
    }
    let d = Daemon::start();
    let report = run_probe(&dir_of(&d), &d.socket(), None);
    assert!(report.contains("\"kind\":\"hello\""), "{report}");
}

#[test]
fn nobody_cannot_even_open_the_default_socket() {
    if let Some(why) = cannot_run() {
        eprintln!("skipped: {why}");
        return;
    }
    let d = daemon("");
    let report = run_probe(&dir_of(&d), &d.socket(), Some((NOBODY, NOBODY, &[])));
    assert!(
        report.contains("connect failed") && report.contains("Permission denied"),
        "{report}"
    );
    d.ok(json!({"op": "hello"}));
}

#[test]
fn nobody_gets_permission_denied_from_an_open_socket() {
    if let Some(why) = cannot_run() {
        eprintln!("skipped: {why}");
        return;
    }
    let d = daemon("[control]\nsocket_mode = 0o666\n");
    assert_eq!(
        std::fs::metadata(d.socket()).unwrap().permissions().mode() & 0o777,
        0o666
    );
    let report = run_probe(&dir_of(&d), &d.socket(), Some((NOBODY, NOBODY, &[])));
    let r: serde_json::Value = serde_json::from_str(&report).unwrap_or_else(|_| panic!("{report}"));
    assert_eq!(r["error"]["kind"], "permission_denied", "{r}");
    assert!(r["error"]["hint"]
        .as_str()
        .unwrap()
        .contains("socket_group"));
    d.ok(json!({"op": "hello"}));
}

/// A daemon whose control socket is open to a group that exists here (daemon, adm or
/// users), and that group's id; `None` (saying why) when these tests cannot run.
fn group_daemon() -> Option<(Daemon, u32)> {
    if let Some(why) = cannot_run() {
        eprintln!("skipped: {why}");
        return None;
    }
    let Some(group) = ["daemon", "adm", "users"]
        .into_iter()
        .find_map(|g| nix::unistd::Group::from_name(g).ok().flatten())
    else {
        eprintln!("skipped: no group daemon, adm or users to test with");
        return None;
    };
    let d = daemon(&format!(
        "[control]\nsocket_mode = 0o660\nsocket_group = \"{}\"\n",
        group.name
    ));
    Some((d, group.gid.as_raw()))
}

#[test]
fn members_of_the_socket_group_are_let_in() {
    let Some((d, gid)) = group_daemon() else {
        return;
    };
    let meta = std::fs::metadata(d.socket()).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(meta.gid(), gid, "the socket belongs to the group");
    let primary = run_probe(&dir_of(&d), &d.socket(), Some((NOBODY, gid, &[])));
    assert!(
        primary.contains("\"kind\":\"hello\""),
        "as primary group: {primary}"
    );
    let supplementary = run_probe(&dir_of(&d), &d.socket(), Some((NOBODY, NOBODY, &[gid])));
    assert!(
        supplementary.contains("\"kind\":\"hello\""),
        "as supplementary group: {supplementary}"
    );
    let outsider = run_probe(&dir_of(&d), &d.socket(), Some((NOBODY, NOBODY, &[])));
    assert!(
        outsider.contains("Permission denied"),
        "not in the group: {outsider}"
    );
}

/// A tcp-link port with this key file, listening on an ephemeral loopback port.
fn keyed_link(name: &str, key: &Path) -> serde_json::Value {
    json!({"op": "port_add", "switch": "br0", "name": name, "kind": {
        "type": "tcp_link", "listen": "127.0.0.1:0", "key_file": key.to_str().unwrap()}})
}

#[test]
fn a_member_cannot_have_weftd_read_a_key_file_the_member_cannot_read() {
    let Some((d, gid)) = group_daemon() else {
        return;
    };
    let dir = dir_of(&d);
    let key = vec![b'k'; 40];
    // Root's key, mode 0600: weftd could read it, the member cannot.
    let roots = dir.join("root.key");
    std::fs::write(&roots, &key).unwrap();
    std::fs::set_permissions(&roots, std::fs::Permissions::from_mode(0o600)).unwrap();
    // The member's own key, mode 0600.
    let own = dir.join("own.key");
    std::fs::write(&own, &key).unwrap();
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o600)).unwrap();
    nix::unistd::chown(&own, Some(NOBODY.into()), None).unwrap();
    let member = Some((NOBODY, gid, &[][..]));

    let refused = run_probe_asking(&dir, &d.socket(), member, Some(&keyed_link("l1", &roots)));
    assert!(
        refused.contains("permission denied") && refused.contains("root.key"),
        "root's key file was read for a member: {refused}"
    );
    let taken = run_probe_asking(&dir, &d.socket(), member, Some(&keyed_link("l2", &own)));
    assert!(
        taken.contains("\"ok\""),
        "the member's own key file was refused: {taken}"
    );
    // Root still reads root's file.
    d.ok(keyed_link("l3", &roots));
}
