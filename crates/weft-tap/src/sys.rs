//! The system calls and ioctls the ports use, through `weft_sys`'s safe types, with this
//! crate's checks and errors.

use std::ffi::c_int;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;

use weft_sys::ifreq::{ioctl_ifreq, IfReq, IfReqRequest};
use weft_sys::IoVec;

use crate::error::PortError;

pub(crate) use weft_sys::iovec::writev;
pub(crate) use weft_sys::socket::{bind_packet, set_nonblocking, socket};
pub(crate) use weft_sys::sockopt::{opt, set as setsockopt};

// C constant narrowed to the width of the field it goes in; it fits by definition
// (IFF_UP = 1).
#[allow(clippy::cast_possible_truncation)]
const IFF_UP_FLAG: libc::c_short = libc::IFF_UP as libc::c_short;

/// Checks an interface name: 1..=15 bytes, no '/', ':' or whitespace, no NUL.
pub(crate) fn check_ifname(name: &str) -> Result<(), PortError> {
    if weft_sys::ifreq::is_valid_ifname(name) {
        Ok(())
    } else {
        Err(PortError::BadName(name.to_string()))
    }
}

/// Opens `/dev/net/tun`, non-blocking (and close-on-exec, as std always opens).
pub(crate) fn open_tun() -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open("/dev/net/tun")
}

/// Frames the kernel dropped on a `TPACKET_V3` packet socket since the last call, almost all
/// because its receive ring was full (`tp_drops` of `PACKET_STATISTICS`; reading resets it).
pub(crate) fn packet_ring_drops(fd: impl std::os::fd::AsFd) -> io::Result<u32> {
    weft_sys::sockopt::get(fd, opt::PACKET_STATISTICS).map(|s| s.tp_drops)
}

/// The iovecs of one outgoing frame: `header` (the virtio-net header the kernel wants
/// first), then the frame's pieces (rewritten head, body, and a tail still in a guest's
/// memory, never read in user space). Returns how many of `out` are used.
pub(crate) fn frame_iovecs<'a>(
    header: &'a [u8],
    frame: &'a weft_switch::TxFrame<'_>,
    out: &mut [IoVec<'a>; FRAME_IOVECS],
) -> usize {
    out[0] = IoVec::new(header);
    let pieces = [
        IoVec::new(frame.head()),
        IoVec::new(frame.body),
        IoVec::shared(frame.tail.as_volatile()),
    ];
    let mut n = 1;
    for piece in pieces.into_iter().filter(|p| !p.is_empty()) {
        out[n] = piece;
        n += 1;
    }
    n
}

/// Iovecs per frame: a header and a frame's three pieces.
pub(crate) const FRAME_IOVECS: usize = 4;

/// Attributes of a network interface, read in the caller's network namespace.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IfInfo {
    pub(crate) ifindex: c_int,
    pub(crate) mtu: usize,
}

/// Reads an interface's index and MTU; sets its MTU first when `mtu` is given, and brings it
/// up when `up`. Works in the calling thread's network namespace.
pub(crate) fn configure_interface(
    name: &str,
    mtu: Option<u32>,
    up: bool,
) -> Result<IfInfo, PortError> {
    let ctl = socket(libc::AF_INET, libc::SOCK_DGRAM, 0)
        .map_err(|e| PortError::sys("socket(AF_INET)", name, e))?;
    if let Some(mtu) = mtu {
        let mut req = IfReq::new(name);
        req.set_mtu(
            c_int::try_from(mtu)
                .map_err(|_| PortError::BadOption(format!("MTU {mtu} is out of range")))?,
        );
        ioctl_ifreq(&ctl, IfReqRequest::SetMtu, &mut req)
            .map_err(|e| PortError::sys("SIOCSIFMTU", name, e))?;
    }
    if up {
        let mut req = IfReq::new(name);
        ioctl_ifreq(&ctl, IfReqRequest::GetFlags, &mut req)
            .map_err(|e| PortError::sys("SIOCGIFFLAGS", name, e))?;
        req.set_flags(req.flags() | IFF_UP_FLAG);
        ioctl_ifreq(&ctl, IfReqRequest::SetFlags, &mut req)
            .map_err(|e| PortError::sys("SIOCSIFFLAGS", name, e))?;
    }
    let mut req = IfReq::new(name);
    ioctl_ifreq(&ctl, IfReqRequest::GetMtu, &mut req)
        .map_err(|e| PortError::sys("SIOCGIFMTU", name, e))?;
    let mtu = req.mtu();
    let mut req = IfReq::new(name);
    ioctl_ifreq(&ctl, IfReqRequest::GetIndex, &mut req)
        .map_err(|e| PortError::sys("SIOCGIFINDEX", name, e))?;
    let ifindex = req.ifindex();
    let mtu = usize::try_from(mtu)
        .map_err(|_| PortError::Unsupported(format!("{name} reports MTU {mtu}")))?;
    Ok(IfInfo { ifindex, mtu })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frames_iovecs_are_its_header_then_each_piece_in_order() {
        let mut shared = [7u8; 30];
        let tail = weft_switch::SharedTail::new(vm_memory::VolatileSlice::from(&mut shared[..]));
        let body = [2u8; 50];
        let frame =
            weft_switch::TxFrame::with_head(&[1; 12], &body, Default::default()).with_tail(tail);
        let header = [0u8; 10];
        let mut iov = [IoVec::EMPTY; FRAME_IOVECS];
        assert_eq!(frame_iovecs(&header, &frame, &mut iov), 4);
        let lens: Vec<usize> = iov.iter().map(IoVec::len).collect();
        assert_eq!(lens, [10, 12, 50, 30]);
        assert_eq!(iov[3].as_ptr(), tail.as_ptr());
        // A frame sent as it is, without a tail: header and body only.
        let whole = weft_switch::TxFrame::whole(&body, Default::default());
        let mut iov = [IoVec::EMPTY; FRAME_IOVECS];
        assert_eq!(frame_iovecs(&header, &whole, &mut iov), 2);
        assert_eq!(iov[1].len(), 50);
    }

    #[test]
    fn interface_names_are_checked() {
        assert!(check_ifname("tap0").is_ok());
        assert!(check_ifname("weft%d").is_ok());
        assert!(check_ifname("123456789012345").is_ok());
        for bad in ["", "1234567890123456", "a/b", "a b", "a:b", "a\0"] {
            assert!(check_ifname(bad).is_err(), "{bad:?}");
        }
    }
}
