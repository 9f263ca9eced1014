//! The interface ioctls: `struct ifreq` requests (TUN/TAP set-up, an interface's flags, MTU
//! and index) and the TUN requests that take an `int`. Each request is an enum variant, so
//! that no caller can pass a request whose argument is something else.

use std::ffi::{c_int, c_short};
use std::io;
use std::os::fd::AsFd;

use vmm_sys_util::ioctl::{ioctl_with_mut_ref, ioctl_with_ref, ioctl_with_val};

use crate::cvt;

/// Longest interface name (without the NUL).
pub const MAX_IFNAME: usize = libc::IFNAMSIZ - 1;

/// Whether `name` is a name the kernel takes for an interface: 1 to [`MAX_IFNAME`] bytes,
/// no '/', ':', whitespace or NUL (what `dev_valid_name` refuses, and ':' for aliases).
pub fn is_valid_ifname(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_IFNAME
        && !name
            .chars()
            .any(|c| c == '/' || c == ':' || c == '\0' || c.is_whitespace())
}

/// A `struct ifreq`: an interface name and one integer the request reads or fills in.
#[derive(Clone, Copy)]
pub struct IfReq(libc::ifreq);

impl std::fmt::Debug for IfReq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("IfReq").field(&self.name()).finish()
    }
}

impl IfReq {
    /// A request naming `name` (cut at [`MAX_IFNAME`] bytes), the rest zero.
    pub fn new(name: &str) -> IfReq {
        // SAFETY: ifreq is a plain C struct (a name array and a union of integers, addresses
        // and a pointer) for which all-zero bytes is a valid value.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes().take(MAX_IFNAME)) {
            *dst = libc::c_char::from_ne_bytes([src]);
        }
        IfReq(req)
    }

    /// The name the kernel left (it fills in `%d` patterns).
    pub fn name(&self) -> String {
        let bytes: Vec<u8> = self
            .0
            .ifr_name
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c.to_ne_bytes()[0])
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The flags member (`IFF_*`).
    pub fn flags(&self) -> c_short {
        // SAFETY: the union's bytes are always initialised (zeroed at creation, written only
        // through its members or by the kernel), and any bytes are a valid c_short.
        unsafe { self.0.ifr_ifru.ifru_flags }
    }

    /// Sets the flags member.
    pub fn set_flags(&mut self, flags: c_short) {
        self.0.ifr_ifru.ifru_flags = flags;
    }

    /// The MTU member.
    pub fn mtu(&self) -> c_int {
        // SAFETY: as in `flags`; any bytes are a valid c_int.
        unsafe { self.0.ifr_ifru.ifru_mtu }
    }

    /// Sets the MTU member.
    pub fn set_mtu(&mut self, mtu: c_int) {
        self.0.ifr_ifru.ifru_mtu = mtu;
    }

    /// The interface index member.
    pub fn ifindex(&self) -> c_int {
        // SAFETY: as in `flags`; any bytes are a valid c_int.
        unsafe { self.0.ifr_ifru.ifru_ifindex }
    }
}

/// The requests that take a `struct ifreq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfReqRequest {
    /// `TUNSETIFF`: create or attach to a TUN/TAP device (name and flags).
    TunSetIff,
    /// `TUNGETIFF`: a TUN/TAP descriptor's name and flags.
    TunGetIff,
    /// `SIOCGIFFLAGS`.
    GetFlags,
    /// `SIOCSIFFLAGS`.
    SetFlags,
    /// `SIOCGIFMTU`.
    GetMtu,
    /// `SIOCSIFMTU`.
    SetMtu,
    /// `SIOCGIFINDEX`.
    GetIndex,
}

impl IfReqRequest {
    fn code(self) -> libc::Ioctl {
        match self {
            IfReqRequest::TunSetIff => libc::TUNSETIFF,
            IfReqRequest::TunGetIff => libc::TUNGETIFF,
            IfReqRequest::GetFlags => libc::SIOCGIFFLAGS,
            IfReqRequest::SetFlags => libc::SIOCSIFFLAGS,
            IfReqRequest::GetMtu => libc::SIOCGIFMTU,
            IfReqRequest::SetMtu => libc::SIOCSIFMTU,
            IfReqRequest::GetIndex => libc::SIOCGIFINDEX,
        }
    }
}

/// An ioctl whose argument is an `ifreq` the kernel reads and may update.
pub fn ioctl_ifreq(fd: impl AsFd, request: IfReqRequest, req: &mut IfReq) -> io::Result<()> {
    // SAFETY: every request of `IfReqRequest` takes a pointer to one `struct ifreq`, which
    // `req.0` is, live and exclusively borrowed for the call; the kernel writes only
    // integer members and the name.
    cvt(unsafe { ioctl_with_mut_ref(&fd.as_fd(), request.code(), &mut req.0) }).map(drop)
}

/// `TUNSETVNETHDRSZ`: the length of the virtio-net header before every frame.
pub fn tun_set_vnet_hdr_len(fd: impl AsFd, len: c_int) -> io::Result<()> {
    // SAFETY: TUNSETVNETHDRSZ reads one `int` through the pointer, which points at `len` for
    // the duration of the call.
    cvt(unsafe { ioctl_with_ref(&fd.as_fd(), libc::TUNSETVNETHDRSZ, &len) }).map(drop)
}

/// `TUNSETVNETLE`: whether virtio-net header fields are little-endian.
pub fn tun_set_vnet_le(fd: impl AsFd, little_endian: bool) -> io::Result<()> {
    let value = c_int::from(little_endian);
    // SAFETY: TUNSETVNETLE reads one `int` through the pointer, which points at `value` for
    // the duration of the call.
    cvt(unsafe { ioctl_with_ref(&fd.as_fd(), libc::TUNSETVNETLE, &value) }).map(drop)
}

/// `TUNSETOFFLOAD`: the offloads (`TUN_F_*`) the reader of the device accepts.
pub fn tun_set_offload(fd: impl AsFd, flags: u32) -> io::Result<()> {
    // SAFETY: TUNSETOFFLOAD takes its argument by value; no memory is read or written
    // through it.
    cvt(unsafe { ioctl_with_val(&fd.as_fd(), libc::TUNSETOFFLOAD, u64::from(flags)) }).map(drop)
}

/// `TUNSETPERSIST`: whether the TAP device outlives its last open queue.
pub fn tun_set_persist(fd: impl AsFd, persist: bool) -> io::Result<()> {
    // SAFETY: TUNSETPERSIST takes its argument by value; no memory is read or written
    // through it.
    cvt(unsafe { ioctl_with_val(&fd.as_fd(), libc::TUNSETPERSIST, u64::from(persist)) }).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ifreq_round_trips_its_name_and_cuts_long_ones() {
        assert_eq!(IfReq::new("wt-a").name(), "wt-a");
        assert_eq!(IfReq::new("123456789012345").name(), "123456789012345");
        assert_eq!(IfReq::new("1234567890123456").name(), "123456789012345");
    }

    #[test]
    fn interface_names_the_kernel_refuses_are_invalid() {
        for ok in ["eth0", "wt-a", "123456789012345", "br0.10", "vxlan_42"] {
            assert!(is_valid_ifname(ok), "{ok:?}");
        }
        for bad in [
            "",
            "1234567890123456",
            "a/b",
            "eth0:1",
            "a b",
            "a\tb",
            "a\0b",
        ] {
            assert!(!is_valid_ifname(bad), "{bad:?}");
        }
    }

    #[test]
    fn the_loopback_interface_has_an_index_and_an_mtu() {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut req = IfReq::new("lo");
        ioctl_ifreq(&sock, IfReqRequest::GetIndex, &mut req).unwrap();
        assert!(req.ifindex() > 0);
        let mut req = IfReq::new("lo");
        ioctl_ifreq(&sock, IfReqRequest::GetMtu, &mut req).unwrap();
        assert!(req.mtu() >= 1280);
        let mut req = IfReq::new("lo");
        ioctl_ifreq(&sock, IfReqRequest::GetFlags, &mut req).unwrap();
        assert_ne!(c_int::from(req.flags()) & libc::IFF_LOOPBACK, 0);
    }

    #[test]
    fn a_tun_request_on_a_socket_is_refused() {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(tun_set_vnet_hdr_len(&sock, 12).is_err());
    }
}
