//! How a guest's frames reach the switch, as weftd's configuration says: lent where they lie
//! in guest memory by default, copied into weftd's memory first with `[vhost]
//! lend_guest_memory = false`. Two weft-client endpoints on vhost-user ports of a real weftd
//! exchange frames; `weft port show` counts how each arrived, and every frame arrives intact
//! either way.
//!
//! Needs nothing but weftd and memfds (no root, no hugepages).

#[allow(dead_code)] // this test sends and receives UDP only
#[path = "common/client_endpoint.rs"]
mod client_endpoint;
mod common;

use std::net::Ipv4Addr;
use std::time::Duration;

use client_endpoint::{udp_frame, ClientEndpoint};
use common::weftd::Weftd;
use common::{code, stderr};

const FRAMES: u64 = 50;

/// Sends `FRAMES` UDP frames from port a's endpoint to port b's, each of which must arrive
/// unchanged; then port a's (lent, bounced) counters.
fn exchange(weftd: &Weftd) -> (u64, u64) {
    for port in ["a", "b"] {
        let o = weftd.weft(&["port", "add", &format!("br0:{port}"), "vhost-user"]);
        assert_eq!(code(&o), 0, "{}\n{}", stderr(&o), weftd.log());
    }
    let a_addr = ([2, 0, 0, 0, 0, 0xa], Ipv4Addr::new(10, 78, 0, 1));
    let b_addr = ([2, 0, 0, 0, 0, 0xb], Ipv4Addr::new(10, 78, 0, 2));
    let mut a = ClientEndpoint::connect(&weftd.vhost_socket("a"), a_addr.0, a_addr.1);
    let mut b = ClientEndpoint::connect(&weftd.vhost_socket("b"), b_addr.0, b_addr.1);
    for i in 0..FRAMES {
        let frame = udp_frame(a_addr, b_addr, 7000, format!("frame {i}").as_bytes());
        a.send(&frame);
        assert!(
            b.receives(&frame, Duration::from_secs(2)),
            "frame {i} did not arrive intact:\n{}",
            weftd.log()
        );
    }
    (
        weftd.device_counter("a", "vhost_from_guest_lent"),
        weftd.device_counter("a", "vhost_from_guest_bounced"),
    )
}

#[test]
fn a_guests_frames_are_lent_to_the_switch_by_default() {
    let weftd = Weftd::start();
    let (lent, bounced) = exchange(&weftd);
    assert_eq!((lent, bounced), (FRAMES, 0));
}

#[test]
fn a_weftd_told_not_to_lend_guest_memory_copies_every_frame_first() {
    let weftd = Weftd::start_with(Some("[vhost]\nlend_guest_memory = false\n"));
    let (lent, bounced) = exchange(&weftd);
    assert_eq!((lent, bounced), (0, FRAMES));
}
