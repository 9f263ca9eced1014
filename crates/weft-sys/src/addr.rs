//! Socket addresses in the form the kernel takes and gives back.

use std::mem::size_of;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// An IPv4 or IPv6 socket address as a `sockaddr_storage` and its length.
#[derive(Clone, Copy)]
pub struct SockAddr {
    pub(crate) storage: libc::sockaddr_storage,
    pub(crate) len: libc::socklen_t,
}

impl std::fmt::Debug for SockAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.to_socket_addr() {
            Some(a) => write!(f, "SockAddr({a})"),
            None => write!(f, "SockAddr(family {})", self.storage.ss_family),
        }
    }
}

pub(crate) fn socklen<T>() -> libc::socklen_t {
    // Socket address and option structures are a few hundred bytes at most.
    libc::socklen_t::try_from(size_of::<T>()).unwrap_or(0)
}

impl Default for SockAddr {
    fn default() -> Self {
        SockAddr::empty()
    }
}

impl SockAddr {
    /// Room for any address, nothing in it yet (what `recvmmsg` fills in).
    pub fn empty() -> SockAddr {
        SockAddr {
            // SAFETY: sockaddr_storage is plain old data; all zeroes is a valid value.
            storage: unsafe { std::mem::zeroed() },
            len: socklen::<libc::sockaddr_storage>(),
        }
    }

    /// `ip`:`port` (raw sockets want port 0).
    pub fn new(addr: SocketAddr) -> SockAddr {
        let mut out = SockAddr::empty();
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
                    sin6_flowinfo: a.flowinfo(),
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

    /// The address, if it is IPv4 or IPv6 (an IPv4-mapped IPv6 address as IPv4).
    pub fn to_socket_addr(&self) -> Option<SocketAddr> {
        match i32::from(self.storage.ss_family) {
            libc::AF_INET if self.len >= socklen::<libc::sockaddr_in>() => {
                // SAFETY: the family says the storage holds a sockaddr_in (any bytes are a
                // valid one; the storage is larger and aligned for it).
                let sin: libc::sockaddr_in =
                    unsafe { std::ptr::read(std::ptr::from_ref(&self.storage).cast()) };
                let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
                Some(SocketAddr::new(IpAddr::V4(ip), u16::from_be(sin.sin_port)))
            }
            libc::AF_INET6 if self.len >= socklen::<libc::sockaddr_in6>() => {
                // SAFETY: the family says the storage holds a sockaddr_in6 (as above).
                let sin6: libc::sockaddr_in6 =
                    unsafe { std::ptr::read(std::ptr::from_ref(&self.storage).cast()) };
                let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
                let ip = ip.to_ipv4_mapped().map_or(IpAddr::V6(ip), IpAddr::V4);
                Some(SocketAddr::new(ip, u16::from_be(sin6.sin6_port)))
            }
            _ => None,
        }
    }

    /// The IP address alone (see [`SockAddr::to_socket_addr`]).
    pub fn to_ip(&self) -> Option<IpAddr> {
        self.to_socket_addr().map(|a| a.ip())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_addresses_round_trip() {
        for s in [
            "192.0.2.1:4789",
            "[2001:db8::1]:4789",
            "[::ffff:192.0.2.7]:1",
        ] {
            let a: SocketAddr = s.parse().unwrap();
            let back = SockAddr::new(a).to_socket_addr().unwrap();
            let want = match a {
                SocketAddr::V6(v6) => v6
                    .ip()
                    .to_ipv4_mapped()
                    .map_or(a, |v4| SocketAddr::new(v4.into(), a.port())),
                SocketAddr::V4(_) => a,
            };
            assert_eq!(back, want);
        }
    }

    #[test]
    fn an_empty_address_is_no_ip() {
        assert_eq!(SockAddr::empty().to_ip(), None);
    }
}
