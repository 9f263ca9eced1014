//! The system calls of UDP segmentation offload (sending) and UDP GRO (receiving), and socket
//! buffer sizing. Like `sys`, every `unsafe` block here has its `// SAFETY:` line.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::encap::SOURCE_PORT_MIN;
use crate::error::OverlayError;
use crate::sys::{self, RawAddr};

/// `SOL_UDP` option: send one buffer as equal-size datagrams (`linux/udp.h`).
pub(crate) const UDP_SEGMENT: i32 = 103;
/// `SOL_UDP` option: let the kernel coalesce datagrams of one flow (`linux/udp.h`).
pub(crate) const UDP_GRO: i32 = 104;
/// Room for one `cmsghdr` carrying an `int` (CMSG_SPACE(4) on 64-bit Linux), in u64s so that
/// the buffer is aligned for `cmsghdr`.
pub(crate) const CMSG_INT_WORDS: usize = 3;
/// Most iovecs one `sendmsg` takes (`UIO_MAXIOV`, `linux/uio.h`).
pub(crate) const UIO_MAXIOV: usize = 1024;
/// Ports tried for each segmentation-offload socket before giving up.
const PORT_ATTEMPTS: usize = 512;

fn set_int(fd: RawFd, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: `value` is a live i32 for the call; the length says so.
    let ret = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            std::ptr::from_ref(&value).cast(),
            libc::socklen_t::try_from(std::mem::size_of::<i32>()).unwrap_or(4),
        )
    };
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn get_int(fd: RawFd, level: i32, name: i32) -> Option<i32> {
    let mut value = 0i32;
    let mut len = libc::socklen_t::try_from(std::mem::size_of::<i32>()).unwrap_or(4);
    // SAFETY: `value` and `len` are live for the call and `len` gives `value`'s size.
    let ret = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            std::ptr::from_mut(&mut value).cast(),
            &mut len,
        )
    };
    (ret == 0).then_some(value)
}

/// Sizes a socket's send or receive buffer to `bytes`: the `*FORCE` option first (root may
/// exceed `net.core.[rw]mem_max`), else the plain one (capped by the sysctl). Returns what
/// the kernel reports afterwards (it doubles the request for its bookkeeping).
pub(crate) fn size_buffer(fd: RawFd, receive: bool, bytes: usize) -> Option<usize> {
    let (force, plain) = if receive {
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF)
    } else {
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF)
    };
    let value = i32::try_from(bytes).unwrap_or(i32::MAX);
    if set_int(fd, libc::SOL_SOCKET, force, value).is_err() {
        // Not privileged: the plain option is capped, never refused for its size.
        let _ = set_int(fd, libc::SOL_SOCKET, plain, value);
    }
    get_int(fd, libc::SOL_SOCKET, plain).and_then(|v| usize::try_from(v).ok())
}

/// Turns UDP GRO on: the kernel may hand one buffer holding several datagrams of one flow,
/// all `gso_size` long but the last, with a `UDP_GRO` control message giving `gso_size`.
pub(crate) fn enable_gro(fd: RawFd) -> bool {
    set_int(fd, libc::SOL_UDP, UDP_GRO, 1).is_ok()
}

/// Asks the kernel to say, with every datagram received after a drop, how many datagrams it
/// has dropped on this socket because its receive buffer was full (`SO_RXQ_OVFL`), so that
/// the port counts what never reached it.
pub(crate) fn enable_drop_count(fd: RawFd) -> bool {
    set_int(fd, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1).is_ok()
}

/// A UDP socket for segmentation offload: bound to `local`'s address and a free port in the
/// dynamic range RFC 7348 §5 recommends for source ports (tried from `*next` on, which is
/// advanced past the port taken), non-blocking, with a filter that queues nothing it might
/// receive, TTL and DSCP set like the raw socket's. Its port is the source port of every
/// datagram it sends.
pub(crate) fn gso_socket(
    local: IpAddr,
    ttl: Option<u8>,
    dscp: u8,
    next: &mut u16,
) -> Result<(OwnedFd, u16), OverlayError> {
    let span = u16::MAX - SOURCE_PORT_MIN;
    let mut last_error = None;
    let mut bound = None;
    for _ in 0..PORT_ATTEMPTS {
        let port = SOURCE_PORT_MIN + (*next % span);
        *next = next.wrapping_add(1);
        match std::net::UdpSocket::bind(SocketAddr::new(local, port)) {
            Ok(sock) => {
                bound = Some(sock);
                break;
            }
            Err(e) => last_error = Some(e),
        }
    }
    let sock = bound.ok_or_else(|| OverlayError::Socket {
        call: "bind UDP (segmentation offload)",
        source: last_error.unwrap_or_else(|| io::Error::from_raw_os_error(libc::EADDRINUSE)),
    })?;
    sock.set_nonblocking(true)
        .map_err(|source| OverlayError::Socket {
            call: "O_NONBLOCK",
            source,
        })?;
    let port = sock
        .local_addr()
        .map_err(|source| OverlayError::Socket {
            call: "getsockname",
            source,
        })?
        .port();
    let fd = OwnedFd::from(sock);
    let raw = fd.as_raw_fd();
    sys::attach_drop_all(raw)?;
    let tos = i32::from(dscp) << 2;
    let opt = |level, name, value, what| {
        set_int(raw, level, name, value)
            .map_err(|source| OverlayError::Socket { call: what, source })
    };
    if local.is_ipv4() {
        if let Some(ttl) = ttl {
            opt(libc::IPPROTO_IP, libc::IP_TTL, i32::from(ttl), "IP_TTL")?;
        }
        opt(libc::IPPROTO_IP, libc::IP_TOS, tos, "IP_TOS")?;
    } else {
        if let Some(ttl) = ttl {
            opt(
                libc::IPPROTO_IPV6,
                libc::IPV6_UNICAST_HOPS,
                i32::from(ttl),
                "IPV6_UNICAST_HOPS",
            )?;
        }
        opt(libc::IPPROTO_IPV6, libc::IPV6_TCLASS, tos, "IPV6_TCLASS")?;
    }
    Ok((fd, port))
}

/// Whether a send failed only because the socket buffer is full (or a signal came): nothing
/// went, and the caller stops the burst there for the switch to retry or drop.
pub(crate) fn socket_full(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EAGAIN | libc::ENOBUFS | libc::EINTR)
    )
}

/// One `sendmsg(MSG_DONTWAIT)` to `to` of the payload gathered from `iov` (at most
/// `UIO_MAXIOV` entries); when `segment` is set, with a `UDP_SEGMENT` control message: the
/// kernel copies the pieces into one buffer and sends it as datagrams of `segment` bytes (the
/// last may be shorter, and a datagram may be cut across pieces), in one pass through its
/// stack.
///
/// # Safety
///
/// Every entry of `iov` must describe memory that is readable for its length and not
/// modified during the call.
pub(crate) unsafe fn send_segmented_iov(
    fd: RawFd,
    to: &RawAddr,
    iov: &[libc::iovec],
    segment: Option<u16>,
) -> io::Result<usize> {
    if iov.len() > UIO_MAXIOV {
        return Err(io::Error::from_raw_os_error(libc::EMSGSIZE));
    }
    let mut control = [0u64; CMSG_INT_WORDS];
    let mut addr = *to;
    // SAFETY: msghdr is plain old data (null pointers and zero lengths are valid).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = std::ptr::from_mut(&mut addr.storage).cast();
    msg.msg_namelen = addr.len;
    // sendmsg only reads the iovecs (the pointer is mutable in the C declaration).
    msg.msg_iov = iov.as_ptr().cast_mut();
    msg.msg_iovlen = iov.len();
    if let Some(size) = segment {
        let space = std::mem::size_of_val(&control);
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space;
        // SAFETY: msg_control points at `space` bytes, enough for one cmsghdr and an int
        // (CMSG_SPACE(4) = 24 <= 24), aligned for cmsghdr (u64 array).
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            if cmsg.is_null() {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            }
            (*cmsg).cmsg_level = libc::SOL_UDP;
            (*cmsg).cmsg_type = UDP_SEGMENT;
            (*cmsg).cmsg_len = usize::try_from(libc::CMSG_LEN(2)).unwrap_or(0);
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<u16>(), size);
            msg.msg_controllen = usize::try_from(libc::CMSG_SPACE(2)).unwrap_or(space);
        }
    }
    // SAFETY: the header points at `addr`, `iov` (whose entries the caller vouches for) and
    // `control`, all alive and unmodified for the call.
    let ret = unsafe { libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT) };
    usize::try_from(ret).map_err(|_| io::Error::last_os_error())
}

/// The MTU of the route from `local` to `remote` (the outgoing device's, or the route's
/// own `mtu`), read with `IP_MTU` / `IPV6_MTU` from a UDP socket connected there (nothing is
/// sent). `None` when there is no route.
pub(crate) fn route_mtu(local: IpAddr, remote: IpAddr) -> Option<usize> {
    let sock = std::net::UdpSocket::bind(SocketAddr::new(local, 0)).ok()?;
    sock.connect(SocketAddr::new(remote, crate::encap::SOURCE_PORT_MIN))
        .ok()?;
    let (level, name) = if remote.is_ipv4() {
        (libc::IPPROTO_IP, libc::IP_MTU)
    } else {
        (libc::IPPROTO_IPV6, libc::IPV6_MTU)
    };
    get_int(sock.as_raw_fd(), level, name).and_then(|v| usize::try_from(v).ok())
}
