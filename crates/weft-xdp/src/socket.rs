//! The XDP socket: the UMEM registered, its four rings mapped, bound to one queue.

use std::ffi::CString;
use std::io;
use std::num::NonZeroU32;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};

use xdpilone::{
    CompletionQueue, FillQueue, IfInfo, RingRx, RingTx, Socket, SocketConfig, Umem, UmemConfig,
};

use crate::chunks::Layout;
use crate::error::XdpError;
use crate::options::CHUNK_SIZE;
use crate::umem::UmemArea;

/// The rings of a bound socket.
pub(crate) struct Rings {
    pub(crate) fill: FillQueue,
    pub(crate) completion: CompletionQueue,
    pub(crate) rx: RingRx,
    pub(crate) tx: RingTx,
    /// A second descriptor of the socket: for the XSKMAP and the kernel's statistics.
    pub(crate) fd: OwnedFd,
    /// Bound with `XDP_ZEROCOPY`.
    pub(crate) zero_copy: bool,
}

/// `XDP_USE_NEED_WAKEUP`: the kernel says when a ring needs a system call to move.
const NEED_WAKEUP: u16 = SocketConfig::XDP_BIND_NEED_WAKEUP;

/// Opens a socket on `ifname` queue `queue` over `area`: zero-copy first when
/// `try_zero_copy`, copy mode if the driver refuses it (or when not tried).
pub(crate) fn open(
    area: &UmemArea,
    layout: Layout,
    ifname: &str,
    queue: u32,
    try_zero_copy: bool,
) -> Result<Rings, XdpError> {
    if try_zero_copy {
        if let Ok(rings) = open_with(area, layout, ifname, queue, SocketConfig::XDP_BIND_ZEROCOPY) {
            return Ok(rings);
        }
        // Everything of the failed attempt is closed: start again in copy mode.
    }
    open_with(area, layout, ifname, queue, SocketConfig::XDP_BIND_COPY)
}

fn errno(e: xdpilone::Errno) -> io::Error {
    io::Error::from_raw_os_error(e.get_raw().abs())
}

fn open_with(
    area: &UmemArea,
    layout: Layout,
    ifname: &str,
    queue: u32,
    mode_flag: u16,
) -> Result<Rings, XdpError> {
    let fail =
        |what: &'static str| move |e: xdpilone::Errno| XdpError::socket(what, ifname, errno(e));
    let name = CString::new(ifname).map_err(|_| XdpError::NoInterface {
        ifname: ifname.to_string(),
    })?;
    let mut info = IfInfo::invalid();
    info.from_name(&name).map_err(|_| XdpError::NoInterface {
        ifname: ifname.to_string(),
    })?;
    info.set_queue(queue);
    let config = UmemConfig {
        fill_size: layout.rx_chunks(),
        complete_size: layout.tx_chunks(),
        frame_size: CHUNK_SIZE,
        headroom: 0,
        flags: 0,
    };
    // SAFETY: `area` is a page-aligned mapping of `area.len()` bytes (a whole number of
    // chunks) that stays mapped while any ring of this socket is used: the halves hold it
    // beside their rings. The library never reads or writes the area itself; the kernel
    // pins its pages at registration.
    let umem = unsafe { Umem::new(config, area.as_slice_ptr()) }.map_err(fail("XDP_UMEM_REG"))?;
    let socket = Socket::with_shared(&info, &umem).map_err(fail("socket(AF_XDP)"))?;
    let device = umem.fq_cq(&socket).map_err(fail("XDP_UMEM_FILL_RING"))?;
    let rx_size = NonZeroU32::new(layout.rx_chunks());
    let tx_size = NonZeroU32::new(layout.tx_chunks());
    let user = umem
        .rx_tx(
            &socket,
            &SocketConfig {
                rx_size,
                tx_size,
                bind_flags: mode_flag | NEED_WAKEUP,
            },
        )
        .map_err(fail("XDP_RX_RING"))?;
    let rx = user.map_rx().map_err(fail("mmap(rx ring)"))?;
    let tx = user.map_tx().map_err(fail("mmap(tx ring)"))?;
    umem.bind(&user).map_err(fail("bind"))?;
    let (fill, completion) = device.into_parts();
    let fd = dup(rx.as_raw_fd()).map_err(|e| XdpError::socket("dup", ifname, e))?;
    Ok(Rings {
        fill,
        completion,
        rx,
        tx,
        fd,
        zero_copy: mode_flag == SocketConfig::XDP_BIND_ZEROCOPY,
    })
}

/// A second descriptor of the socket `fd`, which the caller's rings hold open.
fn dup(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: `fd` is the socket the caller's rings own; it stays open for this call.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    borrowed.try_clone_to_owned()
}

/// The kernel's counters of an XDP socket (`XDP_STATISTICS`), cumulative.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct KernelStats {
    pub(crate) rx_dropped: u64,
    pub(crate) rx_invalid_descs: u64,
    pub(crate) tx_invalid_descs: u64,
    pub(crate) rx_ring_full: u64,
    pub(crate) rx_fill_ring_empty_descs: u64,
    pub(crate) tx_ring_empty_descs: u64,
}

/// `SOL_XDP` and `XDP_STATISTICS` (linux/if_xdp.h).
const SOL_XDP: libc::c_int = 283;
const XDP_STATISTICS: libc::c_int = 7;

/// Reads the kernel's counters of the socket `fd`; zeros when the kernel will not say.
pub(crate) fn kernel_stats(fd: &OwnedFd) -> KernelStats {
    let mut raw = [0u64; 6];
    let mut len = libc::socklen_t::try_from(std::mem::size_of_val(&raw)).unwrap_or(0);
    // SAFETY: `raw` is writable for `len` bytes (struct xdp_statistics: six u64), `len` is
    // passed by pointer and updated by the kernel; `fd` is open.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            SOL_XDP,
            XDP_STATISTICS,
            raw.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return KernelStats::default();
    }
    KernelStats {
        rx_dropped: raw[0],
        rx_invalid_descs: raw[1],
        tx_invalid_descs: raw[2],
        rx_ring_full: raw[3],
        rx_fill_ring_empty_descs: raw[4],
        tx_ring_empty_descs: raw[5],
    }
}
