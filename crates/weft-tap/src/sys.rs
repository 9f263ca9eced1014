//! Thin wrappers over the system calls and ioctls the ports use. Every `unsafe` block of the
//! crate outside the mapped ring (`ring.rs`) lives here, each with its argument checked.

use std::ffi::c_int;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use vmm_sys_util::ioctl::{ioctl_with_mut_ref, ioctl_with_ref, ioctl_with_val};

use crate::error::PortError;

/// Longest interface name (without the NUL).
pub(crate) const MAX_IFNAME: usize = libc::IFNAMSIZ - 1;

/// Checks an interface name: 1..=15 bytes, no '/', ':' or whitespace, no NUL.
pub(crate) fn check_ifname(name: &str) -> Result<(), PortError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_IFNAME
        && !name
            .chars()
            .any(|c| c == '/' || c == ':' || c == '\0' || c.is_whitespace());
    if ok {
        Ok(())
    } else {
        Err(PortError::BadName(name.to_string()))
    }
}

/// An `ifreq` naming `name` (checked with [`check_ifname`] first), the rest zero.
pub(crate) fn ifreq(name: &str) -> libc::ifreq {
    // SAFETY: ifreq is a plain C struct (a name array and a union of integers, addresses and
    // a pointer) for which all-zero bytes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes().take(MAX_IFNAME)) {
        *dst = libc::c_char::from_ne_bytes([src]);
    }
    req
}

/// The name the kernel left in an `ifreq` (it fills in `%d` patterns).
pub(crate) fn ifreq_name(req: &libc::ifreq) -> String {
    let bytes: Vec<u8> = req
        .ifr_name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c.to_ne_bytes()[0])
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

// C constants narrowed to the width of the field they go in; each fits by definition
// (AF_PACKET = 17, ETH_P_ALL = 3, IFF_UP = 1).
#[allow(clippy::cast_possible_truncation)]
const AF_PACKET_FAMILY: libc::c_ushort = libc::AF_PACKET as libc::c_ushort;
#[allow(clippy::cast_possible_truncation)]
const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();
#[allow(clippy::cast_possible_truncation)]
const IFF_UP_FLAG: libc::c_short = libc::IFF_UP as libc::c_short;

fn cvt(ret: c_int) -> io::Result<c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// An ioctl whose argument is an `ifreq` the kernel reads and may update.
pub(crate) fn ioctl_ifreq(
    fd: &impl AsRawFd,
    request: libc::Ioctl,
    req: &mut libc::ifreq,
) -> io::Result<()> {
    // SAFETY: every request passed here (TUNSETIFF, TUNGETIFF, SIOCGIFMTU, SIOCSIFMTU, SIOCGIFFLAGS,
    // SIOCSIFFLAGS, SIOCGIFINDEX) takes a pointer to one `struct ifreq`, which `req` is, live
    // and exclusively borrowed for the call.
    cvt(unsafe { ioctl_with_mut_ref(fd, request, req) }).map(drop)
}

/// An ioctl whose argument is a pointer to an `int` the kernel reads.
pub(crate) fn ioctl_int_ptr(
    fd: &impl AsRawFd,
    request: libc::Ioctl,
    value: c_int,
) -> io::Result<()> {
    // SAFETY: the requests passed here (TUNSETVNETHDRSZ, TUNSETVNETLE) read one `int` through
    // the pointer, which points at `value` for the duration of the call.
    cvt(unsafe { ioctl_with_ref(fd, request, &value) }).map(drop)
}

/// An ioctl whose argument is an integer passed by value.
pub(crate) fn ioctl_value(fd: &impl AsRawFd, request: libc::Ioctl, value: u64) -> io::Result<()> {
    // SAFETY: the request passed here (TUNSETOFFLOAD) takes its argument by value; no memory
    // is read or written through it.
    cvt(unsafe { ioctl_with_val(fd, request, value) }).map(drop)
}

/// Opens `/dev/net/tun`, non-blocking and close-on-exec.
pub(crate) fn open_tun() -> io::Result<OwnedFd> {
    let path = c"/dev/net/tun";
    // SAFETY: `path` is a NUL-terminated string; open has no other memory arguments.
    let fd = cvt(unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: open returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Sets `O_NONBLOCK` on a descriptor.
pub(crate) fn set_nonblocking(fd: &impl AsRawFd) -> io::Result<()> {
    // SAFETY: F_GETFL and F_SETFL take and return integers only.
    let flags = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    // SAFETY: as above.
    cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) }).map(drop)
}

/// A socket of the given family, type and protocol (close-on-exec is added).
pub(crate) fn socket(family: c_int, ty: c_int, protocol: c_int) -> io::Result<OwnedFd> {
    // SAFETY: socket takes no memory arguments.
    let fd = cvt(unsafe { libc::socket(family, ty | libc::SOCK_CLOEXEC, protocol) })?;
    // SAFETY: socket returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt` with a plain value.
pub(crate) fn setsockopt<T: Copy>(
    fd: &impl AsRawFd,
    level: c_int,
    name: c_int,
    value: &T,
) -> io::Result<()> {
    let len = libc::socklen_t::try_from(std::mem::size_of::<T>())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: the pointer and length describe `value`, which outlives the call; the kernel
    // only reads it. Callers pass the type each option expects (int, tpacket_req3,
    // packet_mreq).
    cvt(unsafe { libc::setsockopt(fd.as_raw_fd(), level, name, (value as *const T).cast(), len) })
        .map(drop)
}

/// Frames the kernel dropped on a `TPACKET_V3` packet socket since the last call, almost all
/// because its receive ring was full (`tp_drops` of `PACKET_STATISTICS`; reading resets it).
pub(crate) fn packet_ring_drops(fd: &impl AsRawFd) -> io::Result<u32> {
    let mut stats = libc::tpacket_stats_v3 {
        tp_packets: 0,
        tp_drops: 0,
        tp_freeze_q_cnt: 0,
    };
    let mut len = libc::socklen_t::try_from(std::mem::size_of::<libc::tpacket_stats_v3>())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: the pointer and length describe `stats`, which outlives the call; the kernel
    // writes at most `len` bytes into it (a V3 socket's statistics are exactly this struct).
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut stats as *mut libc::tpacket_stats_v3).cast(),
            &mut len,
        )
    })?;
    Ok(stats.tp_drops)
}

/// Binds an AF_PACKET socket to interface `ifindex`, all protocols.
pub(crate) fn bind_packet(fd: &impl AsRawFd, ifindex: c_int) -> io::Result<()> {
    // SAFETY: sockaddr_ll is a plain C struct; all-zero is valid.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    addr.sll_family = AF_PACKET_FAMILY;
    addr.sll_protocol = ETH_P_ALL_BE;
    addr.sll_ifindex = ifindex;
    let len = libc::socklen_t::try_from(std::mem::size_of::<libc::sockaddr_ll>())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: the pointer and length describe `addr`, a valid sockaddr_ll for the call.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_ll).cast(),
            len,
        )
    })
    .map(drop)
}

/// The iovecs of one outgoing frame: `header` (the virtio-net header the kernel wants
/// first), then the frame's pieces (rewritten head, body, and a tail still in a guest's
/// memory, never read in user space). Returns how many of `out` are used.
pub(crate) fn frame_iovecs(
    header: &[u8],
    frame: &weft_switch::TxFrame<'_>,
    out: &mut [libc::iovec; FRAME_IOVECS],
) -> usize {
    out[0] = libc::iovec {
        iov_base: header.as_ptr().cast_mut().cast(),
        iov_len: header.len(),
    };
    let mut n = 1;
    for ((ptr, len), slot) in frame.raw_parts().zip(&mut out[1..]) {
        *slot = libc::iovec {
            iov_base: ptr.cast_mut().cast(),
            iov_len: len,
        };
        n += 1;
    }
    n
}

/// Iovecs per frame: a header and a frame's three pieces.
pub(crate) const FRAME_IOVECS: usize = 4;

/// An empty iovec.
pub(crate) const EMPTY_IOVEC: libc::iovec = libc::iovec {
    iov_base: std::ptr::null_mut(),
    iov_len: 0,
};

/// `writev` of `iov` to `fd`. Returns the bytes written.
pub(crate) fn writev(fd: BorrowedFd<'_>, iov: &[libc::iovec]) -> io::Result<usize> {
    let n = c_int::try_from(iov.len()).unwrap_or(c_int::MAX);
    // SAFETY: `iov` is a live array of at least `n` iovecs, each naming memory the caller
    // keeps alive for this call (a frame's pieces: weft's buffers or a guest's mapped
    // memory); the kernel only reads through them.
    let written = unsafe { libc::writev(fd.as_raw_fd(), iov.as_ptr(), n) };
    // Negative only on error (-1); any other value is a byte count.
    usize::try_from(written).map_err(|_| io::Error::last_os_error())
}

/// `sendmmsg` without blocking. Returns the messages sent.
pub(crate) fn sendmmsg(fd: BorrowedFd<'_>, msgs: &mut [libc::mmsghdr]) -> io::Result<usize> {
    let n = libc::c_uint::try_from(msgs.len()).unwrap_or(libc::c_uint::MAX);
    // SAFETY: `msgs` is a live, exclusively borrowed array of at least `n` headers; the
    // caller built each one's iovec array and buffers, which outlive this call (they are
    // borrowed by the caller's frames). The kernel writes only `msg_len` fields.
    let sent =
        cvt(unsafe { libc::sendmmsg(fd.as_raw_fd(), msgs.as_mut_ptr(), n, libc::MSG_DONTWAIT) })?;
    Ok(usize::try_from(sent).unwrap_or(0))
}

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
        let mut req = ifreq(name);
        req.ifr_ifru.ifru_mtu = c_int::try_from(mtu)
            .map_err(|_| PortError::BadOption(format!("MTU {mtu} is out of range")))?;
        ioctl_ifreq(&ctl, libc::SIOCSIFMTU, &mut req)
            .map_err(|e| PortError::sys("SIOCSIFMTU", name, e))?;
    }
    if up {
        let mut req = ifreq(name);
        ioctl_ifreq(&ctl, libc::SIOCGIFFLAGS, &mut req)
            .map_err(|e| PortError::sys("SIOCGIFFLAGS", name, e))?;
        // SAFETY: SIOCGIFFLAGS filled the `ifru_flags` member of the union.
        let flags = unsafe { req.ifr_ifru.ifru_flags };
        req.ifr_ifru.ifru_flags = flags | IFF_UP_FLAG;
        ioctl_ifreq(&ctl, libc::SIOCSIFFLAGS, &mut req)
            .map_err(|e| PortError::sys("SIOCSIFFLAGS", name, e))?;
    }
    let mut req = ifreq(name);
    ioctl_ifreq(&ctl, libc::SIOCGIFMTU, &mut req)
        .map_err(|e| PortError::sys("SIOCGIFMTU", name, e))?;
    // SAFETY: SIOCGIFMTU filled the `ifru_mtu` member of the union.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    let mut req = ifreq(name);
    ioctl_ifreq(&ctl, libc::SIOCGIFINDEX, &mut req)
        .map_err(|e| PortError::sys("SIOCGIFINDEX", name, e))?;
    // SAFETY: SIOCGIFINDEX filled the `ifru_ifindex` member of the union.
    let ifindex = unsafe { req.ifr_ifru.ifru_ifindex };
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
        let mut iov = [EMPTY_IOVEC; FRAME_IOVECS];
        assert_eq!(frame_iovecs(&header, &frame, &mut iov), 4);
        let lens: Vec<usize> = iov.iter().map(|v| v.iov_len).collect();
        assert_eq!(lens, [10, 12, 50, 30]);
        assert_eq!(iov[3].iov_base.cast_const().cast::<u8>(), tail.as_ptr());
        // A frame sent as it is, without a tail: header and body only.
        let whole = weft_switch::TxFrame::whole(&body, Default::default());
        assert_eq!(frame_iovecs(&header, &whole, &mut iov), 2);
        assert_eq!(iov[1].iov_len, 50);
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

    #[test]
    fn ifreq_round_trips_the_name() {
        assert_eq!(ifreq_name(&ifreq("wt-a")), "wt-a");
        assert_eq!(ifreq_name(&ifreq("123456789012345")), "123456789012345");
    }
}
