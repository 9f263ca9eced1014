//! The system calls: sockets, socket options, `sendmmsg` / `recvmmsg`. Every `unsafe` block
//! of the crate lives here.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::error::OverlayError;

/// A socket address in the form the kernel takes.
#[derive(Clone, Copy)]
pub(crate) struct RawAddr {
    pub(crate) storage: libc::sockaddr_storage,
    pub(crate) len: libc::socklen_t,
}

fn socklen<T>() -> libc::socklen_t {
    // Socket address structures are a few dozen bytes.
    libc::socklen_t::try_from(size_of::<T>()).unwrap_or(0)
}

impl RawAddr {
    pub(crate) fn zeroed() -> RawAddr {
        RawAddr {
            // SAFETY: sockaddr_storage is plain old data; all zeroes is a valid value.
            storage: unsafe { zeroed() },
            len: socklen::<libc::sockaddr_storage>(),
        }
    }

    /// `ip`:`port` (raw sockets want port 0).
    pub(crate) fn new(addr: SocketAddr) -> RawAddr {
        let mut out = RawAddr::zeroed();
        match addr {
            SocketAddr::V4(a) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::sa_family_t::try_from(libc::AF_INET).unwrap_or(0),
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(a.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: sockaddr_storage is larger than and aligned for every sockaddr.
                unsafe { std::ptr::write(std::ptr::from_mut(&mut out.storage).cast(), sin) };
                out.len = socklen::<libc::sockaddr_in>();
            }
            SocketAddr::V6(a) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::sa_family_t::try_from(libc::AF_INET6).unwrap_or(0),
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: 0,
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.ip().octets(),
                    },
                    sin6_scope_id: a.scope_id(),
                };
                // SAFETY: as above.
                unsafe { std::ptr::write(std::ptr::from_mut(&mut out.storage).cast(), sin6) };
                out.len = socklen::<libc::sockaddr_in6>();
            }
        }
        out
    }

    /// The address the kernel wrote, if it is IPv4 or IPv6.
    pub(crate) fn to_ip(self) -> Option<IpAddr> {
        match i32::from(self.storage.ss_family) {
            libc::AF_INET => {
                // SAFETY: the family says the storage holds a sockaddr_in.
                let sin: libc::sockaddr_in =
                    unsafe { std::ptr::read(std::ptr::from_ref(&self.storage).cast()) };
                Some(IpAddr::V4(Ipv4Addr::from(
                    sin.sin_addr.s_addr.to_ne_bytes(),
                )))
            }
            libc::AF_INET6 => {
                // SAFETY: the family says the storage holds a sockaddr_in6.
                let sin6: libc::sockaddr_in6 =
                    unsafe { std::ptr::read(std::ptr::from_ref(&self.storage).cast()) };
                let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
                Some(ip.to_ipv4_mapped().map_or(IpAddr::V6(ip), IpAddr::V4))
            }
            _ => None,
        }
    }
}

fn setsockopt<T>(
    fd: RawFd,
    level: i32,
    name: i32,
    value: &T,
    what: &'static str,
) -> Result<(), OverlayError> {
    // SAFETY: `value` points to a live T of the given size for the call.
    let ret = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            std::ptr::from_ref(value).cast(),
            socklen::<T>(),
        )
    };
    if ret != 0 {
        return Err(OverlayError::last_os(what));
    }
    Ok(())
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
    // SAFETY: plain socket(2) call; the result is checked.
    let fd = unsafe {
        libc::socket(
            family,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            libc::IPPROTO_UDP,
        )
    };
    if fd < 0 {
        return Err(OverlayError::last_os("socket(SOCK_RAW, IPPROTO_UDP)"));
    }
    // SAFETY: fd is a fresh descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let raw = fd.as_raw_fd();
    attach_drop_all(raw)?;
    let tos = i32::from(dscp) << 2;
    if local.is_ipv4() {
        if let Some(ttl) = ttl {
            setsockopt(
                raw,
                libc::IPPROTO_IP,
                libc::IP_TTL,
                &i32::from(ttl),
                "IP_TTL",
            )?;
        }
        setsockopt(raw, libc::IPPROTO_IP, libc::IP_TOS, &tos, "IP_TOS")?;
    } else {
        if let Some(ttl) = ttl {
            setsockopt(
                raw,
                libc::IPPROTO_IPV6,
                libc::IPV6_UNICAST_HOPS,
                &i32::from(ttl),
                "IPV6_UNICAST_HOPS",
            )?;
        }
        setsockopt(
            raw,
            libc::IPPROTO_IPV6,
            libc::IPV6_TCLASS,
            &tos,
            "IPV6_TCLASS",
        )?;
        setsockopt(
            raw,
            libc::IPPROTO_IPV6,
            libc::IPV6_CHECKSUM,
            &6i32,
            "IPV6_CHECKSUM",
        )?;
    }
    let bind_to = match local {
        IpAddr::V4(a) => SocketAddr::V4(SocketAddrV4::new(a, 0)),
        IpAddr::V6(a) => SocketAddr::V6(SocketAddrV6::new(a, 0, 0, 0)),
    };
    let addr = RawAddr::new(bind_to);
    // SAFETY: addr holds a valid sockaddr of `len` bytes.
    let ret = unsafe { libc::bind(raw, std::ptr::from_ref(&addr.storage).cast(), addr.len) };
    if ret != 0 {
        return Err(OverlayError::last_os("bind raw"));
    }
    Ok(fd)
}

/// Attaches a socket filter that accepts nothing: a sending-only socket then queues none of
/// the datagrams it would otherwise receive.
pub(crate) fn attach_drop_all(raw: RawFd) -> Result<(), OverlayError> {
    let mut drop_all = [libc::sock_filter {
        code: 0x06, // BPF_RET | BPF_K
        jt: 0,
        jf: 0,
        k: 0,
    }];
    let prog = libc::sock_fprog {
        len: 1,
        filter: drop_all.as_mut_ptr(),
    };
    setsockopt(
        raw,
        libc::SOL_SOCKET,
        libc::SO_ATTACH_FILTER,
        &prog,
        "SO_ATTACH_FILTER",
    )
}

/// One `sendmmsg(MSG_DONTWAIT)`: how many messages went, or the error of the first.
///
/// # Safety
/// Every header's pointers (name, iovecs and the buffers they describe) must be valid for
/// reads for the duration of the call.
pub(crate) unsafe fn sendmmsg(fd: RawFd, msgs: &mut [libc::mmsghdr]) -> io::Result<usize> {
    let n = u32::try_from(msgs.len()).unwrap_or(u32::MAX);
    // SAFETY: the caller guarantees the pointers; `msgs` is valid for `n` entries.
    let ret = unsafe { libc::sendmmsg(fd, msgs.as_mut_ptr(), n, libc::MSG_DONTWAIT) };
    usize::try_from(ret).map_err(|_| io::Error::last_os_error())
}

/// One `recvmmsg(MSG_DONTWAIT)`: how many messages came, or the error.
///
/// # Safety
/// Every header's pointers must be valid for writes of the lengths they declare for the
/// duration of the call.
pub(crate) unsafe fn recvmmsg(fd: RawFd, msgs: &mut [libc::mmsghdr]) -> io::Result<usize> {
    let n = u32::try_from(msgs.len()).unwrap_or(u32::MAX);
    // SAFETY: the caller guarantees the pointers; `msgs` is valid for `n` entries.
    let ret = unsafe {
        libc::recvmmsg(
            fd,
            msgs.as_mut_ptr(),
            n,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
        )
    };
    usize::try_from(ret).map_err(|_| io::Error::last_os_error())
}

/// An empty message header.
pub(crate) fn empty_mmsghdr() -> libc::mmsghdr {
    // SAFETY: mmsghdr is plain old data (null pointers, zero lengths are valid).
    unsafe { zeroed() }
}
