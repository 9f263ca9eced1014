//! Socket options, typed: each option names the type of its value ([`SockOpt`]), and only
//! plain C data the kernel may read and write byte for byte ([`OptValue`]) can be one.

use std::ffi::c_int;
use std::io;
use std::marker::PhantomData;
use std::os::fd::{AsFd, AsRawFd};

use crate::addr::socklen;
use crate::cvt;

mod sealed {
    pub trait Sealed {}
}

/// A socket option value: plain C data for which every byte pattern (all zeroes included) is
/// a valid value, so the kernel may read it and fill it in. Implemented for the types weft's
/// options take; sealed, so no other type can claim it.
pub trait OptValue: Copy + sealed::Sealed {}

macro_rules! opt_values {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl OptValue for $t {}
    )*};
}
opt_values!(
    c_int,
    u32,
    libc::tpacket_req3,
    libc::tpacket_stats_v3,
    libc::packet_mreq
);

/// A socket option (`level`, `name`) whose value is a `T`.
#[derive(Debug)]
pub struct SockOpt<T> {
    level: c_int,
    name: c_int,
    value: PhantomData<fn() -> T>,
}

impl<T> Clone for SockOpt<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SockOpt<T> {}

impl<T: OptValue> SockOpt<T> {
    /// The option `name` at `level`, taking a `T`.
    pub const fn new(level: c_int, name: c_int) -> Self {
        SockOpt {
            level,
            name,
            value: PhantomData,
        }
    }
}

/// `setsockopt(fd, opt, value)`.
pub fn set<T: OptValue>(fd: impl AsFd, opt: SockOpt<T>, value: &T) -> io::Result<()> {
    // SAFETY: the pointer and length describe `value`, a live `T` for the call, which the
    // kernel only reads; `T` is plain data (`OptValue`).
    cvt(unsafe {
        libc::setsockopt(
            fd.as_fd().as_raw_fd(),
            opt.level,
            opt.name,
            std::ptr::from_ref(value).cast(),
            socklen::<T>(),
        )
    })
    .map(drop)
}

/// `getsockopt(fd, opt)`.
pub fn get<T: OptValue>(fd: impl AsFd, opt: SockOpt<T>) -> io::Result<T> {
    // SAFETY: `T` is plain data for which all zeroes is a valid value (`OptValue`).
    let mut value: T = unsafe { std::mem::zeroed() };
    let mut len = socklen::<T>();
    // SAFETY: the pointer and length describe `value`, live and exclusively borrowed for
    // the call; the kernel writes at most `len` bytes, and any bytes are a valid `T`.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_fd().as_raw_fd(),
            opt.level,
            opt.name,
            std::ptr::from_mut(&mut value).cast(),
            &mut len,
        )
    })?;
    Ok(value)
}

/// Attaches a classic BPF socket filter that accepts nothing: a sending-only socket then
/// queues none of the datagrams it would otherwise receive.
pub fn attach_drop_all_filter(fd: impl AsFd) -> io::Result<()> {
    let drop_all = [libc::sock_filter {
        code: 0x06, // BPF_RET | BPF_K: return 0 bytes.
        jt: 0,
        jf: 0,
        k: 0,
    }];
    let prog = libc::sock_fprog {
        len: 1,
        filter: drop_all.as_ptr().cast_mut(),
    };
    // SAFETY: `prog` points at `drop_all`, one instruction long as `len` says; both live for
    // the call, and the kernel copies the program without writing it.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_fd().as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            std::ptr::from_ref(&prog).cast(),
            socklen::<libc::sock_fprog>(),
        )
    })
    .map(drop)
}

/// The options weft sets and reads.
pub mod opt {
    use super::SockOpt;
    use std::ffi::c_int;

    /// `SOL_UDP` option: send one buffer as equal-size datagrams (`linux/udp.h`).
    pub const UDP_SEGMENT: c_int = 103;
    /// `SOL_UDP` option number of [`UDP_GRO`] (`linux/udp.h`).
    pub const UDP_GRO_NAME: c_int = 104;

    /// IPv4 time to live.
    pub const IP_TTL: SockOpt<c_int> = SockOpt::new(libc::IPPROTO_IP, libc::IP_TTL);
    /// IPv4 type of service (DSCP << 2).
    pub const IP_TOS: SockOpt<c_int> = SockOpt::new(libc::IPPROTO_IP, libc::IP_TOS);
    /// The path MTU of a connected IPv4 socket.
    pub const IP_MTU: SockOpt<c_int> = SockOpt::new(libc::IPPROTO_IP, libc::IP_MTU);
    /// IPv6 hop limit for unicast.
    pub const IPV6_UNICAST_HOPS: SockOpt<c_int> =
        SockOpt::new(libc::IPPROTO_IPV6, libc::IPV6_UNICAST_HOPS);
    /// IPv6 traffic class (DSCP << 2).
    pub const IPV6_TCLASS: SockOpt<c_int> = SockOpt::new(libc::IPPROTO_IPV6, libc::IPV6_TCLASS);
    /// Where a raw IPv6 socket's kernel-computed checksum goes.
    pub const IPV6_CHECKSUM: SockOpt<c_int> = SockOpt::new(libc::IPPROTO_IPV6, libc::IPV6_CHECKSUM);
    /// The path MTU of a connected IPv6 socket.
    pub const IPV6_MTU: SockOpt<c_int> = SockOpt::new(libc::IPPROTO_IPV6, libc::IPV6_MTU);
    /// Receive buffer size (capped by `net.core.rmem_max`).
    pub const SO_RCVBUF: SockOpt<c_int> = SockOpt::new(libc::SOL_SOCKET, libc::SO_RCVBUF);
    /// Receive buffer size past the cap (needs `CAP_NET_ADMIN`).
    pub const SO_RCVBUFFORCE: SockOpt<c_int> = SockOpt::new(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE);
    /// Send buffer size (capped by `net.core.wmem_max`).
    pub const SO_SNDBUF: SockOpt<c_int> = SockOpt::new(libc::SOL_SOCKET, libc::SO_SNDBUF);
    /// Send buffer size past the cap (needs `CAP_NET_ADMIN`).
    pub const SO_SNDBUFFORCE: SockOpt<c_int> = SockOpt::new(libc::SOL_SOCKET, libc::SO_SNDBUFFORCE);
    /// Report the socket's drop count with each datagram received.
    pub const SO_RXQ_OVFL: SockOpt<c_int> = SockOpt::new(libc::SOL_SOCKET, libc::SO_RXQ_OVFL);
    /// Send keepalive probes on an idle TCP connection.
    pub const SO_KEEPALIVE: SockOpt<c_int> = SockOpt::new(libc::SOL_SOCKET, libc::SO_KEEPALIVE);
    /// Seconds of idleness before the first keepalive probe.
    pub const TCP_KEEPIDLE: SockOpt<c_int> = SockOpt::new(libc::IPPROTO_TCP, libc::TCP_KEEPIDLE);
    /// Seconds between keepalive probes.
    pub const TCP_KEEPINTVL: SockOpt<c_int> = SockOpt::new(libc::IPPROTO_TCP, libc::TCP_KEEPINTVL);
    /// Unanswered keepalive probes before the connection is dropped.
    pub const TCP_KEEPCNT: SockOpt<c_int> = SockOpt::new(libc::IPPROTO_TCP, libc::TCP_KEEPCNT);
    /// Milliseconds sent data may stay unacknowledged before the connection is dropped.
    pub const TCP_USER_TIMEOUT: SockOpt<u32> =
        SockOpt::new(libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT);
    /// Let the kernel coalesce received datagrams of one flow.
    pub const UDP_GRO: SockOpt<c_int> = SockOpt::new(libc::SOL_UDP, UDP_GRO_NAME);
    /// A virtio-net header before every frame of a packet socket.
    pub const PACKET_VNET_HDR: SockOpt<c_int> =
        SockOpt::new(libc::SOL_PACKET, libc::PACKET_VNET_HDR);
    /// A packet socket's ring version (`TPACKET_V3`).
    pub const PACKET_VERSION: SockOpt<c_int> = SockOpt::new(libc::SOL_PACKET, libc::PACKET_VERSION);
    /// Do not hand a packet socket the frames it sent itself.
    pub const PACKET_IGNORE_OUTGOING: SockOpt<c_int> =
        SockOpt::new(libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING);
    /// Join a membership (promiscuous mode) on a packet socket's interface.
    pub const PACKET_ADD_MEMBERSHIP: SockOpt<libc::packet_mreq> =
        SockOpt::new(libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP);
    /// Set up a packet socket's receive ring.
    pub const PACKET_RX_RING: SockOpt<libc::tpacket_req3> =
        SockOpt::new(libc::SOL_PACKET, libc::PACKET_RX_RING);
    /// A `TPACKET_V3` socket's counters since the last read (reading resets them).
    pub const PACKET_STATISTICS: SockOpt<libc::tpacket_stats_v3> =
        SockOpt::new(libc::SOL_PACKET, libc::PACKET_STATISTICS);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    #[test]
    fn an_int_option_set_reads_back() {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        set(&sock, opt::IP_TTL, &17).unwrap();
        assert_eq!(get(&sock, opt::IP_TTL).unwrap(), 17);
        set(&sock, opt::IP_TOS, &(46 << 2)).unwrap();
        assert_eq!(get(&sock, opt::IP_TOS).unwrap(), 46 << 2);
    }

    #[test]
    fn an_option_the_socket_lacks_is_an_error() {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let e = set(&sock, opt::PACKET_VERSION, &2).unwrap_err();
        assert!(e.raw_os_error().is_some(), "{e}");
    }

    #[test]
    fn a_socket_with_the_drop_all_filter_receives_nothing() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        attach_drop_all_filter(&rx).unwrap();
        rx.set_nonblocking(true).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(b"x", rx.local_addr().unwrap()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut buf = [0u8; 4];
        let e = rx.recv(&mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    }
}
