//! A hostile frontend speaking raw vhost-user (80 scenarios): malformed and out-of-range
//! messages, requests for features never offered, memory of every wrong shape, rings changed
//! or abandoned while they run, wrong descriptor counts, truncated messages. After each one
//! the port still takes a well-behaved frontend, a port beside it keeps carrying traffic, and
//! no descriptor the hostile frontend sent stays open.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;

use super::tests::{socket_path, Guest};
use super::*;
use crate::tests::testutil::ether_frame;
use crate::vring::TX_QUEUE;
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};
use weft_switch::{PortRx, RxBatch};

const VERSION: u32 = 1;
const NEED_REPLY: u32 = 0x8;
const REPLY: u32 = 0x4;

mod req {
    pub(super) const GET_FEATURES: u32 = 1;
    pub(super) const SET_FEATURES: u32 = 2;
    pub(super) const SET_OWNER: u32 = 3;
    pub(super) const SET_MEM_TABLE: u32 = 5;
    pub(super) const SET_LOG_BASE: u32 = 6;
    pub(super) const SET_VRING_NUM: u32 = 8;
    pub(super) const SET_VRING_ADDR: u32 = 9;
    pub(super) const SET_VRING_BASE: u32 = 10;
    pub(super) const GET_VRING_BASE: u32 = 11;
    pub(super) const SET_VRING_KICK: u32 = 12;
    pub(super) const SET_VRING_CALL: u32 = 13;
    pub(super) const SET_PROTOCOL_FEATURES: u32 = 16;
    pub(super) const GET_QUEUE_NUM: u32 = 17;
    pub(super) const SET_VRING_ENABLE: u32 = 18;
    pub(super) const SET_CONFIG: u32 = 25;
    pub(super) const RESET_OWNER: u32 = 4;
    pub(super) const SET_LOG_FD: u32 = 7;
    pub(super) const SET_VRING_ERR: u32 = 14;
    pub(super) const SET_BACKEND_REQ_FD: u32 = 21;
    pub(super) const IOTLB_MSG: u32 = 22;
    pub(super) const SET_VRING_ENDIAN: u32 = 23;
    pub(super) const GET_CONFIG: u32 = 24;
    pub(super) const POSTCOPY_ADVISE: u32 = 28;
    pub(super) const SET_INFLIGHT_FD: u32 = 32;
    pub(super) const ADD_MEM_REG: u32 = 37;
    pub(super) const REM_MEM_REG: u32 = 38;
    pub(super) const SET_STATUS: u32 = 39;
    pub(super) const SEND_RARP: u32 = 19;
    pub(super) const NET_SET_MTU: u32 = 20;
}

/// A connection speaking raw bytes.
struct Raw(UnixStream);

impl Raw {
    fn connect(path: &Path) -> Raw {
        let s = UnixStream::connect(path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        Raw(s)
    }

    /// Sends one message: header, body, and `fds` as SCM_RIGHTS.
    fn send(&mut self, request: u32, flags: u32, body: &[u8], fds: &[RawFd]) {
        let size = u32::try_from(body.len()).unwrap();
        let mut bytes = Vec::new();
        for word in [request, flags, size] {
            bytes.extend_from_slice(&word.to_le_bytes());
        }
        bytes.extend_from_slice(body);
        // The port may have hung up already: that is an answer too.
        let _ = send_with_fds(&self.0, &bytes, fds);
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        let _ = self.0.write_all(bytes);
    }

    /// True when the port closed the connection (or sent nothing within the timeout and
    /// the connection is still up: false).
    fn closed_by_port(&mut self) -> bool {
        let mut buf = [0u8; 256];
        loop {
            match self.0.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                Err(_) => return true,
            }
        }
    }
}

/// sendmsg with descriptors attached.
fn send_with_fds(sock: &UnixStream, data: &[u8], fds: &[RawFd]) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: data.as_ptr().cast_mut().cast(),
        iov_len: data.len(),
    };
    let fd_bytes = u32::try_from(std::mem::size_of_val(fds)).unwrap();
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(fd_bytes) } as usize;
    let mut control = vec![0u64; space.div_ceil(8)];
    // SAFETY: msghdr is plain old data; all zeroes is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space;
        // SAFETY: the control buffer is `space` bytes, enough for one header and `fds`, and
        // aligned for cmsghdr (u64 words); CMSG_FIRSTHDR returns its start.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(fd_bytes) as usize;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr().cast::<u8>(),
                libc::CMSG_DATA(cmsg),
                std::mem::size_of_val(fds),
            );
        }
    }
    // SAFETY: `msg` points at live buffers (iov, control) for the duration of the call.
    let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

fn u64_body(v: u64) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

fn state_body(index: u32, num: u32) -> Vec<u8> {
    let mut b = index.to_le_bytes().to_vec();
    b.extend_from_slice(&num.to_le_bytes());
    b
}

fn addr_body(index: u32, flags: u32, desc: u64, used: u64, avail: u64) -> Vec<u8> {
    let mut b = index.to_le_bytes().to_vec();
    b.extend_from_slice(&flags.to_le_bytes());
    for v in [desc, used, avail, 0] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b
}

/// A memory table body: `(gpa, size, user_addr, offset)` per region.
fn mem_body(regions: &[(u64, u64, u64, u64)]) -> Vec<u8> {
    mem_body_claiming(u32::try_from(regions.len()).unwrap(), regions)
}

fn mem_body_claiming(count: u32, regions: &[(u64, u64, u64, u64)]) -> Vec<u8> {
    let mut b = count.to_le_bytes().to_vec();
    b.extend_from_slice(&0u32.to_le_bytes());
    for (gpa, size, va, off) in regions {
        for v in [gpa, size, va, off] {
            b.extend_from_slice(&v.to_le_bytes());
        }
    }
    b
}

/// Value an eventfd holds so that it can be found in /proc/self/fdinfo.
const TAG: u64 = 0x0bad_f00d_5eed;

fn tagged_eventfd() -> EventFd {
    let e = EventFd::new(EFD_NONBLOCK).unwrap();
    e.write(TAG).unwrap();
    e
}

fn tagged_memfd(len: u64) -> std::fs::File {
    let name = c"weft-hostile";
    // SAFETY: a valid C string; the result is checked.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0);
    // SAFETY: a fresh descriptor nobody else owns.
    let f = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    f.set_len(len).unwrap();
    f
}

/// Open descriptors of this process the hostile frontend created.
fn hostile_fds() -> usize {
    let count_line = format!("eventfd-count: {TAG:>16x}");
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(std::result::Result::ok)
        .filter(|e| {
            let link = std::fs::read_link(e.path()).unwrap_or_default();
            if link.to_string_lossy().contains("memfd:weft-hostile") {
                return true;
            }
            let info = format!("/proc/self/fdinfo/{}", e.file_name().to_string_lossy());
            std::fs::read_to_string(info)
                .map(|s| s.lines().any(|l| l.replace('\t', " ") == count_line))
                .unwrap_or(false)
        })
        .count()
}

/// One hostile exchange on a fresh connection.
type Attack = fn(&mut Raw);

fn negotiate(r: &mut Raw) {
    r.send(req::SET_OWNER, VERSION, &[], &[]);
    r.send(req::GET_FEATURES, VERSION, &[], &[]);
    let mut reply = [0u8; 20];
    r.0.read_exact(&mut reply).unwrap();
    let offered = u64::from_le_bytes(reply[12..20].try_into().unwrap());
    r.send(req::SET_FEATURES, VERSION, &u64_body(offered), &[]);
}

const PAGE: u64 = 4096;

/// Frontend address of the one region [`ring_ready`] maps.
const RING_VA: u64 = 0x7f00_0000_0000;

/// Negotiates, maps one 64 KiB region and sets up the guest's transmit queue (1) in full:
/// size 256, base 0, rings at the region's start, call and kick eventfds. The queue runs.
fn ring_ready(r: &mut Raw) -> (std::fs::File, EventFd, EventFd) {
    negotiate(r);
    let f = tagged_memfd(16 * PAGE);
    let body = mem_body(&[(0, 16 * PAGE, RING_VA, 0)]);
    r.send(req::SET_MEM_TABLE, VERSION, &body, &[f.as_raw_fd()]);
    r.send(req::SET_VRING_NUM, VERSION, &state_body(1, 256), &[]);
    r.send(req::SET_VRING_BASE, VERSION, &state_body(1, 0), &[]);
    let addrs = addr_body(1, 0, RING_VA, RING_VA + 2 * PAGE, RING_VA + PAGE);
    r.send(req::SET_VRING_ADDR, VERSION, &addrs, &[]);
    let (call, kick) = (tagged_eventfd(), tagged_eventfd());
    r.send(
        req::SET_VRING_CALL,
        VERSION,
        &u64_body(1),
        &[call.as_raw_fd()],
    );
    r.send(
        req::SET_VRING_KICK,
        VERSION,
        &u64_body(1),
        &[kick.as_raw_fd()],
    );
    (f, call, kick)
}

/// As [`ring_ready`], with the protocol features of a live migration (`LOG_SHMFD`, `RARP`).
fn migration_ready(r: &mut Raw) -> (std::fs::File, EventFd, EventFd) {
    let ring = ring_ready(r);
    r.send(req::SET_PROTOCOL_FEATURES, VERSION, &u64_body(0b110), &[]);
    ring
}

/// A `SET_LOG_BASE` body: size and offset.
fn log_body(size: u64, offset: u64) -> Vec<u8> {
    [size.to_le_bytes(), offset.to_le_bytes()].concat()
}

/// What QEMU sends to start logging: a log for the ring's 64 KiB, `LOG_ALL`, the ring's
/// addresses again with the log flag.
fn start_logging(r: &mut Raw) -> std::fs::File {
    let log = tagged_memfd(PAGE);
    r.send(
        req::SET_LOG_BASE,
        VERSION,
        &log_body(8, 0),
        &[log.as_raw_fd()],
    );
    r.send(req::GET_FEATURES, VERSION, &[], &[]);
    let mut reply = [0u8; 20];
    r.0.read_exact(&mut reply).unwrap();
    let offered = u64::from_le_bytes(reply[12..20].try_into().unwrap());
    r.send(
        req::SET_FEATURES,
        VERSION,
        &u64_body(offered | 1 << 26),
        &[],
    );
    let mut addrs = addr_body(1, 1, RING_VA, RING_VA + 2 * PAGE, RING_VA + PAGE);
    addrs[32..40].copy_from_slice(&(2 * PAGE).to_le_bytes());
    r.send(req::SET_VRING_ADDR, VERSION, &addrs, &[]);
    log
}

/// A descriptor of something that is neither a memory file nor an eventfd: a pipe's read end.
fn tagged_pipe() -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
    nix::unistd::pipe().unwrap()
}

fn attacks() -> Vec<(&'static str, Attack)> {
    vec![
        ("unknown request code", |r| r.send(9999, VERSION, &[], &[])),
        ("oversized message", |r| {
            let mut h = Vec::new();
            for w in [req::SET_OWNER, VERSION, 0x10_0000] {
                h.extend_from_slice(&w.to_le_bytes());
            }
            r.send_raw(&h);
        }),
        ("truncated header", |r| r.send_raw(&[1, 0, 0])),
        ("truncated body", |r| {
            let mut h = Vec::new();
            for w in [req::SET_FEATURES, VERSION, 8] {
                h.extend_from_slice(&w.to_le_bytes());
            }
            h.extend_from_slice(&[0, 0, 0]);
            r.send_raw(&h);
        }),
        ("wrong protocol version", |r| {
            r.send(req::SET_OWNER, 2, &[], &[])
        }),
        ("reply flag on a request", |r| {
            r.send(req::GET_FEATURES, VERSION | REPLY, &[], &[])
        }),
        ("body of the wrong size", |r| {
            r.send(req::SET_VRING_NUM, VERSION, &[1, 2, 3], &[])
        }),
        ("descriptor on a message that takes none", |r| {
            let e = tagged_eventfd();
            r.send(req::GET_FEATURES, VERSION, &[], &[e.as_raw_fd()]);
        }),
        ("features never offered", |r| {
            r.send(
                req::SET_FEATURES,
                VERSION | NEED_REPLY,
                &u64_body(1 << 63),
                &[],
            )
        }),
        ("protocol features never offered", |r| {
            r.send(
                req::SET_PROTOCOL_FEATURES,
                VERSION,
                &u64_body(u64::MAX),
                &[],
            )
        }),
        ("queue size zero", |r| {
            negotiate(r);
            r.send(req::SET_VRING_NUM, VERSION, &state_body(1, 0), &[]);
        }),
        ("queue size not a power of two", |r| {
            negotiate(r);
            r.send(req::SET_VRING_NUM, VERSION, &state_body(1, 1000), &[]);
        }),
        ("queue size above 32768", |r| {
            negotiate(r);
            r.send(req::SET_VRING_NUM, VERSION, &state_body(1, 65_536), &[]);
        }),
        ("queue index out of range", |r| {
            negotiate(r);
            r.send(req::SET_VRING_ADDR, VERSION, &addr_body(7, 0, 0, 0, 0), &[]);
        }),
        ("queue index just past the port's two pairs", |r| {
            negotiate(r);
            r.send(req::SET_VRING_NUM, VERSION, &state_body(4, 256), &[]);
        }),
        ("enable of a queue past the port's pairs", |r| {
            negotiate(r);
            r.send(req::SET_VRING_ENABLE, VERSION, &state_body(5, 1), &[]);
        }),
        ("kick for a queue past the port's pairs", |r| {
            negotiate(r);
            let e = tagged_eventfd();
            r.send(req::SET_VRING_KICK, VERSION, &u64_body(4), &[e.as_raw_fd()]);
        }),
        ("ring base above 65535", |r| {
            negotiate(r);
            r.send(req::SET_VRING_BASE, VERSION, &state_body(0, 70_000), &[]);
        }),
        ("vring base of a queue that does not exist", |r| {
            negotiate(r);
            r.send(req::GET_VRING_BASE, VERSION, &state_body(300, 0), &[]);
        }),
        ("enable value other than 0 or 1", |r| {
            negotiate(r);
            r.send(req::SET_VRING_ENABLE, VERSION, &state_body(0, 2), &[]);
        }),
        ("empty memory table", |r| {
            negotiate(r);
            r.send(req::SET_MEM_TABLE, VERSION, &mem_body(&[]), &[]);
        }),
        ("memory table of nine regions", |r| {
            negotiate(r);
            let regions: Vec<_> = (0..9).map(|i| (i * PAGE, PAGE, i * PAGE, 0)).collect();
            let files: Vec<_> = (0..9).map(|_| tagged_memfd(PAGE)).collect();
            let fds: Vec<_> = files.iter().map(|f| f.as_raw_fd()).collect();
            r.send(req::SET_MEM_TABLE, VERSION, &mem_body(&regions), &fds);
        }),
        ("memory table claiming more regions than it holds", |r| {
            negotiate(r);
            let f = tagged_memfd(PAGE);
            let body = mem_body_claiming(4, &[(0, PAGE, 0, 0)]);
            r.send(req::SET_MEM_TABLE, VERSION, &body, &[f.as_raw_fd()]);
        }),
        ("fewer descriptors than regions", |r| {
            negotiate(r);
            let f = tagged_memfd(2 * PAGE);
            let body = mem_body(&[(0, PAGE, 0, 0), (PAGE, PAGE, PAGE, PAGE)]);
            r.send(req::SET_MEM_TABLE, VERSION, &body, &[f.as_raw_fd()]);
        }),
        ("overlapping regions", |r| {
            negotiate(r);
            let (a, b) = (tagged_memfd(2 * PAGE), tagged_memfd(2 * PAGE));
            let body = mem_body(&[(0, 2 * PAGE, 0, 0), (PAGE, 2 * PAGE, 0x10_0000, 0)]);
            r.send(
                req::SET_MEM_TABLE,
                VERSION,
                &body,
                &[a.as_raw_fd(), b.as_raw_fd()],
            );
        }),
        ("region larger than its file", |r| {
            negotiate(r);
            let f = tagged_memfd(PAGE);
            let body = mem_body(&[(0, 1 << 30, 0, 0)]);
            r.send(req::SET_MEM_TABLE, VERSION, &body, &[f.as_raw_fd()]);
        }),
        ("region wrapping the address space", |r| {
            negotiate(r);
            let f = tagged_memfd(PAGE);
            let body = mem_body(&[(u64::MAX - 100, PAGE, 0, 0)]);
            r.send(req::SET_MEM_TABLE, VERSION, &body, &[f.as_raw_fd()]);
        }),
        ("ring outside guest memory", |r| {
            negotiate(r);
            let f = tagged_memfd(16 * PAGE);
            let body = mem_body(&[(0, 16 * PAGE, 0x7f00_0000_0000, 0)]);
            r.send(req::SET_MEM_TABLE, VERSION, &body, &[f.as_raw_fd()]);
            r.send(req::SET_VRING_NUM, VERSION, &state_body(1, 256), &[]);
            let addrs = addr_body(1, 0, 0x1000, 0x2000, 0x3000);
            r.send(req::SET_VRING_ADDR, VERSION, &addrs, &[]);
            let e = tagged_eventfd();
            r.send(req::SET_VRING_KICK, VERSION, &u64_body(1), &[e.as_raw_fd()]);
        }),
        ("kick flagged without a descriptor but with one", |r| {
            negotiate(r);
            let e = tagged_eventfd();
            r.send(
                req::SET_VRING_KICK,
                VERSION,
                &u64_body(0x101),
                &[e.as_raw_fd()],
            );
        }),
        ("call that is a memfd, not an eventfd", |r| {
            negotiate(r);
            let f = tagged_memfd(PAGE);
            r.send(req::SET_VRING_CALL, VERSION, &u64_body(0), &[f.as_raw_fd()]);
        }),
        ("queue count without multiqueue", |r| {
            r.send(req::GET_QUEUE_NUM, VERSION, &[], &[])
        }),
        ("config space never offered", |r| {
            r.send(req::SET_CONFIG, VERSION, &[0; 16], &[])
        }),
        ("dirty log never offered", |r| {
            let f = tagged_memfd(PAGE);
            r.send(req::SET_LOG_BASE, VERSION, &[0; 16], &[f.as_raw_fd()]);
        }),
        ("owner reset, then a ring set up on nothing", |r| {
            negotiate(r);
            r.send(req::RESET_OWNER, VERSION, &[], &[]);
            r.send(req::SET_VRING_NUM, VERSION, &state_body(1, 256), &[]);
            let e = tagged_eventfd();
            r.send(req::SET_VRING_KICK, VERSION, &u64_body(1), &[e.as_raw_fd()]);
        }),
        ("log descriptor never offered", |r| {
            negotiate(r);
            let e = tagged_eventfd();
            r.send(req::SET_LOG_FD, VERSION, &[], &[e.as_raw_fd()]);
        }),
        ("error descriptor that is a memfd", |r| {
            negotiate(r);
            let f = tagged_memfd(PAGE);
            r.send(req::SET_VRING_ERR, VERSION, &u64_body(1), &[f.as_raw_fd()]);
        }),
        ("backend request channel never offered", |r| {
            negotiate(r);
            let (a, _b) = UnixStream::pair().unwrap();
            r.send(req::SET_BACKEND_REQ_FD, VERSION, &[], &[a.as_raw_fd()]);
        }),
        ("IOTLB message never offered", |r| {
            negotiate(r);
            r.send(req::IOTLB_MSG, VERSION, &[0xee; 40], &[]);
        }),
        ("ring endianness (legacy) asked", |r| {
            negotiate(r);
            r.send(req::SET_VRING_ENDIAN, VERSION, &state_body(1, 1), &[]);
        }),
        ("config read with a size beyond the body", |r| {
            let mut body = 0u32.to_le_bytes().to_vec();
            body.extend_from_slice(&0xffff_ffffu32.to_le_bytes());
            body.extend_from_slice(&0u32.to_le_bytes());
            r.send(req::GET_CONFIG, VERSION | NEED_REPLY, &body, &[]);
        }),
        ("postcopy never offered", |r| {
            negotiate(r);
            r.send(req::POSTCOPY_ADVISE, VERSION, &[], &[]);
        }),
        ("inflight region never offered", |r| {
            negotiate(r);
            let f = tagged_memfd(PAGE);
            r.send(req::SET_INFLIGHT_FD, VERSION, &[0; 24], &[f.as_raw_fd()]);
        }),
        ("memory slot added never offered", |r| {
            negotiate(r);
            let f = tagged_memfd(PAGE);
            let mut body = vec![0u8; 8];
            body.extend_from_slice(&mem_body(&[(0, PAGE, 0, 0)])[8..]);
            r.send(req::ADD_MEM_REG, VERSION, &body, &[f.as_raw_fd()]);
        }),
        ("memory slot removed never offered", |r| {
            negotiate(r);
            let mut body = vec![0u8; 8];
            body.extend_from_slice(&mem_body(&[(0, PAGE, 0, 0)])[8..]);
            r.send(req::REM_MEM_REG, VERSION, &body, &[]);
        }),
        ("device status never offered", |r| {
            negotiate(r);
            r.send(req::SET_STATUS, VERSION, &u64_body(0xff), &[]);
        }),
        ("ring addresses with the logging flag", |r| {
            negotiate(r);
            let f = tagged_memfd(16 * PAGE);
            let body = mem_body(&[(0, 16 * PAGE, RING_VA, 0)]);
            r.send(req::SET_MEM_TABLE, VERSION, &body, &[f.as_raw_fd()]);
            r.send(req::SET_VRING_NUM, VERSION, &state_body(1, 256), &[]);
            let addrs = addr_body(1, 1, RING_VA, RING_VA + 2 * PAGE, RING_VA + PAGE);
            r.send(req::SET_VRING_ADDR, VERSION, &addrs, &[]);
        }),
        ("descriptor table not aligned", |r| {
            negotiate(r);
            let f = tagged_memfd(16 * PAGE);
            let body = mem_body(&[(0, 16 * PAGE, RING_VA, 0)]);
            r.send(req::SET_MEM_TABLE, VERSION, &body, &[f.as_raw_fd()]);
            r.send(req::SET_VRING_NUM, VERSION, &state_body(1, 256), &[]);
            let addrs = addr_body(1, 0, RING_VA + 1, RING_VA + 2 * PAGE, RING_VA + PAGE);
            r.send(req::SET_VRING_ADDR, VERSION, &addrs, &[]);
            let e = tagged_eventfd();
            r.send(req::SET_VRING_KICK, VERSION, &u64_body(1), &[e.as_raw_fd()]);
        }),
        ("used ring across the end of its region", |r| {
            negotiate(r);
            let f = tagged_memfd(4 * PAGE);
            let body = mem_body(&[(0, 4 * PAGE, RING_VA, 0)]);
            r.send(req::SET_MEM_TABLE, VERSION, &body, &[f.as_raw_fd()]);
            r.send(req::SET_VRING_NUM, VERSION, &state_body(1, 256), &[]);
            let addrs = addr_body(1, 0, RING_VA, RING_VA + 4 * PAGE - 64, RING_VA + PAGE);
            r.send(req::SET_VRING_ADDR, VERSION, &addrs, &[]);
            let e = tagged_eventfd();
            r.send(req::SET_VRING_KICK, VERSION, &u64_body(1), &[e.as_raw_fd()]);
        }),
        ("region of size zero", |r| {
            negotiate(r);
            let f = tagged_memfd(PAGE);
            let body = mem_body(&[(0, 0, 0, 0)]);
            r.send(req::SET_MEM_TABLE, VERSION, &body, &[f.as_raw_fd()]);
        }),
        ("region at an unaligned file offset", |r| {
            negotiate(r);
            let f = tagged_memfd(2 * PAGE);
            let body = mem_body(&[(0, PAGE, 0, 1)]);
            r.send(req::SET_MEM_TABLE, VERSION, &body, &[f.as_raw_fd()]);
        }),
        ("region backed by a pipe", |r| {
            negotiate(r);
            let (read, _write) = tagged_pipe();
            let body = mem_body(&[(0, PAGE, 0, 0)]);
            r.send(req::SET_MEM_TABLE, VERSION, &body, &[read.as_raw_fd()]);
        }),
        ("region backed by an eventfd", |r| {
            negotiate(r);
            let e = tagged_eventfd();
            let body = mem_body(&[(0, PAGE, 0, 0)]);
            r.send(req::SET_MEM_TABLE, VERSION, &body, &[e.as_raw_fd()]);
        }),
        ("regions overlapping in frontend addresses only", |r| {
            negotiate(r);
            let (a, b) = (tagged_memfd(2 * PAGE), tagged_memfd(2 * PAGE));
            let body = mem_body(&[
                (0, 2 * PAGE, RING_VA, 0),
                (0x10_0000, 2 * PAGE, RING_VA + PAGE, 0),
            ]);
            r.send(
                req::SET_MEM_TABLE,
                VERSION,
                &body,
                &[a.as_raw_fd(), b.as_raw_fd()],
            );
        }),
        ("ring size changed while it runs", |r| {
            let _ring = ring_ready(r);
            r.send(req::SET_VRING_NUM, VERSION, &state_body(1, 64), &[]);
        }),
        ("ring base changed while it runs", |r| {
            let _ring = ring_ready(r);
            r.send(req::SET_VRING_BASE, VERSION, &state_body(1, 77), &[]);
        }),
        (
            "memory table replaced under a running ring by a smaller one",
            |r| {
                let _ring = ring_ready(r);
                let f = tagged_memfd(PAGE);
                let body = mem_body(&[(0x100_0000, PAGE, 0x1000, 0)]);
                r.send(req::SET_MEM_TABLE, VERSION, &body, &[f.as_raw_fd()]);
                let e = tagged_eventfd();
                r.send(req::SET_VRING_KICK, VERSION, &u64_body(1), &[e.as_raw_fd()]);
            },
        ),
        ("twelve descriptors on one message", |r| {
            negotiate(r);
            let fds: Vec<_> = (0..12).map(|_| tagged_eventfd()).collect();
            let raw: Vec<_> = fds.iter().map(AsRawFd::as_raw_fd).collect();
            r.send(req::SET_VRING_CALL, VERSION, &u64_body(0), &raw);
        }),
        ("kick for a ring whose addresses were never set", |r| {
            negotiate(r);
            r.send(req::SET_VRING_NUM, VERSION, &state_body(1, 256), &[]);
            let e = tagged_eventfd();
            r.send(req::SET_VRING_KICK, VERSION, &u64_body(1), &[e.as_raw_fd()]);
        }),
        ("a running ring's frontend vanishing mid-message", |r| {
            let _ring = ring_ready(r);
            let mut h = Vec::new();
            for w in [req::SET_MEM_TABLE, VERSION, 200] {
                h.extend_from_slice(&w.to_le_bytes());
            }
            h.extend_from_slice(&[0; 17]);
            r.send_raw(&h);
        }),
        ("garbage", |r| r.send_raw(&[0xff; 200])),
        ("dirty log of size zero", |r| {
            migration_ready(r);
            let f = tagged_memfd(PAGE);
            r.send(
                req::SET_LOG_BASE,
                VERSION,
                &log_body(0, 0),
                &[f.as_raw_fd()],
            );
        }),
        ("dirty log of a petabyte", |r| {
            migration_ready(r);
            let f = tagged_memfd(PAGE);
            r.send(
                req::SET_LOG_BASE,
                VERSION,
                &log_body(1 << 50, 0),
                &[f.as_raw_fd()],
            );
        }),
        ("dirty log past its file's end", |r| {
            migration_ready(r);
            let f = tagged_memfd(PAGE);
            r.send(
                req::SET_LOG_BASE,
                VERSION,
                &log_body(PAGE, 8),
                &[f.as_raw_fd()],
            );
        }),
        ("dirty log whose offset wraps", |r| {
            migration_ready(r);
            let f = tagged_memfd(PAGE);
            let body = log_body(16, u64::MAX - 8);
            r.send(req::SET_LOG_BASE, VERSION, &body, &[f.as_raw_fd()]);
        }),
        ("dirty log that is a pipe", |r| {
            migration_ready(r);
            let (read, _write) = tagged_pipe();
            r.send(
                req::SET_LOG_BASE,
                VERSION,
                &log_body(8, 0),
                &[read.as_raw_fd()],
            );
        }),
        ("dirty log without its descriptor", |r| {
            migration_ready(r);
            r.send(req::SET_LOG_BASE, VERSION, &log_body(8, 0), &[]);
        }),
        ("dirty log with two descriptors", |r| {
            migration_ready(r);
            let (a, b) = (tagged_memfd(PAGE), tagged_memfd(PAGE));
            let body = log_body(8, 0);
            r.send(
                req::SET_LOG_BASE,
                VERSION,
                &body,
                &[a.as_raw_fd(), b.as_raw_fd()],
            );
        }),
        (
            "dirty log replaced a hundred times while the ring logs",
            |r| {
                migration_ready(r);
                let _log = start_logging(r);
                for _ in 0..100 {
                    let f = tagged_memfd(PAGE);
                    r.send(
                        req::SET_LOG_BASE,
                        VERSION,
                        &log_body(8, 0),
                        &[f.as_raw_fd()],
                    );
                }
            },
        ),
        ("dirty log whose file shrinks while the ring logs", |r| {
            migration_ready(r);
            let log = start_logging(r);
            log.set_len(0).unwrap();
        }),
        (
            "logging turned on and off while the ring runs, then memory replaced",
            |r| {
                let (_f, _call, _kick) = migration_ready(r);
                let _log = start_logging(r);
                r.send(req::SET_FEATURES, VERSION, &u64_body(1 << 32), &[]);
                let f = tagged_memfd(16 * PAGE);
                let body = mem_body(&[(0, 16 * PAGE, RING_VA, 0)]);
                r.send(req::SET_MEM_TABLE, VERSION, &body, &[f.as_raw_fd()]);
            },
        ),
        ("used ring log address that wraps", |r| {
            migration_ready(r);
            let mut addrs = addr_body(1, 1, RING_VA, RING_VA + 2 * PAGE, RING_VA + PAGE);
            addrs[32..40].copy_from_slice(&(u64::MAX - 16).to_le_bytes());
            r.send(req::SET_VRING_ADDR, VERSION, &addrs, &[]);
        }),
        ("log descriptor that is a memfd", |r| {
            migration_ready(r);
            let f = tagged_memfd(PAGE);
            r.send(req::SET_LOG_FD, VERSION, &[], &[f.as_raw_fd()]);
        }),
        ("log descriptor missing", |r| {
            migration_ready(r);
            r.send(req::SET_LOG_FD, VERSION | NEED_REPLY, &[], &[]);
        }),
        ("log descriptor message with a body", |r| {
            migration_ready(r);
            let e = tagged_eventfd();
            r.send(req::SET_LOG_FD, VERSION, &u64_body(7), &[e.as_raw_fd()]);
        }),
        ("announcement never negotiated", |r| {
            negotiate(r);
            r.send(req::SEND_RARP, VERSION, &u64_body(0x5634_1200_5452), &[]);
        }),
        ("announcement of a multicast MAC", |r| {
            migration_ready(r);
            r.send(req::SEND_RARP, VERSION, &u64_body(0x0100_5e01), &[]);
        }),
        ("announcement with a short body", |r| {
            migration_ready(r);
            r.send(req::SEND_RARP, VERSION, &[0x52, 0x54, 0], &[]);
        }),
        ("announcement with a descriptor", |r| {
            migration_ready(r);
            let e = tagged_eventfd();
            r.send(
                req::SEND_RARP,
                VERSION,
                &u64_body(0x5634_1200_5452),
                &[e.as_raw_fd()],
            );
        }),
        ("announcement header cut short", |r| {
            migration_ready(r);
            r.send_raw(&req::SEND_RARP.to_le_bytes());
        }),
        ("MTU never negotiated", |r| {
            negotiate(r);
            r.send(req::NET_SET_MTU, VERSION | NEED_REPLY, &u64_body(1500), &[]);
        }),
        ("MTU with a short body", |r| {
            negotiate(r);
            r.send(req::NET_SET_MTU, VERSION, &[0xdc, 0x05], &[]);
        }),
        ("MTU with a descriptor", |r| {
            negotiate(r);
            let e = tagged_eventfd();
            r.send(req::NET_SET_MTU, VERSION, &u64_body(1500), &[e.as_raw_fd()]);
        }),
        ("MTU of 2^64 - 1", |r| {
            negotiate(r);
            r.send(
                req::NET_SET_MTU,
                VERSION | NEED_REPLY,
                &u64_body(u64::MAX),
                &[],
            );
        }),
        ("ten thousand announcements", |r| {
            migration_ready(r);
            for _ in 0..10_000 {
                r.send(req::SEND_RARP, VERSION, &u64_body(0x5634_1200_5452), &[]);
            }
        }),
    ]
}

#[test]
fn a_hostile_frontend_breaks_nothing_and_leaks_nothing() {
    let hostile_path = socket_path("hostile");
    let beside_path = socket_path("beside");
    // Two queue pairs: indexes 0..4 exist, 4 and above do not.
    let two_pairs = VhostPortConfig {
        queue_pairs: 2,
        ..VhostPortConfig::default()
    };
    let hostile_port = VhostUserPort::listen(&hostile_path, two_pairs).unwrap();
    let mut beside = VhostUserPort::listen(&beside_path, VhostPortConfig::default()).unwrap();
    let (mut rx, _tx) = beside.take_halves().unwrap();
    let mut good = Guest::connect(&beside_path);
    good.start();
    assert!(beside.wait_running(Duration::from_secs(5)));
    let attacks = attacks();
    assert!(attacks.len() >= 80, "{} scenarios", attacks.len());
    for (i, (name, attack)) in attacks.iter().enumerate() {
        let mut raw = Raw::connect(&hostile_path);
        attack(&mut raw);
        // Disconnected or not, the hostile frontend leaves now.
        let _ = raw.closed_by_port();
        drop(raw);
        // The port takes a well-behaved frontend next.
        let mut guest = Guest::connect(&hostile_path);
        guest.start();
        assert!(
            hostile_port.wait_running(Duration::from_secs(5)),
            "after {name}: {:?}",
            hostile_port.queue_status()
        );
        drop(guest);
        // The port beside carries traffic throughout.
        let f = ether_frame(1, 2, 64, u8::try_from(i).unwrap());
        good.txq.send(&[0; 12], &f, &[]);
        let mut batch = RxBatch::new(8);
        rx.receive(&mut batch);
        assert_eq!(batch.len(), 1, "beside port after {name}");
        assert_eq!(rx.frame(batch.descs()[0].handle).to_vec(), f[..]);
        rx.finish();
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while hostile_port.is_connected() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        hostile_fds(),
        0,
        "descriptors sent by the hostile frontend stay open"
    );
    assert!(beside.queue_status()[TX_QUEUE].fault.is_none());
}
