//! A thousand hostile vhost-user frontends against a real weftd: each connection to one
//! port's socket sends one kind of abuse (garbage, cut messages, huge sizes, descriptors where
//! none belong, memory tables of every shape, rings set up and abandoned half-way), then
//! vanishes. Throughout, two weft-client endpoints on two other ports of the same switch
//! exchange frames, every one of which must arrive; at the end weftd holds as many file
//! descriptors and memory mappings as before the thousand, and its resident memory has not
//! grown beyond a small bound.
//!
//! Needs nothing but weftd and memfds (no root, no hugepages).

#[allow(dead_code)] // this test sends and receives UDP only
#[path = "common/client_endpoint.rs"]
mod client_endpoint;
mod common;

use std::io::{IoSlice, Read, Write};
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use client_endpoint::{udp_frame, ClientEndpoint};
use common::weftd::Weftd;
use common::{code, stderr};
use nix::sys::memfd::{memfd_create, MFdFlags};
use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};
use vmm_sys_util::eventfd::EventFd;

const CONNECTIONS: usize = 1000;
const WARM_UP: usize = 100;
/// Resident memory weftd may gain over the thousand connections: allocator slack, not a
/// leak (a leak of one page per connection would be 4 MiB).
const RSS_SLACK_KIB: u64 = 2048;

const VERSION: u32 = 1;
const GET_FEATURES: u32 = 1;
const SET_FEATURES: u32 = 2;
const SET_OWNER: u32 = 3;
const SET_MEM_TABLE: u32 = 5;
const SET_VRING_NUM: u32 = 8;
const SET_VRING_ADDR: u32 = 9;
const SET_VRING_BASE: u32 = 10;
const SET_VRING_KICK: u32 = 12;
const SET_VRING_CALL: u32 = 13;
const PAGE: u64 = 4096;

/// One message: header, body, and `fds` passed along (SCM_RIGHTS).
fn send(sock: &UnixStream, request: u32, body: &[u8], fds: &[RawFd]) {
    let mut bytes = Vec::with_capacity(12 + body.len());
    let size = u32::try_from(body.len()).unwrap();
    for word in [request, VERSION, size] {
        bytes.extend_from_slice(&word.to_le_bytes());
    }
    bytes.extend_from_slice(body);
    let rights = [ControlMessage::ScmRights(fds)];
    let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &rights };
    // weftd may have hung up already: that is an answer too.
    let _ = sendmsg::<()>(
        sock.as_raw_fd(),
        &[IoSlice::new(&bytes)],
        cmsgs,
        MsgFlags::MSG_NOSIGNAL,
        None,
    );
}

fn memfd(len: u64) -> OwnedFd {
    let fd = memfd_create("weft-hostile-e2e", MFdFlags::MFD_CLOEXEC).unwrap();
    nix::unistd::ftruncate(&fd, i64::try_from(len).unwrap()).unwrap();
    fd
}

fn mem_table(regions: &[(u64, u64, u64, u64)]) -> Vec<u8> {
    let mut b = u32::try_from(regions.len()).unwrap().to_le_bytes().to_vec();
    b.extend_from_slice(&[0; 4]);
    for &(gpa, size, va, off) in regions {
        for v in [gpa, size, va, off] {
            b.extend_from_slice(&v.to_le_bytes());
        }
    }
    b
}

fn pair(a: u32, b: u32) -> Vec<u8> {
    let mut v = a.to_le_bytes().to_vec();
    v.extend_from_slice(&b.to_le_bytes());
    v
}

fn ring_addr(index: u32, desc: u64, used: u64, avail: u64) -> Vec<u8> {
    let mut b = pair(index, 0);
    for v in [desc, used, avail, 0] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b
}

/// SET_OWNER, GET_FEATURES (its answer read) and SET_FEATURES with every offered bit.
fn negotiate(sock: &mut UnixStream) {
    send(sock, SET_OWNER, &[], &[]);
    send(sock, GET_FEATURES, &[], &[]);
    let mut reply = [0u8; 20];
    let offered = match sock.read_exact(&mut reply) {
        Ok(()) => u64::from_le_bytes(reply[12..20].try_into().unwrap()),
        Err(_) => return,
    };
    send(sock, SET_FEATURES, &offered.to_le_bytes(), &[]);
}

/// A memory table of one good 64 KiB memfd region at guest address 0.
fn good_table(sock: &UnixStream) {
    let m = memfd(16 * PAGE);
    let table = mem_table(&[(0, 16 * PAGE, 0x7f00_0000_0000, 0)]);
    send(sock, SET_MEM_TABLE, &table, &[m.as_raw_fd()]);
}

/// The abuse of connection `i`.
fn abuse(i: usize, sock: &mut UnixStream) {
    match i % 14 {
        0 => {
            let _ = sock.write_all(&[0xa5; 333]);
        }
        1 => {
            let _ = sock.write_all(&SET_OWNER.to_le_bytes()[..3]);
        }
        2 => {
            let mut h = Vec::new();
            for w in [SET_MEM_TABLE, VERSION, u32::MAX] {
                h.extend_from_slice(&w.to_le_bytes());
            }
            let _ = sock.write_all(&h);
        }
        3 => {
            let e = EventFd::new(0).unwrap();
            let m = memfd(PAGE);
            send(sock, GET_FEATURES, &[], &[e.as_raw_fd(), m.as_raw_fd()]);
        }
        4 => {
            negotiate(sock);
            good_table(sock);
        }
        5 => {
            negotiate(sock);
            good_table(sock);
            good_table(sock);
            good_table(sock);
        }
        6 => {
            negotiate(sock);
            let files: Vec<_> = (0..8).map(|_| memfd(PAGE)).collect();
            let regions: Vec<_> = (0..8u64)
                .map(|k| (k * PAGE, PAGE, 0x1000_0000 + k * PAGE, 0))
                .collect();
            let fds: Vec<_> = files.iter().map(AsRawFd::as_raw_fd).collect();
            send(sock, SET_MEM_TABLE, &mem_table(&regions), &fds);
        }
        7 => {
            negotiate(sock);
            let m = memfd(PAGE);
            send(
                sock,
                SET_MEM_TABLE,
                &mem_table(&[(0, 1 << 40, 0, 0)]),
                &[m.as_raw_fd()],
            );
        }
        8 => {
            // A ring set up in full and abandoned with its frontend.
            negotiate(sock);
            good_table(sock);
            send(sock, SET_VRING_NUM, &pair(1, 256), &[]);
            send(sock, SET_VRING_BASE, &pair(1, 0), &[]);
            send(
                sock,
                SET_VRING_ADDR,
                &ring_addr(1, 0x7f00_0000_0000, 0x7f00_0000_2000, 0x7f00_0000_1000),
                &[],
            );
            let (kick, call) = (EventFd::new(0).unwrap(), EventFd::new(0).unwrap());
            send(
                sock,
                SET_VRING_CALL,
                &1u64.to_le_bytes(),
                &[call.as_raw_fd()],
            );
            send(
                sock,
                SET_VRING_KICK,
                &1u64.to_le_bytes(),
                &[kick.as_raw_fd()],
            );
        }
        9 => {
            negotiate(sock);
            let m = memfd(PAGE);
            send(sock, SET_VRING_CALL, &0u64.to_le_bytes(), &[m.as_raw_fd()]);
        }
        10 => {
            negotiate(sock);
            let e = EventFd::new(0).unwrap();
            send(sock, SET_VRING_KICK, &40u64.to_le_bytes(), &[e.as_raw_fd()]);
        }
        11 => {
            // Two regions of one file over the same pages.
            negotiate(sock);
            let m = memfd(4 * PAGE);
            let table = mem_table(&[
                (0, 2 * PAGE, 0x1000_0000, 0),
                (0x10_0000, 2 * PAGE, 0x2000_0000, PAGE),
            ]);
            send(sock, SET_MEM_TABLE, &table, &[m.as_raw_fd(), m.as_raw_fd()]);
        }
        12 => {
            // A message cut after its header: weftd must not wait for the rest for ever.
            let mut h = Vec::new();
            for w in [SET_VRING_NUM, VERSION, 8] {
                h.extend_from_slice(&w.to_le_bytes());
            }
            let _ = sock.write_all(&h);
        }
        _ => {} // connect and hang up at once
    }
}

/// Open descriptors of process `pid`.
fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// Memory mappings of process `pid`.
fn map_count(pid: u32) -> usize {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap()
        .lines()
        .count()
}

/// Resident memory of process `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

/// weftd's descriptors and mappings once they stop changing (the port lets go of a
/// connection's memory and descriptors as it takes the next one, or sees it gone), or when
/// they equal `want`; at most 10 s.
fn steady(pid: u32, want: Option<(usize, usize)>) -> (usize, usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let (mut last, mut same) = ((0, 0), 0);
    loop {
        let now = (fd_count(pid), map_count(pid));
        same = if now == last { same + 1 } else { 0 };
        last = now;
        if Some(now) == want || (want.is_none() && same >= 10) || Instant::now() > deadline {
            return now;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn connect_hostile(path: &Path) -> UnixStream {
    let s = UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    s.set_write_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    s
}

#[test]
fn a_thousand_hostile_frontends_leave_weftd_flat_and_its_other_ports_forwarding() {
    let weftd = Weftd::with_vhost_ports_a_and_b();
    let o = weftd.weft(&["port", "add", "br0:hostile", "vhost-user"]);
    assert_eq!(code(&o), 0, "{}\n{}", stderr(&o), weftd.log());
    let pid = weftd.pid();
    let hostile = weftd.vhost_socket("hostile");

    let a_addr = ([2, 0, 0, 0, 0, 0xa], Ipv4Addr::new(10, 77, 0, 1));
    let b_addr = ([2, 0, 0, 0, 0, 0xb], Ipv4Addr::new(10, 77, 0, 2));
    let mut a = ClientEndpoint::connect(&weftd.vhost_socket("a"), a_addr.0, a_addr.1);
    let mut b = ClientEndpoint::connect(&weftd.vhost_socket("b"), b_addr.0, b_addr.1);
    let mut exchange = |round: usize| {
        let payload = format!("round {round}");
        let frame = udp_frame(a_addr, b_addr, 7777, payload.as_bytes());
        a.send(&frame);
        assert!(
            b.receives(&frame, Duration::from_secs(2)),
            "port b missed frame {round} from a while hostile frontends connected:\n{}",
            weftd.log()
        );
    };

    let mut baseline = None;
    for i in 0..WARM_UP + CONNECTIONS {
        if i == WARM_UP {
            // Measured once the warm-up's allocations (thread stacks, buffers) are made.
            exchange(i);
            let (fds, maps) = steady(pid, None);
            baseline = Some((fds, maps, rss_kib(pid)));
        }
        let mut sock = connect_hostile(&hostile);
        abuse(i, &mut sock);
        drop(sock);
        if i % 10 == 0 {
            exchange(i);
        }
    }
    let (fds, maps, rss) = baseline.unwrap();
    // A well-behaved frontend last: the hostile port itself still serves.
    let last = ClientEndpoint::connect(&hostile, [2, 0, 0, 0, 0, 0xc], Ipv4Addr::new(10, 77, 0, 3));
    drop(last);
    let (fds_after, maps_after) = steady(pid, Some((fds, maps)));
    let rss_after = rss_kib(pid);
    eprintln!(
        "weftd after {CONNECTIONS} hostile connections: fds {fds} -> {fds_after}, \
         mappings {maps} -> {maps_after}, RSS {rss} -> {rss_after} KiB; \
         {} frames forwarded between a and b meanwhile",
        CONNECTIONS / 10 + 2
    );
    assert_eq!(
        fds_after,
        fds,
        "weftd's open descriptors grew:\n{}",
        weftd.log()
    );
    assert_eq!(
        maps_after,
        maps,
        "weftd's memory mappings grew:\n{}",
        weftd.log()
    );
    assert!(
        rss_after <= rss + RSS_SLACK_KIB,
        "weftd's resident memory grew from {rss} to {rss_after} KiB"
    );
    exchange(usize::MAX);
}
