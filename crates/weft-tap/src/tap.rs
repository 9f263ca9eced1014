//! TAP ports: a Linux TAP device whose frames, with virtio-net headers, the switch reads and
//! writes. The host stack (or a network namespace, or a VM manager holding the fd) sits on
//! the other side.
//!
//! Each queue of a multi-queue TAP is its own [`TapQueue`] with its own receive and transmit
//! halves, so that workers can own queues. A TAP has no batched system calls: a read or a
//! write moves one frame. What cuts system calls per byte is GSO: with TSO on both sides a
//! read or write moves up to 64 KiB (dual-stack paper §6.1), and partial checksums skip the
//! summing that no wire will check (§6.2).
//!
//! ```no_run
//! use weft_tap::tap::{Tap, TapOptions};
//!
//! let tap = Tap::open(&TapOptions::new("weft0").netns("/run/netns/blue"))?;
//! let (rx, tx, stats) = tap.into_queues().remove(0).split();
//! // switch.add_port("blue", Some(Box::new(rx)), Box::new(tx), PortOptions::default())
//! # let _ = (rx, tx, stats);
//! # Ok::<(), weft_tap::PortError>(())
//! ```

pub(crate) mod rx;
mod tx;

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use weft_switch::PortCaps;
use weft_sys::ifreq::{
    ioctl_ifreq, tun_set_offload, tun_set_persist, tun_set_vnet_hdr_len, tun_set_vnet_le, IfReq,
    IfReqRequest,
};

use crate::error::PortError;
use crate::netns;
use crate::offloads::Offloads;
use crate::stats::PortStats;
use crate::sys;
use crate::vnet::TAP_HDR_LEN;

pub use rx::TapRx;
pub use tx::TapTx;

/// The most queues a TAP device has (the kernel's limit).
pub const MAX_QUEUES: usize = 256;
/// The default number of frames read per `receive`.
pub const DEFAULT_RX_FRAMES: usize = 64;

/// How to open a TAP device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapOptions {
    /// The interface name (1 to 15 bytes; a `%d` pattern lets the kernel pick). An existing
    /// TAP of that name is attached to; otherwise one is created, and it disappears when
    /// the last queue is closed (unless it was made persistent by someone else).
    pub name: String,
    /// The network namespace to create or find the device in (a file such as
    /// `/run/netns/NAME`); `None`: the current one. See [`crate::netns`].
    pub netns: Option<PathBuf>,
    /// Queues to open (1 to [`MAX_QUEUES`]).
    pub queues: usize,
    /// Open the device with `IFF_MULTI_QUEUE` (forced on when `queues > 1`; needed to
    /// attach to an existing multi-queue TAP).
    pub multi_queue: bool,
    /// Offloads to ask for; the kernel may refuse USO (the port then runs without it).
    pub offloads: Offloads,
    /// Set the interface's MTU first.
    pub mtu: Option<u32>,
    /// Bring the interface up.
    pub up: bool,
    /// Frames read per `receive` call, each into its own preallocated 64 KiB buffer.
    pub rx_frames: usize,
}

impl TapOptions {
    /// Defaults for device `name`: current namespace, one queue, every offload, MTU as it
    /// is, brought up, [`DEFAULT_RX_FRAMES`] frames per receive.
    pub fn new(name: &str) -> Self {
        TapOptions {
            name: name.to_string(),
            netns: None,
            queues: 1,
            multi_queue: false,
            offloads: Offloads::ALL,
            mtu: None,
            up: true,
            rx_frames: DEFAULT_RX_FRAMES,
        }
    }
    /// In the network namespace at `path`.
    pub fn netns(mut self, path: impl AsRef<Path>) -> Self {
        self.netns = Some(path.as_ref().to_path_buf());
        self
    }
    /// With `n` queues (multi-queue when `n > 1`).
    pub fn queues(mut self, n: usize) -> Self {
        self.queues = n;
        self
    }
    /// With these offloads.
    pub fn offloads(mut self, offloads: Offloads) -> Self {
        self.offloads = offloads;
        self
    }
    /// With this MTU.
    pub fn mtu(mut self, mtu: u32) -> Self {
        self.mtu = Some(mtu);
        self
    }
}

/// An open TAP device: its queues, name, MTU and negotiated offloads.
#[derive(Debug)]
pub struct Tap {
    name: String,
    ifindex: i32,
    mtu: usize,
    offloads: Offloads,
    queues: Vec<TapQueue>,
}

impl Tap {
    /// Creates or attaches to the device and opens its queues. See [`TapOptions`].
    pub fn open(options: &TapOptions) -> Result<Tap, PortError> {
        check_options(options)?;
        let multi_queue = options.multi_queue || options.queues > 1;
        let (fds, name, offloads, info) = netns::run_in(options.netns.as_deref(), || {
            let mut name = options.name.clone();
            let mut fds = Vec::with_capacity(options.queues);
            for _ in 0..options.queues {
                let (fd, actual) = open_queue(&name, multi_queue)?;
                name = actual;
                fds.push(fd);
            }
            let first = fds.first().ok_or_else(|| no_queue(&name))?;
            let offloads = negotiate_offloads(first, options.offloads, &name)?;
            let info = sys::configure_interface(&name, options.mtu, options.up)?;
            Ok((fds, name, offloads, info))
        })?;
        let caps = offloads.caps(info.mtu);
        let queues = fds
            .into_iter()
            .map(|fd| TapQueue::new(File::from(fd), caps, options.rx_frames))
            .collect();
        Ok(Tap {
            name,
            ifindex: info.ifindex,
            mtu: info.mtu,
            offloads,
            queues,
        })
    }

    /// The interface name (as the kernel chose it, for `%d` patterns).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The interface index (in the device's namespace).
    pub fn ifindex(&self) -> i32 {
        self.ifindex
    }
    /// The MTU read when the device was opened.
    pub fn mtu(&self) -> usize {
        self.mtu
    }
    /// The offloads the kernel accepted.
    pub fn offloads(&self) -> Offloads {
        self.offloads
    }
    /// What every queue reports to the core.
    pub fn caps(&self) -> PortCaps {
        self.offloads.caps(self.mtu)
    }
    /// The queues, in the order they were opened.
    pub fn into_queues(self) -> Vec<TapQueue> {
        self.queues
    }
}

/// What the kernel says of the TAP device behind an open queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapDeviceInfo {
    /// The interface's name.
    pub name: String,
    /// Whether the device outlives its last open queue (`IFF_PERSIST`).
    pub persistent: bool,
    /// Whether it has virtio-net headers on (`IFF_VNET_HDR`): weft's TAPs always do.
    pub vnet_hdr: bool,
}

/// The device behind queue `fd` (`TUNGETIFF`); an error for a descriptor that is not a
/// TUN/TAP queue, or a TUN device.
pub fn device_info(fd: BorrowedFd<'_>) -> Result<TapDeviceInfo, PortError> {
    let mut req = IfReq::new("");
    ioctl_ifreq(fd, IfReqRequest::TunGetIff, &mut req)
        .map_err(|e| PortError::sys("TUNGETIFF", "fd", e))?;
    let flags = libc::c_int::from(req.flags());
    if flags & libc::IFF_TAP == 0 {
        return Err(PortError::BadOption(format!(
            "{}: not a TAP device (flags {flags:#x})",
            req.name()
        )));
    }
    Ok(TapDeviceInfo {
        name: req.name(),
        persistent: flags & libc::IFF_PERSIST != 0,
        vnet_hdr: flags & libc::IFF_VNET_HDR != 0,
    })
}

/// Makes the TAP device behind queue `fd` outlive its last open queue (`IFF_PERSIST`), or
/// go with it again.
pub fn set_persistent(fd: BorrowedFd<'_>, persistent: bool) -> Result<(), PortError> {
    tun_set_persist(fd, persistent).map_err(|e| PortError::sys("TUNSETPERSIST", "fd", e))
}

/// One queue of a TAP device, not yet split into halves.
#[derive(Debug)]
pub struct TapQueue {
    file: File,
    caps: PortCaps,
    rx_frames: usize,
}

impl TapQueue {
    fn new(file: File, caps: PortCaps, rx_frames: usize) -> Self {
        TapQueue {
            file,
            caps,
            rx_frames: rx_frames.clamp(1, weft_switch::port::MAX_BATCH),
        }
    }

    /// A queue from a descriptor opened elsewhere (a VM manager passing a TAP fd, say).
    ///
    /// The descriptor must be a TAP queue with `IFF_VNET_HDR` whose offloads match `caps`
    /// (its header size is set to 12 here), or any descriptor that moves one frame per read
    /// and write behind a 12-byte virtio-net header (a `SOCK_SEQPACKET` socket: tests).
    /// It is made non-blocking.
    pub fn from_fd(fd: OwnedFd, caps: PortCaps, rx_frames: usize) -> Result<TapQueue, PortError> {
        check_tap_flags(&fd)?;
        set_vnet_hdr_len(&fd, "fd")?;
        sys::set_nonblocking(&fd).map_err(|e| PortError::sys("fcntl(O_NONBLOCK)", "fd", e))?;
        Ok(TapQueue::new(File::from(fd), caps, rx_frames))
    }

    /// What the queue reports to the core.
    pub fn caps(&self) -> PortCaps {
        self.caps
    }

    /// The queue's descriptor (for [`device_info`], [`set_persistent`], or a duplicate to
    /// pass to another process).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }

    /// The descriptor, what it reports and how many frames a receive reads.
    pub(crate) fn into_parts(self) -> (File, PortCaps, usize) {
        (self.file, self.caps, self.rx_frames)
    }

    /// The receive and transmit halves (sharing the descriptor) and their counters.
    pub fn split(self) -> (TapRx, TapTx, Arc<PortStats>) {
        let file = Arc::new(self.file);
        let stats = Arc::new(PortStats::default());
        let rx = TapRx::new(
            Arc::clone(&file),
            self.caps.mtu,
            self.rx_frames,
            Arc::clone(&stats),
        );
        let tx = TapTx::new(file, self.caps, Arc::clone(&stats));
        (rx, tx, stats)
    }
}

fn check_options(options: &TapOptions) -> Result<(), PortError> {
    sys::check_ifname(&options.name)?;
    if !(1..=MAX_QUEUES).contains(&options.queues) {
        return Err(PortError::BadOption(format!(
            "{} queues: use 1 to {MAX_QUEUES}",
            options.queues
        )));
    }
    if options.rx_frames == 0 || options.rx_frames > weft_switch::port::MAX_BATCH {
        return Err(PortError::BadOption(format!(
            "{} frames per receive: use 1 to {}",
            options.rx_frames,
            weft_switch::port::MAX_BATCH
        )));
    }
    Ok(())
}

fn no_queue(name: &str) -> PortError {
    PortError::BadOption(format!("{name}: no queue opened"))
}

/// Opens one queue of TAP `name` with a virtio-net header. Returns the descriptor and the
/// name the kernel gave the device.
fn open_queue(name: &str, multi_queue: bool) -> Result<(OwnedFd, String), PortError> {
    let fd =
        OwnedFd::from(sys::open_tun().map_err(|e| PortError::sys("open(/dev/net/tun)", name, e))?);
    let mut flags = libc::IFF_TAP | libc::IFF_NO_PI | libc::IFF_VNET_HDR;
    if multi_queue {
        flags |= libc::IFF_MULTI_QUEUE;
    }
    let mut req = IfReq::new(name);
    req.set_flags(
        libc::c_short::try_from(flags)
            .map_err(|_| PortError::Unsupported("TAP flags do not fit a short".into()))?,
    );
    ioctl_ifreq(&fd, IfReqRequest::TunSetIff, &mut req)
        .map_err(|e| PortError::sys("TUNSETIFF", name, e))?;
    let actual = req.name();
    set_vnet_hdr_len(&fd, &actual)?;
    Ok((fd, actual))
}

/// Refuses a TUN device, or a TAP without virtio-net headers: their frames would be misread.
/// Descriptors that are not TUN/TAP at all (`ENOTTY`) are the caller's responsibility.
fn check_tap_flags(fd: &OwnedFd) -> Result<(), PortError> {
    let mut req = IfReq::new("");
    match ioctl_ifreq(fd, IfReqRequest::TunGetIff, &mut req) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::ENOTTY) => return Ok(()),
        Err(e) => return Err(PortError::sys("TUNGETIFF", "fd", e)),
    }
    let flags = libc::c_int::from(req.flags());
    let name = req.name();
    if flags & libc::IFF_TAP == 0 || flags & libc::IFF_VNET_HDR == 0 {
        return Err(PortError::BadOption(format!(
            "{name}: not a TAP with IFF_VNET_HDR (flags {flags:#x})"
        )));
    }
    Ok(())
}

/// Sets the 12-byte header and little-endian fields. Descriptors that are not TAPs (tests'
/// sockets) answer `ENOTTY` and are left alone.
fn set_vnet_hdr_len(fd: &OwnedFd, name: &str) -> Result<(), PortError> {
    let len = libc::c_int::try_from(TAP_HDR_LEN).unwrap_or(12);
    match tun_set_vnet_hdr_len(fd, len) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::ENOTTY) => return Ok(()),
        Err(e) => return Err(PortError::sys("TUNSETVNETHDRSZ", name, e)),
    }
    // Virtio 1.x headers are little-endian; a TAP uses the host's order unless told. Kernels
    // without cross-endian support refuse, which is harmless on a little-endian host.
    if let Err(e) = tun_set_vnet_le(fd, true) {
        if cfg!(target_endian = "big") {
            return Err(PortError::sys("TUNSETVNETLE", name, e));
        }
    }
    Ok(())
}

/// Asks for `wanted` offloads, dropping USO when the kernel refuses it. Returns what the
/// kernel accepted.
fn negotiate_offloads(fd: &OwnedFd, wanted: Offloads, name: &str) -> Result<Offloads, PortError> {
    let wanted = wanted.normalized();
    let mut uso = wanted.uso;
    loop {
        let mut flags = 0;
        if wanted.csum {
            flags |= libc::TUN_F_CSUM;
        }
        if wanted.tso {
            flags |= libc::TUN_F_TSO4 | libc::TUN_F_TSO6 | libc::TUN_F_TSO_ECN;
        }
        if uso {
            flags |= libc::TUN_F_USO4 | libc::TUN_F_USO6;
        }
        match tun_set_offload(fd, flags) {
            Ok(()) => return Ok(Offloads { uso, ..wanted }),
            Err(e) if uso && e.raw_os_error() == Some(libc::EINVAL) => uso = false,
            Err(e) => return Err(PortError::sys("TUNSETOFFLOAD", name, e)),
        }
    }
}

/// A failed read or write that only means "nothing now".
pub(crate) fn is_would_block(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
}

#[cfg(test)]
mod tests;
