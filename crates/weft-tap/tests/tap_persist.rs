//! A TAP made persistent outlives its queue and keeps its address; attached again, it is the
//! same device; made non-persistent, it goes with its last queue. Needs root (prints SKIP
//! otherwise).

mod common;

use std::process::Command;

use weft_tap::tap::{device_info, set_persistent};
use weft_tap::{Tap, TapOptions};

fn link_exists(name: &str) -> bool {
    Command::new("ip")
        .args(["link", "show", name])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn address_of(name: &str) -> String {
    let o = Command::new("ip")
        .args(["-o", "-4", "addr", "show", "dev", name])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_persistent_tap_outlives_its_queue_with_its_address_and_goes_once_released() {
    if !common::lab::can_run(
        "a_persistent_tap_outlives_its_queue_with_its_address_and_goes_once_released",
    ) {
        return;
    }
    let _serial = common::lab::serial();
    let name = common::lab::unique("pst");
    let tap = Tap::open(&TapOptions::new(&name)).unwrap();
    let queue = tap.into_queues().remove(0);
    let info = device_info(queue.fd()).unwrap();
    assert_eq!(info.name, name);
    assert!(!info.persistent && info.vnet_hdr, "{info:?}");
    set_persistent(queue.fd(), true).unwrap();
    assert!(device_info(queue.fd()).unwrap().persistent);
    let added = Command::new("ip")
        .args(["addr", "add", "192.0.2.77/24", "dev", &name])
        .status()
        .unwrap();
    assert!(added.success());
    drop(queue);
    assert!(link_exists(&name), "a persistent TAP went with its queue");
    assert!(address_of(&name).contains("192.0.2.77/24"));

    // Attached again: the same device, address and all.
    let again = Tap::open(&TapOptions::new(&name)).unwrap();
    let queue = again.into_queues().remove(0);
    assert!(device_info(queue.fd()).unwrap().persistent);
    assert!(address_of(&name).contains("192.0.2.77/24"));
    set_persistent(queue.fd(), false).unwrap();
    drop(queue);
    assert!(!link_exists(&name), "a released TAP stayed");
}

#[test]
fn device_info_refuses_a_descriptor_that_is_no_tap() {
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    assert!(device_info(std::os::fd::AsFd::as_fd(&sock)).is_err());
}
