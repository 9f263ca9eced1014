//! Sockets std does not open (raw, packet), binding them, and descriptor flags.

use std::ffi::c_int;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

use nix::fcntl::{fcntl, FcntlArg, OFlag};

use crate::addr::{socklen, SockAddr};
use crate::cvt;

// C constants narrowed to the width of the field they go in; each fits by definition
// (AF_PACKET = 17, ETH_P_ALL = 3).
#[allow(clippy::cast_possible_truncation)]
const AF_PACKET_FAMILY: libc::c_ushort = libc::AF_PACKET as libc::c_ushort;
#[allow(clippy::cast_possible_truncation)]
const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();

/// A socket of the given family, type and protocol (`SOCK_CLOEXEC` is added).
pub fn socket(family: c_int, ty: c_int, protocol: c_int) -> io::Result<OwnedFd> {
    // SAFETY: socket takes no memory arguments.
    let fd = cvt(unsafe { libc::socket(family, ty | libc::SOCK_CLOEXEC, protocol) })?;
    // SAFETY: socket returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Binds a socket to an IPv4 or IPv6 address.
pub fn bind(fd: impl AsFd, addr: &SockAddr) -> io::Result<()> {
    // SAFETY: the pointer and length describe `addr`'s storage, a valid sockaddr of `len`
    // bytes, live for the call; the kernel only reads it.
    cvt(unsafe {
        libc::bind(
            fd.as_fd().as_raw_fd(),
            std::ptr::from_ref(&addr.storage).cast(),
            addr.len,
        )
    })
    .map(drop)
}

/// Binds an `AF_PACKET` socket to interface `ifindex`, all protocols.
pub fn bind_packet(fd: impl AsFd, ifindex: c_int) -> io::Result<()> {
    // SAFETY: sockaddr_ll is a plain C struct; all-zero is valid.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    addr.sll_family = AF_PACKET_FAMILY;
    addr.sll_protocol = ETH_P_ALL_BE;
    addr.sll_ifindex = ifindex;
    // SAFETY: the pointer and length describe `addr`, a valid sockaddr_ll for the call.
    cvt(unsafe {
        libc::bind(
            fd.as_fd().as_raw_fd(),
            std::ptr::from_ref(&addr).cast(),
            socklen::<libc::sockaddr_ll>(),
        )
    })
    .map(drop)
}

/// Sets `O_NONBLOCK` on a descriptor.
pub fn set_nonblocking(fd: impl AsFd) -> io::Result<()> {
    let fd = fd.as_fd();
    let flags = fcntl(fd, FcntlArg::F_GETFL)?;
    let flags = OFlag::from_bits_retain(flags) | OFlag::O_NONBLOCK;
    fcntl(fd, FcntlArg::F_SETFL(flags))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raw_socket_binds_to_an_ip_address() {
        let Ok(fd) = socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_UDP) else {
            return; // Needs CAP_NET_RAW.
        };
        let addr = SockAddr::new("127.0.0.1:0".parse().unwrap());
        bind(&fd, &addr).unwrap();
    }

    #[test]
    fn nonblocking_is_set_on_a_descriptor() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        set_nonblocking(&a).unwrap();
        let flags = fcntl(a.as_fd(), FcntlArg::F_GETFL).unwrap();
        assert_ne!(flags & libc::O_NONBLOCK, 0);
    }
}
