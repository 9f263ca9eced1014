//! The sockets the port opens, set up through `weft_sys`'s safe system-call layer.

use std::net::{IpAddr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsFd, OwnedFd};

use weft_sys::sockopt::{self, opt, SockOpt};

use crate::error::OverlayError;

pub(crate) use weft_sys::SockAddr;

/// Sets an `int` option, naming it in the error.
pub(crate) fn set_int(
    fd: impl AsFd,
    option: SockOpt<i32>,
    value: i32,
    what: &'static str,
) -> Result<(), OverlayError> {
    sockopt::set(fd, option, &value).map_err(|source| OverlayError::Socket { call: what, source })
}

/// TTL (hop limit) and DSCP of a sending socket of `family` (`local`'s).
pub(crate) fn set_ttl_dscp(
    fd: impl AsFd,
    local: IpAddr,
    ttl: Option<u8>,
    dscp: u8,
) -> Result<(), OverlayError> {
    let fd = fd.as_fd();
    let tos = i32::from(dscp) << 2;
    if local.is_ipv4() {
        if let Some(ttl) = ttl {
            set_int(fd, opt::IP_TTL, i32::from(ttl), "IP_TTL")?;
        }
        set_int(fd, opt::IP_TOS, tos, "IP_TOS")
    } else {
        if let Some(ttl) = ttl {
            set_int(
                fd,
                opt::IPV6_UNICAST_HOPS,
                i32::from(ttl),
                "IPV6_UNICAST_HOPS",
            )?;
        }
        set_int(fd, opt::IPV6_TCLASS, tos, "IPV6_TCLASS")
    }
}

/// The receiving socket: UDP, non-blocking, bound to the local endpoint.
pub(crate) fn udp_socket(local: SocketAddr) -> Result<std::net::UdpSocket, OverlayError> {
    let sock = std::net::UdpSocket::bind(local).map_err(|source| OverlayError::Socket {
        call: "bind UDP",
        source,
    })?;
    sock.set_nonblocking(true)
        .map_err(|source| OverlayError::Socket {
            call: "O_NONBLOCK",
            source,
        })?;
    Ok(sock)
}

/// The sending socket: raw, protocol UDP, bound to the local address, so that each datagram
/// carries its own UDP header (and with it a per-flow source port) while the kernel writes
/// the IP header (TTL, DSCP, routing, fragmentation). IPv6: the kernel computes the UDP
/// checksum (`IPV6_CHECKSUM` at offset 6). A filter that accepts nothing keeps the copies
/// of every incoming UDP datagram a raw socket would otherwise queue.
pub(crate) fn raw_udp_socket(
    local: IpAddr,
    ttl: Option<u8>,
    dscp: u8,
) -> Result<OwnedFd, OverlayError> {
    let family = if local.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    let fd = weft_sys::socket::socket(
        family,
        libc::SOCK_RAW | libc::SOCK_NONBLOCK,
        libc::IPPROTO_UDP,
    )
    .map_err(|source| OverlayError::Socket {
        call: "socket(SOCK_RAW, IPPROTO_UDP)",
        source,
    })?;
    attach_drop_all(&fd)?;
    set_ttl_dscp(&fd, local, ttl, dscp)?;
    if !local.is_ipv4() {
        set_int(&fd, opt::IPV6_CHECKSUM, 6, "IPV6_CHECKSUM")?;
    }
    let bind_to = match local {
        IpAddr::V4(a) => SocketAddr::V4(SocketAddrV4::new(a, 0)),
        IpAddr::V6(a) => SocketAddr::V6(SocketAddrV6::new(a, 0, 0, 0)),
    };
    weft_sys::socket::bind(&fd, &SockAddr::new(bind_to)).map_err(|source| {
        OverlayError::Socket {
            call: "bind raw",
            source,
        }
    })?;
    Ok(fd)
}

/// Attaches a socket filter that accepts nothing: a sending-only socket then queues none of
/// the datagrams it would otherwise receive.
pub(crate) fn attach_drop_all(fd: impl AsFd) -> Result<(), OverlayError> {
    sockopt::attach_drop_all_filter(fd).map_err(|source| OverlayError::Socket {
        call: "SO_ATTACH_FILTER",
        source,
    })
}
