//! The control socket's creation and the client slots.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;

use super::*;

#[test]
fn the_control_socket_gets_the_configured_mode_and_group_and_leaves_nothing_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weftd.sock");
    for (mode, gid) in [
        (0o600, None),
        (0o660, Some(nix::unistd::getegid().as_raw())),
    ] {
        let listener = bind_unix(&path, mode, gid).unwrap();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, mode);
        if let Some(gid) = gid {
            assert_eq!(meta.gid(), gid);
        }
        UnixStream::connect(&path).expect("the socket serves where it was placed");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["weftd.sock"], "no staging directory left");
        drop(listener);
    }
}

#[test]
fn a_staging_directory_left_by_a_crash_does_not_stop_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let left = dir
        .path()
        .join(format!(".weftd-bind-{}", std::process::id()));
    std::fs::create_dir(&left).unwrap();
    let _stale = std::os::unix::net::UnixListener::bind(left.join("sock")).unwrap();
    let path = dir.path().join("weftd.sock");
    let _listener = bind_unix(&path, 0o600, None).unwrap();
    assert!(!left.exists());
    UnixStream::connect(&path).unwrap();
}

/// The process umask, read without changing it.
fn umask() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Umask:"))
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn a_symlink_in_place_of_the_staging_directory_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let victim = elsewhere.path().join("sock");
    std::fs::write(&victim, "keep").unwrap();
    let link = dir
        .path()
        .join(format!(".weftd-bind-{}", std::process::id()));
    std::os::unix::fs::symlink(elsewhere.path(), &link).unwrap();
    let e = bind_unix(&dir.path().join("weftd.sock"), 0o600, None).unwrap_err();
    assert!(e.to_string().contains("remove it"), "{e}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
}

#[test]
fn binding_never_changes_the_process_umask_even_for_a_moment() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let before = umask();
    let done = std::sync::Arc::new(AtomicBool::new(false));
    // Another thread of the process watches the umask while the socket is bound, over and
    // over: any thread creating a file meanwhile would get the changed one.
    let watcher = {
        let done = std::sync::Arc::clone(&done);
        let before = before.clone();
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            while !done.load(Ordering::Relaxed) {
                let now = umask();
                if now != before {
                    seen.push(now);
                }
            }
            seen
        })
    };
    for i in 0..300 {
        drop(bind_unix(&dir.path().join(format!("s{i}.sock")), 0o600, None).unwrap());
    }
    done.store(true, Ordering::Relaxed);
    let seen = watcher.join().unwrap();
    assert!(
        seen.is_empty(),
        "{} reads saw umask {:?}",
        seen.len(),
        seen.first()
    );
    assert_eq!(umask(), before);
}

#[test]
fn group_members_and_tcp_clients_leave_root_its_reserved_slots() {
    let slots = ClientSlots::new(32);
    assert_eq!(slots.reserved(), 4);
    let others: Vec<_> = std::iter::from_fn(|| slots.take_unreserved()).collect();
    assert_eq!(others.len(), 28);
    let root: Vec<_> = std::iter::from_fn(|| slots.take()).collect();
    assert_eq!(root.len(), 4, "root still gets in");
    drop(others);
    assert!(slots.take_unreserved().is_some(), "slots come back");
    assert_eq!(reserved_for_root(1), 0);
    assert_eq!(reserved_for_root(2), 1);
    assert_eq!(reserved_for_root(1024), 8);
}

#[test]
fn token_files_that_cannot_serve_say_why_and_how_to_fix_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("token");
    let e = read_token(&path).unwrap_err();
    assert!(matches!(e, TokenFileError::Read { .. }), "{e}");
    assert!(
        e.to_string().starts_with("cannot read the token file"),
        "{e}"
    );
    std::fs::write(&path, "short\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = read_token(&path).unwrap_err();
    assert!(
        e.to_string()
            .ends_with("is readable by group or others: chmod 600 it"),
        "{e}"
    );
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let e = read_token(&path).unwrap_err();
    assert!(
        e.to_string().contains("must be at least 16 characters"),
        "{e}"
    );
    std::fs::write(&path, "0123456789abcdefXYZ\n").unwrap();
    assert_eq!(read_token(&path).unwrap(), "0123456789abcdefXYZ");
}
