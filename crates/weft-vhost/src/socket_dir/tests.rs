//! The held directory: what is replaced, refused, connected to and removed.

use std::os::unix::fs::FileTypeExt;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

/// A fresh directory of its own for one test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("weft-sockdir-{}-{tag}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

#[test]
fn a_stale_socket_is_replaced_by_the_new_one() {
    let scratch = Scratch::new("stale");
    let dir = SocketDir::open(&scratch.0).unwrap();
    let (old, old_id) = dir.bind_listener(os("a.sock")).unwrap();
    drop(old); // nobody accepts on it any more: stale
               // A second name keeps the old inode alive, so the new socket cannot reuse its number.
    std::fs::hard_link(scratch.0.join("a.sock"), scratch.0.join("old.sock")).unwrap();
    let (new, new_id) = dir.bind_listener(os("a.sock")).unwrap();
    assert_ne!(old_id, new_id);
    let meta = std::fs::symlink_metadata(scratch.0.join("a.sock")).unwrap();
    assert!(meta.file_type().is_socket());
    let _client = dir.connect(os("a.sock")).unwrap();
    new.set_nonblocking(false).unwrap();
    assert!(
        new.accept().is_ok(),
        "the new socket is the one at the name"
    );
}

#[test]
fn a_regular_file_at_the_name_is_refused_and_left_intact() {
    let scratch = Scratch::new("regular");
    let file = scratch.0.join("a.sock");
    std::fs::write(&file, b"precious").unwrap();
    let dir = SocketDir::open(&scratch.0).unwrap();
    let e = dir.bind_listener(os("a.sock")).unwrap_err();
    assert!(matches!(e, SocketDirError::NotASocket(_)), "{e}");
    assert_eq!(std::fs::read(&file).unwrap(), b"precious");
}

#[test]
fn a_symlink_at_the_name_is_neither_followed_nor_removed() {
    let scratch = Scratch::new("link");
    let target = Scratch::new("link-target");
    let dir = SocketDir::open(&scratch.0).unwrap();
    let other = SocketDir::open(&target.0).unwrap();
    let (_l, _) = other.bind_listener(os("victim.sock")).unwrap();
    std::os::unix::fs::symlink(target.0.join("victim.sock"), scratch.0.join("a.sock")).unwrap();
    assert!(matches!(
        dir.bind_listener(os("a.sock")),
        Err(SocketDirError::NotASocket(_))
    ));
    assert!(matches!(
        dir.connect(os("a.sock")),
        Err(SocketDirError::NotASocket(_))
    ));
    assert!(std::fs::symlink_metadata(target.0.join("victim.sock"))
        .unwrap()
        .file_type()
        .is_socket());
}

#[test]
fn remove_skips_a_socket_that_replaced_ours() {
    let scratch = Scratch::new("replaced");
    let dir = SocketDir::open(&scratch.0).unwrap();
    let (first, first_id) = dir.bind_listener(os("a.sock")).unwrap();
    drop(first);
    std::fs::hard_link(scratch.0.join("a.sock"), scratch.0.join("old.sock")).unwrap();
    let (_second, second_id) = dir.bind_listener(os("a.sock")).unwrap();
    assert!(!dir.remove_socket(os("a.sock"), first_id).unwrap());
    assert!(scratch.0.join("a.sock").exists());
    assert!(dir.remove_socket(os("a.sock"), second_id).unwrap());
    assert!(!scratch.0.join("a.sock").exists());
}

#[test]
fn remove_skips_a_regular_file_that_replaced_ours() {
    let scratch = Scratch::new("replaced-file");
    let dir = SocketDir::open(&scratch.0).unwrap();
    let (l, id) = dir.bind_listener(os("a.sock")).unwrap();
    drop(l);
    std::fs::remove_file(scratch.0.join("a.sock")).unwrap();
    std::fs::write(scratch.0.join("a.sock"), b"x").unwrap();
    assert!(!dir.remove_socket(os("a.sock"), id).unwrap());
    assert_eq!(std::fs::read(scratch.0.join("a.sock")).unwrap(), b"x");
}

#[test]
fn the_held_directory_is_used_after_its_path_is_swapped_for_a_symlink() {
    let scratch = Scratch::new("swap");
    let outside = Scratch::new("swap-outside");
    let allowed = scratch.0.join("allowed");
    std::fs::create_dir(&allowed).unwrap();
    let dir = SocketDir::open(&allowed).unwrap();
    let (l, id) = dir.bind_listener(os("a.sock")).unwrap();
    // The path now leads elsewhere, to a socket of the same name.
    std::fs::rename(&allowed, scratch.0.join("moved")).unwrap();
    std::os::unix::fs::symlink(&outside.0, &allowed).unwrap();
    let odir = SocketDir::open(&outside.0).unwrap();
    let (_canary, _) = odir.bind_listener(os("a.sock")).unwrap();
    drop(l);
    assert!(dir.remove_socket(os("a.sock"), id).unwrap());
    assert!(!scratch.0.join("moved/a.sock").exists());
    assert!(outside.0.join("a.sock").exists(), "the canary stays");
}

#[test]
fn a_directory_with_a_symlinked_component_is_refused() {
    let scratch = Scratch::new("symdir");
    std::fs::create_dir(scratch.0.join("real")).unwrap();
    std::os::unix::fs::symlink(scratch.0.join("real"), scratch.0.join("link")).unwrap();
    let e = SocketDir::open(&scratch.0.join("link")).unwrap_err();
    assert!(matches!(e, SocketDirError::NotPlainDirectory { .. }), "{e}");
    let e = SocketDir::open(&scratch.0.join("real/../real")).unwrap_err();
    assert!(matches!(e, SocketDirError::DotDot(_)), "{e}");
    assert!(SocketDir::open(&scratch.0.join("real")).is_ok());
}

#[test]
fn names_with_slashes_or_dots_are_refused() {
    let scratch = Scratch::new("names");
    let dir = SocketDir::open(&scratch.0).unwrap();
    for bad in ["", ".", "..", "a/b", "../a.sock"] {
        assert!(
            matches!(
                dir.bind_listener(os(bad)),
                Err(SocketDirError::BadName { .. })
            ),
            "{bad:?}"
        );
    }
}

#[test]
fn connect_reaches_a_listening_socket_and_reports_a_missing_one_as_absent() {
    let scratch = Scratch::new("connect");
    let dir = SocketDir::open(&scratch.0).unwrap();
    let e = dir.connect(os("a.sock")).unwrap_err();
    assert!(e.is_absent(), "{e}");
    let (l, _) = dir.bind_listener(os("a.sock")).unwrap();
    let _stream = dir.connect(os("a.sock")).unwrap();
    l.set_nonblocking(false).unwrap();
    assert!(l.accept().is_ok());
}

#[test]
fn another_users_socket_at_the_name_is_not_replaced() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIP: not root (a socket of another user cannot be made)");
        return;
    }
    let scratch = Scratch::new("theirs");
    let dir = SocketDir::open(&scratch.0).unwrap();
    let (l, id) = dir.bind_listener(os("a.sock")).unwrap();
    drop(l);
    std::os::unix::fs::lchown(scratch.0.join("a.sock"), Some(65534), Some(65534)).unwrap();
    let e = dir.bind_listener(os("a.sock")).unwrap_err();
    assert!(
        matches!(e, SocketDirError::NotOurs { owner: 65534, .. }),
        "{e}"
    );
    assert!(std::fs::symlink_metadata(scratch.0.join("a.sock"))
        .unwrap()
        .file_type()
        .is_socket());
    // Removal by identity still applies to it: it is the socket this test's port made.
    assert!(dir.remove_socket(os("a.sock"), id).unwrap());
}

#[test]
fn a_seqpacket_socket_keeps_message_boundaries_between_listener_and_client() {
    use nix::sys::socket::{getsockopt, sockopt::SockType as SockTypeOpt};
    let scratch = Scratch::new("seqpacket");
    let dir = SocketDir::open(&scratch.0).unwrap();
    let (listener, id) = dir.bind_seqpacket_listener(os("m.sock")).unwrap();
    assert_eq!(
        getsockopt(&listener, SockTypeOpt).unwrap(),
        SockType::SeqPacket
    );
    let client = dir.connect_seqpacket(os("m.sock")).unwrap();
    assert_eq!(
        getsockopt(&client, SockTypeOpt).unwrap(),
        SockType::SeqPacket
    );
    let (accepted, _) = UnixListener::from(listener).accept().unwrap();
    nix::unistd::write(&client, b"one").unwrap();
    nix::unistd::write(&client, b"two").unwrap();
    let mut buf = [0u8; 16];
    // Each read takes one message, never both.
    assert_eq!(nix::unistd::read(&accepted, &mut buf).unwrap(), 3);
    assert_eq!(nix::unistd::read(&accepted, &mut buf).unwrap(), 3);
    assert!(dir.remove_socket(os("m.sock"), id).unwrap());
}
