//! The system calls weft's ports share, behind safe types, so that the port crates need no
//! `unsafe` of their own except where memory is truly shared with the kernel or a guest.
//!
//! - [`sockopt`]: typed socket options ([`SockOpt<T>`](sockopt::SockOpt) names its value's
//!   type) and the drop-all socket filter.
//! - [`ifreq`]: the `struct ifreq` ioctls (TUN/TAP set-up, an interface's flags, MTU and
//!   index) and the TUN ioctls that take an `int`.
//! - [`socket`]: raw and packet sockets, binding them, `O_NONBLOCK`; [`SockAddr`].
//! - [`iovec`]: [`IoVec`] / [`IoVecMut`], iovecs that borrow the memory they describe —
//!   weft's own bytes or a guest's, as a `VolatileSlice`, never as a `&[u8]` — and
//!   `writev`.
//! - [`mmsg`]: [`MmsgBatch`], `sendmmsg` / `recvmmsg` batches that own their headers,
//!   iovecs, addresses and control buffers across batches (no allocation per datagram).
//! - [`udp_gso`]: one `sendmsg` with `UDP_SEGMENT`.
//! - [`event`]: the one epoll / eventfd family (vmm-sys-util's).
//! - [`affinity`], [`netns`]: pinning a thread to a CPU, joining a network namespace
//!   (nix's safe wrappers).
//!
//! # Where `unsafe` lives
//!
//! Every `unsafe` block of this crate calls into the C library (a system call, a `zeroed`
//! C struct, a read of an `ifreq` union member, a `sockaddr` written into its storage) or
//! vouches that a type holding raw pointers may cross threads; each has a `// SAFETY:`
//! comment. Hand-written rather than taken from nix or socket2 where their safe wrappers
//! take `IoSlice`s: that needs a `&[u8]`, which must never be formed over a guest's memory,
//! and their multi-message APIs do not keep their storage between calls. nix's wrappers
//! are used where they fit (affinity, `setns`, `fcntl`).
//!
//! After this crate, `unsafe` in the workspace (blocks / `unsafe fn` / `unsafe impl`):
//!
//! | crate | where, and why |
//! |---|---|
//! | weft-sys | the system-call layer itself (this crate) |
//! | weft-tap | `ring` only: the `TPACKET_V3` receive ring, memory the kernel writes (the rest of the crate denies unsafe code) |
//! | weft-vhost | guest memory and the virtqueues (vm-memory, virtio-queue) |
//! | weft-overlay | none outside tests: `#![forbid(unsafe_code)]` (one unit test drops a capability with `capset`) |
//! | weft-runtime, weft-netns | none: `#![forbid(unsafe_code)]` |
//! | weft-packet, weft-switch | none: no I/O |

pub mod addr;
pub mod affinity;
pub mod event;
pub mod ifreq;
pub mod iovec;
pub mod mmsg;
pub mod netns;
pub mod socket;
pub mod sockopt;
pub mod udp_gso;

pub use addr::SockAddr;
pub use iovec::{IoVec, IoVecList, IoVecMut, IoVecStore};
pub use mmsg::{Iovecs, MmsgBatch, Received, RecvMsgs, SendMsgs};

/// A C return value as a result: negative means `errno` says what went wrong.
fn cvt(ret: libc::c_int) -> std::io::Result<libc::c_int> {
    if ret < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}
