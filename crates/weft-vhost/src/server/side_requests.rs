//! The requests the `vhost` crate's parser does not dispatch (it answers them as invalid
//! messages, which would drop the frontend): `SET_LOG_FD` and `SEND_RARP` of a live
//! migration, and `NET_SET_MTU`. Each request's header is peeked before the crate reads
//! it; these are read, checked and answered here, anything else is left to the crate.

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::Mutex;

use nix::sys::socket::{recv, MsgFlags};
use vhost::vhost_user::message::FrontendReq;
use vhost::vhost_user::VhostUserProtocolFeatures;
use vmm_sys_util::sock_ctrl_msg::ScmSocket;

use super::lock;
use crate::control::Device;
use crate::memory::LogRefusal;

/// Request codes (vhost-user specification, "Front-end message types").
const SET_LOG_FD: u32 = FrontendReq::SET_LOG_FD as u32;
const SEND_RARP: u32 = FrontendReq::SEND_RARP as u32;
const NET_SET_MTU: u32 = FrontendReq::NET_SET_MTU as u32;
/// The header: request, flags, payload size (three little-endian `u32`s).
const HEADER_LEN: usize = 12;
/// Flags: the protocol version (1) in the low two bits, a reply, a reply wanted.
const VERSION_MASK: u32 = 0x3;
const VERSION: u32 = 0x1;
const REPLY: u32 = 0x4;
const NEED_REPLY: u32 = 0x8;
/// `SEND_RARP` carries the MAC in a `u64`, `NET_SET_MTU` the MTU in one; `SET_LOG_FD`
/// nothing (its descriptor aside).
const U64_PAYLOAD: usize = 8;

/// What [`serve_side_request`] did with the next request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// Not one of these (or not all of its header has arrived): the crate reads it.
    NotMine,
    /// Read and served.
    Served,
    /// Read and refused: the frontend is dropped, as for any refused request.
    Refused,
}

/// Peeks at the next request on `stream`; serves it if it is `SET_LOG_FD`, `SEND_RARP` or
/// `NET_SET_MTU`.
pub(crate) fn serve_side_request(stream: &UnixStream, device: &Mutex<Device>) -> Side {
    let mut header = [0u8; HEADER_LEN];
    let peek = MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT;
    match recv(stream.as_raw_fd(), &mut header, peek) {
        Ok(HEADER_LEN) => {}
        _ => return Side::NotMine,
    }
    let word = |i: usize| {
        let mut w = [0u8; 4];
        w.copy_from_slice(&header[4 * i..4 * i + 4]);
        u32::from_le_bytes(w)
    };
    let (request, flags, size) = (word(0), word(1), word(2));
    if request != SET_LOG_FD && request != SEND_RARP && request != NET_SET_MTU {
        return Side::NotMine;
    }
    let mut device = lock(device);
    let expected = if request == SET_LOG_FD {
        0
    } else {
        U64_PAYLOAD
    };
    let reason = if request == SEND_RARP {
        LogRefusal::BadAnnounce
    } else {
        LogRefusal::BadLogFd
    };
    let well_formed = flags & VERSION_MASK == VERSION
        && flags & REPLY == 0
        && usize::try_from(size).is_ok_and(|s| s == expected);
    if !well_formed {
        // The rest of the message is left unread: the frontend is dropped.
        refuse(&mut device, request, reason, "malformed message");
        return Side::Refused;
    }
    let mut message = [0u8; HEADER_LEN + U64_PAYLOAD];
    let len = HEADER_LEN + expected;
    let Some(buf) = message.get_mut(..len) else {
        return Side::Refused;
    };
    let Some((read, mut files)) = recv_with_files(stream, buf) else {
        return Side::Refused;
    };
    // One descriptor at most belongs to either request; any other is closed here.
    let file = (files.len() == 1).then(|| files.pop()).flatten();
    if !files.is_empty() {
        refuse(&mut device, request, reason, "more than one descriptor");
        return Side::Refused;
    }
    if read < len {
        let Some(rest) = buf.get_mut(read..) else {
            return Side::Refused;
        };
        let mut reader = stream;
        if reader.read_exact(rest).is_err() {
            return Side::Refused;
        }
    }
    let outcome = if request == SEND_RARP {
        if file.is_some() {
            device.refuse_side("SEND_RARP", reason, &"a descriptor where none belongs");
            return Side::Refused;
        }
        if !device.protocol_acked(VhostUserProtocolFeatures::RARP) {
            device.refuse_side("SEND_RARP", reason, &"RARP was not negotiated");
            return Side::Refused;
        }
        let mut mac = [0u8; 6];
        mac.copy_from_slice(&message[HEADER_LEN..HEADER_LEN + 6]);
        device.send_rarp(mac)
    } else if request == NET_SET_MTU {
        if file.is_some() {
            refuse(
                &mut device,
                request,
                reason,
                "a descriptor where none belongs",
            );
            return Side::Refused;
        }
        let mut mtu = [0u8; 8];
        mtu.copy_from_slice(&message[HEADER_LEN..HEADER_LEN + 8]);
        device.set_guest_mtu(u64::from_le_bytes(mtu))
    } else {
        device.set_log_fd(file)
    };
    let ok = outcome.is_ok();
    let replies =
        flags & NEED_REPLY != 0 && device.protocol_acked(VhostUserProtocolFeatures::REPLY_ACK);
    if replies {
        let mut reply = [0u8; HEADER_LEN + 8];
        reply[..4].copy_from_slice(&request.to_le_bytes());
        reply[4..8].copy_from_slice(&(VERSION | REPLY).to_le_bytes());
        reply[8..12].copy_from_slice(&8u32.to_le_bytes());
        reply[12..].copy_from_slice(&u64::from(!ok).to_le_bytes());
        let mut writer = stream;
        if std::io::Write::write_all(&mut writer, &reply).is_err() {
            return Side::Refused;
        }
    }
    // An MTU refused with an answer leaves the frontend connected: QEMU reports that the
    // backend does not support it and goes on without vhost for that device.
    if ok || (request == NET_SET_MTU && replies) {
        Side::Served
    } else {
        Side::Refused
    }
}

/// Most descriptors taken with one message (the `vhost` crate's `SET_MEM_TABLE` limit); a
/// message with more is refused (the kernel reports the truncation, and every descriptor
/// received is closed).
const MAX_FDS: usize = 8;

/// Receives into `buf` with the descriptors that come with it, each owned by a `File`.
/// `recv_with_fd` would not do: its control buffer, rounded up for alignment, takes a
/// second descriptor that it then neither returns nor closes.
fn recv_with_files(stream: &UnixStream, buf: &mut [u8]) -> Option<(usize, Vec<File>)> {
    let mut fds = [-1 as RawFd; MAX_FDS];
    let mut iov = [libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    }];
    // SAFETY: the one iovec is `buf`, valid for writes of its length for the whole call;
    // `fds` receives at most `MAX_FDS` descriptors (8 × 4 bytes fill the control buffer
    // exactly, so the kernel passes no more).
    let (read, count) = unsafe { stream.recv_with_fds(&mut iov, &mut fds) }.ok()?;
    let files = fds
        .iter()
        .take(count)
        // SAFETY: each of the first `count` entries is a descriptor the kernel just
        // installed in this process for us, owned by nothing else.
        .map(|fd| unsafe { File::from_raw_fd(*fd) })
        .collect();
    Some((read, files))
}

/// A malformed request refused: counted with the migration's refusals, or an MTU's.
fn refuse(device: &mut Device, request: u32, reason: LogRefusal, why: &str) {
    if request == NET_SET_MTU {
        device.refuse_mtu(why);
    } else {
        device.refuse_side(request_name(request), reason, &why);
    }
}

fn request_name(request: u32) -> &'static str {
    match request {
        SEND_RARP => "SEND_RARP",
        NET_SET_MTU => "NET_SET_MTU",
        _ => "SET_LOG_FD",
    }
}
