//! Which socket paths a client may give, and how they are compared.

use std::os::unix::fs::PermissionsExt;

use super::*;

fn dirs(root: &Path) -> SocketDirs {
    std::fs::create_dir_all(root.join("vhost")).unwrap();
    std::fs::create_dir_all(root.join("vms")).unwrap();
    SocketDirs::open(
        &root.join("vhost"),
        &[root.join("vms")],
        &[&root.join("vms/weftd.sock")],
    )
    .unwrap()
}

fn text(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

#[test]
fn a_socket_path_outside_allowed_dirs_is_refused_naming_the_path_and_the_fix() {
    let t = tempfile::tempdir().unwrap();
    let d = dirs(t.path());
    let outside = text(&t.path().join("elsewhere.sock"));
    let e = d.resolve("x", Some(&outside)).unwrap_err();
    assert!(e.to_string().contains(&outside), "{e}");
    assert!(e.to_string().contains("vhost_socket_dirs"), "{e}");
    assert!(e.to_string().contains(&text(&t.path().join("vms"))), "{e}");
}

#[test]
fn dot_dot_double_slash_and_subdirectories_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let d = dirs(t.path());
    let vms = text(&t.path().join("vms"));
    for bad in [
        format!("{vms}/../vms/a.sock"),
        format!("{vms}/./a.sock"),
        format!("{vms}//a.sock"),
        format!("{vms}/sub/a.sock"),
        format!("{vms}/"),
        "a.sock".to_string(),
    ] {
        assert!(d.resolve("x", Some(&bad)).is_err(), "{bad} was accepted");
    }
    assert!(d.resolve("x", Some(&format!("{vms}/a.sock"))).is_ok());
}

#[test]
fn a_symlinked_parent_is_refused_even_when_it_leads_to_an_allowed_dir() {
    let t = tempfile::tempdir().unwrap();
    let d = dirs(t.path());
    std::os::unix::fs::symlink(t.path().join("vms"), t.path().join("link")).unwrap();
    let e = d
        .resolve("x", Some(&text(&t.path().join("link/a.sock"))))
        .unwrap_err();
    assert!(e.to_string().contains("symlink"), "{e}");
}

#[test]
fn weftds_own_files_are_never_a_socket_name() {
    let t = tempfile::tempdir().unwrap();
    let d = dirs(t.path());
    let e = d
        .resolve("x", Some(&text(&t.path().join("vms/weftd.sock"))))
        .unwrap_err();
    assert!(e.to_string().contains("weftd's own files"), "{e}");
}

#[test]
fn sockets_are_compared_by_directory_identity_and_name() {
    let t = tempfile::tempdir().unwrap();
    let d = dirs(t.path());
    let by_default = d.resolve("br0-vm1.sock", None).unwrap();
    let by_path = d
        .resolve("y", Some(&text(&t.path().join("vhost/br0-vm1.sock"))))
        .unwrap();
    assert_eq!(by_default.key(), by_path.key());
    let other = d
        .resolve("y", Some(&text(&t.path().join("vms/br0-vm1.sock"))))
        .unwrap();
    assert_ne!(by_default.key(), other.key());
}

#[test]
fn configured_dirs_that_are_symlinks_relative_or_writable_by_others_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let default = t.path().join("vhost");
    std::fs::create_dir(&default).unwrap();
    std::fs::create_dir(t.path().join("real")).unwrap();
    std::os::unix::fs::symlink(t.path().join("real"), t.path().join("link")).unwrap();
    let e = SocketDirs::open(&default, &[t.path().join("link")], &[]).unwrap_err();
    assert!(e.to_string().contains("symlink"), "{e}");
    let e = SocketDirs::open(&default, &[PathBuf::from("relative")], &[]).unwrap_err();
    assert!(e.to_string().contains("absolute"), "{e}");
    let open = t.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = SocketDirs::open(&default, std::slice::from_ref(&open), &[]).unwrap_err();
    assert!(e.to_string().contains("sticky"), "{e}");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
    assert!(SocketDirs::open(&default, &[open], &[]).is_ok());
    let e = SocketDirs::open(&default, &[t.path().join("absent")], &[]).unwrap_err();
    assert!(e.to_string().contains("absent"), "{e}");
}
