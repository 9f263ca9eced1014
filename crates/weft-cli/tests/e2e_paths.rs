//! End to end: the paths a control client chooses. A real weftd in a temporary directory,
//! driven through `weft`: vhost-user sockets only inside the allowed directories, whatever
//! a concurrent process does to the paths leading there; weftd's own files and anything that
//! is not a socket never touched; key files that are FIFOs refused at once, without holding
//! up other clients; a state file naming the control socket restores that port as failed.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::weftd::Weftd;
use common::{code, stderr};

/// A weftd with the configuration (TOML) `config` makes in its temporary directory (see
/// [`Weftd`]: runtime directory `run/`, state file `run/state.json`, so that it is one of
/// weftd's own files in an allowed directory when `run` is allowed).
fn start(config: impl FnOnce(&Path) -> String) -> Weftd {
    Weftd::start_configured(|dir| Some(config(dir)))
}

/// `weft port add br0:PORT vhost-user --vhost-socket SOCKET --vhost-mode MODE`.
fn add_vhost(weftd: &Weftd, port: &str, socket: &Path, mode: &str) -> Output {
    weftd.weft(&[
        "port",
        "add",
        &format!("br0:{port}"),
        "vhost-user",
        "--vhost-mode",
        mode,
        "--vhost-socket",
        socket.to_str().unwrap(),
    ])
}

fn toml_dirs(dirs: &[PathBuf]) -> String {
    let list: Vec<String> = dirs.iter().map(|d| format!("{d:?}")).collect();
    format!("vhost_socket_dirs = [{}]\n", list.join(", "))
}

/// Every entry of `dir`: name → (kind, inode, size), to compare before and after.
fn listing(dir: &Path) -> BTreeMap<String, (String, u64, u64)> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let m = std::fs::symlink_metadata(e.path()).unwrap();
            let kind = if m.file_type().is_socket() {
                "socket"
            } else if m.is_file() {
                "file"
            } else {
                "other"
            };
            (
                e.file_name().to_string_lossy().into_owned(),
                (kind.to_string(), m.ino(), m.len()),
            )
        })
        .collect()
}

/// Swaps `path` between a real directory (kept at `real` meanwhile) and a symlink to
/// `target`, as fast as it can, until stopped.
fn swapper(path: PathBuf, real: PathBuf, target: PathBuf, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        if std::fs::rename(&path, &real).is_ok() {
            let _ = std::os::unix::fs::symlink(&target, &path);
            std::thread::yield_now();
            let _ = std::fs::remove_file(&path);
            let _ = std::fs::rename(&real, &path);
        }
        std::thread::yield_now();
    }
}

#[test]
fn symlink_swaps_during_port_churn_never_touch_files_outside_the_allowed_dirs() {
    let weftd = start(|d| {
        std::fs::create_dir(d.join("allowed")).unwrap();
        std::fs::create_dir(d.join("second")).unwrap();
        std::fs::create_dir(d.join("second/sub")).unwrap();
        std::fs::create_dir(d.join("outside")).unwrap();
        toml_dirs(&[d.join("allowed"), d.join("second")])
    });
    let allowed = weftd.path("allowed");
    let second = weftd.path("second");
    let outside = weftd.path("outside");
    // Canaries under the names the ports use: a regular file, a live socket (which must
    // never be connected to) and a stale one.
    std::fs::write(outside.join("p0.sock"), b"canary").unwrap();
    let live = UnixListener::bind(outside.join("p1.sock")).unwrap();
    live.set_nonblocking(true).unwrap();
    drop(UnixListener::bind(outside.join("p2.sock")).unwrap());
    let before = listing(&outside);

    let stop = Arc::new(AtomicBool::new(false));
    // An allowed directory itself, and a directory inside another, swapped for symlinks
    // out.
    let swappers = [
        (allowed.clone(), weftd.path("allowed.real")),
        (second.join("sub"), weftd.path("sub.real")),
    ]
    .map(|(path, real)| {
        let (target, stop) = (outside.clone(), Arc::clone(&stop));
        std::thread::spawn(move || swapper(path, real, target, stop))
    });

    let started = Instant::now();
    let mut rounds = 0;
    let mut added = 0;
    while rounds < 300 && started.elapsed() < Duration::from_secs(90) {
        let n = rounds % 3;
        let mode = if rounds % 2 == 0 { "server" } else { "client" };
        let name = format!("p{n}.sock");
        // Through the allowed directory's path: accepted (weftd holds the directory) unless
        // the swap makes the path momentarily absent; never outside.
        if code(&add_vhost(&weftd, "p", &allowed.join(&name), mode)) == 0 {
            added += 1;
            let o = weftd.weft(&["port", "del", "br0:p"]);
            assert_eq!(code(&o), 0, "{}\n{}", stderr(&o), weftd.log());
        }
        // Through a directory inside it: never accepted.
        let o = add_vhost(&weftd, "q", &second.join("sub").join(&name), mode);
        assert_ne!(code(&o), 0, "a socket in a subdirectory was accepted");
        rounds += 1;
    }
    stop.store(true, Ordering::Relaxed);
    for s in swappers {
        s.join().unwrap();
    }
    eprintln!(
        "{rounds} rounds in {:?}, {added} ports added and deleted",
        started.elapsed()
    );
    assert!(rounds >= 100, "only {rounds} rounds in time");
    assert!(
        added > rounds / 2,
        "only {added} of {rounds} ports were added"
    );
    assert_eq!(
        listing(&outside),
        before,
        "a file outside the allowed directory changed"
    );
    assert_eq!(std::fs::read(outside.join("p0.sock")).unwrap(), b"canary");
    assert!(
        live.accept().is_err(),
        "weftd connected to a socket outside the allowed directory"
    );
    // Every socket weftd made it removed again, from the allowed directory.
    let left: Vec<String> = listing(&allowed)
        .into_iter()
        .chain(listing(&second))
        .filter(|(_, (kind, _, _))| kind == "socket")
        .map(|(name, _)| name)
        .collect();
    assert!(left.is_empty(), "sockets left behind: {left:?}");
    assert_eq!(code(&weftd.weft(&["hello"])), 0);
}

#[test]
fn socket_paths_weftd_must_not_use_are_refused_with_a_clear_error() {
    let weftd = start(|d| {
        std::fs::create_dir(d.join("files")).unwrap();
        std::fs::create_dir(d.join("files/sub")).unwrap();
        std::fs::write(d.join("files/data.txt"), b"keep me").unwrap();
        std::os::unix::fs::symlink(d.join("files"), d.join("link")).unwrap();
        // The runtime directory allowed too: weftd's own files are in it.
        toml_dirs(&[d.join("run"), d.join("files")])
    });
    let files = weftd.path("files");
    let text = |p: &Path| p.to_str().unwrap().to_string();
    let refused = [
        (weftd.path("run/weftd.sock"), "weftd's own files"),
        (weftd.path("run/state.json"), "weftd's own files"),
        (weftd.path("run/weftd.pid"), "weftd's own files"),
        (files.join("data.txt"), "not a socket"),
        (
            PathBuf::from(format!("{}/../files/x.sock", text(&files))),
            "`..`",
        ),
        (PathBuf::from(format!("{}//x.sock", text(&files))), "`//`"),
        (weftd.path("link/x.sock"), "symlink"),
        (files.join("sub/x.sock"), "vhost_socket_dirs"),
        (weftd.path("elsewhere.sock"), "vhost_socket_dirs"),
    ];
    for (path, why) in &refused {
        for mode in ["server", "client"] {
            let o = add_vhost(&weftd, "p", path, mode);
            let e = stderr(&o);
            if *why == "not a socket" && mode == "client" {
                // A client port waits for the frontend's socket: it is created, and never
                // connects to (nor touches) what is not one.
                assert_eq!(code(&o), 0, "{e}");
                assert_eq!(code(&weftd.weft(&["port", "del", "br0:p"])), 0);
                continue;
            }
            assert_ne!(
                code(&o),
                0,
                "{mode} port on {} was accepted",
                path.display()
            );
            assert!(e.contains(why), "{mode} {}: {e}", path.display());
            assert!(
                e.contains(&text(path)) || e.contains(&format!("{:?}", text(path))),
                "the error names the client's path: {e}"
            );
        }
    }
    assert_eq!(std::fs::read(files.join("data.txt")).unwrap(), b"keep me");
    assert!(std::fs::symlink_metadata(weftd.path("run/weftd.sock"))
        .unwrap()
        .file_type()
        .is_socket());
    assert_eq!(
        code(&weftd.weft(&["hello"])),
        0,
        "the control socket still answers"
    );
    let o = weftd.weft(&["--json", "port", "list"]);
    assert!(
        !common::stdout(&o).contains("\"p\""),
        "{}",
        common::stdout(&o)
    );
}

#[test]
fn a_state_file_naming_the_control_socket_restores_that_port_failed() {
    let mut weftd = start(|_| String::new());
    let ok = weftd.path("run/vhost/x.sock");
    let o = add_vhost(&weftd, "p", &ok, "server");
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    weftd.stop();
    // The state file is edited by hand to name the control socket.
    let state = weftd.path("run/state.json");
    let text = std::fs::read_to_string(&state).unwrap();
    let ctl = weftd.path("run/weftd.sock");
    let edited = text.replace(ok.to_str().unwrap(), ctl.to_str().unwrap());
    assert_ne!(text, edited);
    std::fs::write(&state, edited).unwrap();
    weftd.spawn();
    let o = weftd.weft(&["--json", "port", "list"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = common::stdout(&o);
    assert!(out.contains("\"failed\""), "{out}");
    assert!(out.contains("vhost_socket_dirs"), "{out}");
    assert!(std::fs::symlink_metadata(&ctl)
        .unwrap()
        .file_type()
        .is_socket());
    assert_eq!(code(&weftd.weft(&["hello"])), 0);
}

#[test]
fn a_fifo_key_file_is_refused_at_once_while_another_client_is_answered() {
    let weftd = start(|d| {
        nix::unistd::mkfifo(
            &d.join("key.fifo"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        std::fs::write(d.join("big.bin"), vec![7u8; 123_457]).unwrap();
        String::new()
    });
    let weftd = Arc::new(weftd);
    for (file, why) in [("key.fifo", "FIFO"), ("big.bin", "larger than 4096 bytes")] {
        let key = weftd.path(file);
        let adder = {
            let weftd = Arc::clone(&weftd);
            std::thread::spawn(move || {
                let started = Instant::now();
                let o = weftd.weft(&[
                    "port",
                    "add",
                    "br0:t",
                    "tcp-link",
                    "--listen",
                    "127.0.0.1:0",
                    "--key-file",
                    key.to_str().unwrap(),
                ]);
                (o, started.elapsed())
            })
        };
        let started = Instant::now();
        let hello = weftd.weft(&["hello"]);
        assert_eq!(code(&hello), 0, "{}", stderr(&hello));
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "hello took {:?}",
            started.elapsed()
        );
        let (o, took) = adder.join().unwrap();
        let e = stderr(&o);
        assert_ne!(code(&o), 0, "{file} was taken as a key");
        assert!(
            took < Duration::from_secs(2),
            "refusing {file} took {took:?}"
        );
        assert!(e.contains(weftd.path(file).to_str().unwrap()), "{e}");
        assert!(e.contains(why), "{e}");
        assert!(!e.contains("123457"), "a file's size was told: {e}");
    }
}
