//! AF_PACKET ports: an existing interface (veth or physical) on the switch, as VNET/P's
//! "direct send / direct receive" and VALE's host NIC ports.
//!
//! Receive uses a memory-mapped `TPACKET_V3` ring: the kernel packs frames into blocks,
//! `frame()` slices point into the ring, and `finish` hands consumed blocks back; no system
//! call per frame, none at all while blocks are ready. Frames come with a virtio-net header
//! (`PACKET_VNET_HDR`), so super-frames and partial checksums pass as they are.
//!
//! Transmit uses `sendmmsg`: one call per burst, each message `[header, head, body]`
//! gathered from where the bytes lie. A `TPACKET_V2` transmit ring would need a copy into
//! fixed-size slots big enough for 64 KiB super-frames (and a `send` to kick it anyway);
//! `sendmmsg` copies once, in the kernel, and takes any frame size.
//!
//! Frames the switch sends are not received back: `PACKET_IGNORE_OUTGOING` where the kernel
//! has it (4.20+), else frames marked `PACKET_OUTGOING` are skipped (and counted in
//! [`PortStats::rx_own_skipped`]). Either way, the host's own outgoing traffic on that
//! interface is not seen: the port sees what arrives on the wire.
//!
//! A V3 block is handed over when full or when its retire timer fires, so a lone frame
//! waits up to [`AfPacketOptions::retire_timeout_ms`] (rounded up to a jiffy) on receive:
//! the price of packing frames densely. Under load blocks fill and the timer never fires.

mod rx;
mod tx;

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use weft_switch::PortCaps;

use crate::error::PortError;
use crate::netns;
use crate::offloads::Offloads;
use crate::ring::RxRing;
use crate::stats::PortStats;
use crate::sys;

pub use rx::AfPacketRx;
pub use tx::AfPacketTx;

/// Smallest block: holds one 64 KiB super-frame with its ring headers.
pub const MIN_BLOCK_SIZE: usize = 128 * 1024;

/// How to open an AF_PACKET port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfPacketOptions {
    /// The interface to bind to (it must exist).
    pub interface: String,
    /// The network namespace the interface is in; `None`: the current one.
    pub netns: Option<PathBuf>,
    /// Offloads reported to the core for transmit (the kernel segments or checksums what
    /// the interface cannot). Received frames carry whatever the kernel has: super-frames
    /// included, whatever this says.
    pub offloads: Offloads,
    /// Receive every frame on the wire, not only those for the interface's address.
    pub promiscuous: bool,
    /// Bring the interface up.
    pub up: bool,
    /// Bytes per ring block: a power of two, at least [`MIN_BLOCK_SIZE`].
    pub block_size: usize,
    /// Blocks in the ring (2 to 4096).
    pub block_count: usize,
    /// Milliseconds after which the kernel hands over a block that is not full (1 or more).
    pub retire_timeout_ms: u32,
}

impl AfPacketOptions {
    /// Defaults for `interface`: current namespace, every offload, promiscuous, brought up,
    /// 64 blocks of 128 KiB, 1 ms retire timeout.
    pub fn new(interface: &str) -> Self {
        AfPacketOptions {
            interface: interface.to_string(),
            netns: None,
            offloads: Offloads::ALL,
            promiscuous: true,
            up: true,
            block_size: MIN_BLOCK_SIZE,
            block_count: 64,
            retire_timeout_ms: 1,
        }
    }
    /// In the network namespace at `path`.
    pub fn netns(mut self, path: impl AsRef<Path>) -> Self {
        self.netns = Some(path.as_ref().to_path_buf());
        self
    }
    /// With these offloads.
    pub fn offloads(mut self, offloads: Offloads) -> Self {
        self.offloads = offloads;
        self
    }
}

/// An open AF_PACKET port, not yet split into halves.
pub struct AfPacket {
    fd: Arc<OwnedFd>,
    ring: RxRing,
    mtu: usize,
    ifindex: i32,
    ignore_outgoing: bool,
    caps: PortCaps,
}

impl AfPacket {
    /// Opens a packet socket on the interface, sets up its ring and binds it. See
    /// [`AfPacketOptions`].
    pub fn open(options: &AfPacketOptions) -> Result<AfPacket, PortError> {
        check_options(options)?;
        let name = options.interface.as_str();
        let (fd, ring, info, ignore_outgoing) = netns::run_in(options.netns.as_deref(), || {
            let info = sys::configure_interface(name, None, options.up)?;
            // Protocol 0: nothing is queued before the socket is bound.
            let fd = sys::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK, 0)
                .map_err(|e| PortError::sys("socket(AF_PACKET)", name, e))?;
            let one: libc::c_int = 1;
            sys::setsockopt(&fd, sys::opt::PACKET_VNET_HDR, &one)
                .map_err(|e| PortError::sys("PACKET_VNET_HDR", name, e))?;
            let v3 = libc::c_int::try_from(libc::tpacket_versions::TPACKET_V3 as u32)
                .map_err(|_| PortError::Unsupported("TPACKET_V3".into()))?;
            sys::setsockopt(&fd, sys::opt::PACKET_VERSION, &v3)
                .map_err(|e| PortError::sys("PACKET_VERSION", name, e))?;
            let ring = RxRing::new(
                &fd,
                options.block_size,
                options.block_count,
                options.retire_timeout_ms,
            )
            .map_err(|e| PortError::sys("PACKET_RX_RING", name, e))?;
            let ignore_outgoing =
                sys::setsockopt(&fd, sys::opt::PACKET_IGNORE_OUTGOING, &one).is_ok();
            sys::bind_packet(&fd, info.ifindex).map_err(|e| PortError::sys("bind", name, e))?;
            if options.promiscuous {
                let mreq = libc::packet_mreq {
                    mr_ifindex: info.ifindex,
                    mr_type: PROMISC,
                    mr_alen: 0,
                    mr_address: [0; 8],
                };
                sys::setsockopt(&fd, sys::opt::PACKET_ADD_MEMBERSHIP, &mreq)
                    .map_err(|e| PortError::sys("PACKET_ADD_MEMBERSHIP", name, e))?;
            }
            // Room for bursts of super-frames; without CAP_NET_ADMIN the default stays.
            let sndbuf: libc::c_int = 4 << 20;
            let _ = sys::setsockopt(&fd, sys::opt::SO_SNDBUFFORCE, &sndbuf);
            Ok((fd, ring, info, ignore_outgoing))
        })?;
        Ok(AfPacket {
            fd: Arc::new(fd),
            ring,
            mtu: info.mtu,
            ifindex: info.ifindex,
            ignore_outgoing,
            caps: options.offloads.caps(info.mtu),
        })
    }

    /// The interface's MTU when the port was opened.
    pub fn mtu(&self) -> usize {
        self.mtu
    }
    /// The interface index the socket is bound to.
    pub fn ifindex(&self) -> i32 {
        self.ifindex
    }
    /// True when the kernel filters out the port's own frames (`PACKET_IGNORE_OUTGOING`);
    /// false when the port skips them itself.
    pub fn kernel_ignores_outgoing(&self) -> bool {
        self.ignore_outgoing
    }
    /// What the port reports to the core.
    pub fn caps(&self) -> PortCaps {
        self.caps
    }

    /// The receive and transmit halves (sharing the socket) and their counters.
    pub fn split(self) -> (AfPacketRx, AfPacketTx, Arc<PortStats>) {
        let stats = Arc::new(PortStats::default());
        let rx = AfPacketRx::new(
            Arc::clone(&self.fd),
            self.ring,
            self.mtu,
            !self.ignore_outgoing,
            Arc::clone(&stats),
        );
        let tx = AfPacketTx::new(self.fd, self.caps, Arc::clone(&stats));
        (rx, tx, stats)
    }
}

/// `PACKET_MR_PROMISC` in the width of `mr_type` (it is 1).
#[allow(clippy::cast_possible_truncation)]
const PROMISC: libc::c_ushort = libc::PACKET_MR_PROMISC as libc::c_ushort;

fn check_options(options: &AfPacketOptions) -> Result<(), PortError> {
    sys::check_ifname(&options.interface)?;
    if !options.block_size.is_power_of_two() || options.block_size < MIN_BLOCK_SIZE {
        return Err(PortError::BadOption(format!(
            "block size {}: use a power of two of at least {MIN_BLOCK_SIZE}",
            options.block_size
        )));
    }
    if !(2..=4096).contains(&options.block_count) {
        return Err(PortError::BadOption(format!(
            "{} blocks: use 2 to 4096",
            options.block_count
        )));
    }
    if options.retire_timeout_ms == 0 {
        return Err(PortError::BadOption(
            "retire timeout 0: use at least 1 ms".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_out_of_range_are_refused() {
        let base = AfPacketOptions::new("veth0");
        assert!(check_options(&base).is_ok());
        let bad = [
            AfPacketOptions::new("bad/name"),
            AfPacketOptions {
                block_size: 96 * 1024,
                ..base.clone()
            },
            AfPacketOptions {
                block_size: 64 * 1024,
                ..base.clone()
            },
            AfPacketOptions {
                block_count: 1,
                ..base.clone()
            },
            AfPacketOptions {
                retire_timeout_ms: 0,
                ..base.clone()
            },
        ];
        for o in bad {
            assert!(check_options(&o).is_err(), "{o:?}");
            assert!(AfPacket::open(&o).is_err(), "{o:?}");
        }
    }
}
