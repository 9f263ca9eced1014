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
fn binding_does_not_change_the_process_umask() {
    let dir = tempfile::tempdir().unwrap();
    // Read the umask by setting it back to what it was (the only way to read it).
    let before = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o022));
    nix::sys::stat::umask(before);
    let _listener = bind_unix(&dir.path().join("s.sock"), 0o600, None).unwrap();
    let after = nix::sys::stat::umask(before);
    assert_eq!(after, before);
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
