//! The system calls of UDP segmentation offload (sending) and UDP GRO (receiving), and socket
//! buffer sizing, through `weft_sys`.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, OwnedFd};

use weft_sys::sockopt::{self, opt, SockOpt};

use crate::error::OverlayError;
use crate::vxlan::encap::SOURCE_PORT_MIN;
use crate::vxlan::sys;

pub(crate) use weft_sys::sockopt::opt::UDP_GRO_NAME as UDP_GRO;
pub(crate) use weft_sys::udp_gso::{send_segmented, UIO_MAXIOV};

/// Ports tried for each segmentation-offload socket before giving up.
const PORT_ATTEMPTS: usize = 512;

fn set_int(fd: impl AsFd, option: SockOpt<i32>, value: i32) -> io::Result<()> {
    sockopt::set(fd, option, &value)
}

fn get_int(fd: impl AsFd, option: SockOpt<i32>) -> Option<i32> {
    sockopt::get(fd, option).ok()
}

/// Sizes a socket's send or receive buffer to `bytes`: the `*FORCE` option first (root may
/// exceed `net.core.[rw]mem_max`), else the plain one (capped by the sysctl). Returns what
/// the kernel reports afterwards (it doubles the request for its bookkeeping).
pub(crate) fn size_buffer(fd: impl AsFd, receive: bool, bytes: usize) -> Option<usize> {
    let fd = fd.as_fd();
    let (force, plain) = if receive {
        (opt::SO_RCVBUFFORCE, opt::SO_RCVBUF)
    } else {
        (opt::SO_SNDBUFFORCE, opt::SO_SNDBUF)
    };
    let value = i32::try_from(bytes).unwrap_or(i32::MAX);
    if set_int(fd, force, value).is_err() {
        // Not privileged: the plain option is capped, never refused for its size.
        let _ = set_int(fd, plain, value);
    }
    get_int(fd, plain).and_then(|v| usize::try_from(v).ok())
}

/// Turns UDP GRO on: the kernel may hand one buffer holding several datagrams of one flow,
/// all `gso_size` long but the last, with a `UDP_GRO` control message giving `gso_size`.
pub(crate) fn enable_gro(fd: impl AsFd) -> bool {
    set_int(fd, opt::UDP_GRO, 1).is_ok()
}

/// Turns UDP GRO off (best effort).
pub(crate) fn disable_gro(fd: impl AsFd) {
    let _ = set_int(fd, opt::UDP_GRO, 0);
}

/// Asks the kernel to say, with every datagram received after a drop, how many datagrams it
/// has dropped on this socket because its receive buffer was full (`SO_RXQ_OVFL`), so that
/// the port counts what never reached it.
pub(crate) fn enable_drop_count(fd: impl AsFd) -> bool {
    set_int(fd, opt::SO_RXQ_OVFL, 1).is_ok()
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
    sys::attach_drop_all(&fd)?;
    sys::set_ttl_dscp(&fd, local, ttl, dscp)?;
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

/// The MTU of the route from `local` to `remote` (the outgoing device's, or the route's
/// own `mtu`), read with `IP_MTU` / `IPV6_MTU` from a UDP socket connected there (nothing is
/// sent). `None` when there is no route.
pub(crate) fn route_mtu(local: IpAddr, remote: IpAddr) -> Option<usize> {
    let sock = std::net::UdpSocket::bind(SocketAddr::new(local, 0)).ok()?;
    sock.connect(SocketAddr::new(
        remote,
        crate::vxlan::encap::SOURCE_PORT_MIN,
    ))
    .ok()?;
    let option = if remote.is_ipv4() {
        opt::IP_MTU
    } else {
        opt::IPV6_MTU
    };
    get_int(&sock, option).and_then(|v| usize::try_from(v).ok())
}
