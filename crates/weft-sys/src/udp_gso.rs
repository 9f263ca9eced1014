//! One `sendmsg` of a gathered payload, optionally with `UDP_SEGMENT`: the kernel sends it
//! as datagrams of the segment size in one pass through its stack.

use std::io;
use std::os::fd::{AsFd, AsRawFd};

use crate::addr::SockAddr;
use crate::iovec::IoVec;
use crate::sockopt::opt::UDP_SEGMENT;

/// Most iovecs one `sendmsg` takes (`UIO_MAXIOV`, `linux/uio.h`).
pub const UIO_MAXIOV: usize = 1024;
/// Room for one `cmsghdr` carrying up to an `int` (`CMSG_SPACE(4)` on 64-bit Linux), in
/// u64s so that the buffer is aligned for `cmsghdr`.
const CMSG_INT_WORDS: usize = 3;

/// One `sendmsg(MSG_DONTWAIT)` to `to` of the payload gathered from `iov` (at most
/// [`UIO_MAXIOV`] entries); with `segment`, a `UDP_SEGMENT` control message: the kernel
/// copies the pieces into one buffer and sends it as datagrams of `segment` bytes (the last
/// may be shorter, and a datagram may be cut across pieces). Returns the bytes sent.
pub fn send_segmented(
    fd: impl AsFd,
    to: &SockAddr,
    iov: &[IoVec<'_>],
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
    // sendmsg only reads the iovecs (the pointer is mutable in the C declaration); `IoVec`
    // is a transparent `struct iovec`.
    msg.msg_iov = iov.as_ptr().cast_mut().cast();
    msg.msg_iovlen = iov.len();
    if let Some(size) = segment {
        let space = std::mem::size_of_val(&control);
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space;
        // SAFETY: msg_control points at `space` bytes, enough for one cmsghdr and an int
        // (CMSG_SPACE(4) = 24 <= 24), aligned for cmsghdr (a u64 array); CMSG_FIRSTHDR
        // returns a pointer into it (checked for null) and CMSG_DATA one past its header.
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
    // SAFETY: the header points at `addr` and `control` (locals, alive for the call) and at
    // `iov`, whose entries describe memory borrowed for at least this call (`IoVec`); the
    // kernel only reads them.
    let ret = unsafe { libc::sendmsg(fd.as_fd().as_raw_fd(), &msg, libc::MSG_DONTWAIT) };
    usize::try_from(ret).map_err(|_| io::Error::last_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    #[test]
    fn a_segmented_send_arrives_as_datagrams_of_the_segment_size() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_nonblocking(true).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = SockAddr::new(rx.local_addr().unwrap());
        let iov = [IoVec::new(&[1; 6]), IoVec::new(&[2; 4])];
        match send_segmented(&tx, &to, &iov, Some(4)) {
            Ok(n) => assert_eq!(n, 10),
            // Kernels without UDP GSO.
            Err(e) if e.raw_os_error() == Some(libc::ENOPROTOOPT) => return,
            Err(e) => panic!("{e}"),
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut buf = [0u8; 16];
        let lens: Vec<usize> = (0..3).map(|_| rx.recv(&mut buf).unwrap()).collect();
        assert_eq!(lens, [4, 4, 2]);
    }

    #[test]
    fn too_many_iovecs_are_refused_before_the_call() {
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = SockAddr::new("127.0.0.1:9".parse().unwrap());
        let iov = vec![IoVec::EMPTY; UIO_MAXIOV + 1];
        let e = send_segmented(&tx, &to, &iov, None).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EMSGSIZE));
    }
}
