//! AF_XDP ports for the weft switch: an existing interface (veth or physical) on the switch
//! through an XDP socket, as the AF_PACKET port does through a packet socket, but with the
//! kernel's stack bypassed: a small XDP program redirects the queue's frames straight into
//! the socket's UMEM.
//!
//! - [`open`] loads the embedded XDP program (`bpf/redirect.c`, prebuilt as
//!   `bpf/redirect.o`), attaches it to the interface — native (driver) XDP, or generic (skb)
//!   XDP where the driver has none ([`XdpMode`]) —, maps a UMEM, binds a socket to one
//!   receive queue (zero-copy where the driver allows, copy mode otherwise) and puts it in
//!   the program's XSKMAP at that queue's index. Frames on the interface's other queues
//!   go on to the kernel (`XDP_PASS`).
//! - [`XdpPort`] is the port as the daemon sees it ([`weft_switch::PortDevice`], kind
//!   `af_xdp`): one pair of halves, [`XdpRx`] and [`XdpTx`]; status words `native` or
//!   `generic`, and `zero_copy` or `copy`; drops by reason.
//!
//! The UMEM is one anonymous mapping of `frames` 4 KiB chunks: the first half for
//! receiving (each chunk in the fill ring or lent to the switch), the second for
//! transmitting (a free list; each chunk free or with the kernel until it completes). A
//! received frame is lent from its chunk until `finish` puts the chunk back in the fill
//! ring; a frame to send is copied once into a free chunk. No allocation per frame.
//!
//! One AF_XDP port per interface (per network namespace) in a process: a second
//! [`open`] of the same interface is refused ([`XdpError::Busy`]); the kernel would refuse a
//! second XDP program anyway. The program is attached through a `bpf_link`, so it is
//! detached when the port (device and both halves) is dropped, and also if the process
//! dies. Transmit offloads: none (frames up to the interface's MTU; an MTU larger than a
//! chunk holds is refused at open).
//!
//! Unsafe code: the UMEM mapping (`umem.rs`), its registration and the socket's second
//! descriptor (`socket.rs`), and the two places the halves touch UMEM bytes (`rx.rs`,
//! `tx.rs`), each with the chunk ownership that makes it sound.
#![deny(missing_docs)]
#![deny(unsafe_code)]

mod chunks;
pub mod device;
pub mod error;
mod interface;
pub mod options;
mod program;
#[allow(unsafe_code)]
mod rx;
#[allow(unsafe_code)]
mod socket;
pub mod stats;
#[allow(unsafe_code)]
mod tx;
#[allow(unsafe_code)]
mod umem;

use std::sync::Arc;

use weft_switch::{PortCaps, PortHalves, Unsplit};

pub use device::XdpPort;
pub use error::XdpError;
pub use options::{XdpMode, XdpOptions, CHUNK_SIZE, MAX_FRAMES, MAX_MTU, MIN_FRAMES};
pub use rx::XdpRx;
pub use stats::{XdpDrop, XdpStats};
pub use tx::XdpTx;

use chunks::Layout;
use device::{Claim, Keep};
use program::{Attachment, Program};
use umem::UmemArea;

/// Opens an AF_XDP port on `options.ifname` (see the crate documentation).
pub fn open(options: &XdpOptions) -> Result<XdpPort, XdpError> {
    check_options(options)?;
    let ifname = options.ifname.as_str();
    let iface = interface::lookup(ifname)?;
    if iface.mtu > MAX_MTU {
        return Err(XdpError::MtuTooLarge {
            ifname: ifname.to_string(),
            mtu: iface.mtu,
            max: MAX_MTU,
        });
    }
    if let Some(queues) = iface.rx_queues.filter(|&q| options.queue >= q) {
        return Err(XdpError::NoQueue {
            ifname: ifname.to_string(),
            queue: options.queue,
            queues,
        });
    }
    let claim = Claim::take(iface.netns, iface.ifindex, ifname)?;
    let layout = Layout {
        frames: options.frames,
    };
    let area =
        UmemArea::new(layout.bytes()).map_err(|e| XdpError::socket("mmap(UMEM)", ifname, e))?;
    let modes: &[Attachment] = match options.mode {
        XdpMode::Auto => &[Attachment::Native, Attachment::Generic],
        XdpMode::Native => &[Attachment::Native],
        XdpMode::Generic => &[Attachment::Generic],
    };
    let mut program = Program::attach(ifname, modes)?;
    // Zero-copy only under native XDP: under generic XDP frames are copied out of an skb
    // whatever the binding says.
    let try_zero_copy = program.attachment() == Attachment::Native;
    let rings = socket::open(&area, layout, ifname, options.queue, try_zero_copy)?;
    program.register(ifname, options.queue, &rings.fd)?;

    let attachment = program.attachment();
    let keep = Arc::new(Keep::new(program, claim));
    let area = Arc::new(area);
    let stats = Arc::new(XdpStats::default());
    let mtu = iface.mtu;
    let caps = PortCaps::plain(mtu as usize);
    let tx_ring = Arc::new(tx::TxRing::new(rings.tx));
    let rx = XdpRx::new(
        rings.rx,
        rings.fill,
        layout,
        Arc::clone(&stats),
        Arc::clone(&area),
        Arc::clone(&tx_ring),
        Arc::clone(&keep),
    );
    let tx = XdpTx::new(
        tx_ring,
        rings.completion,
        layout,
        caps,
        Arc::clone(&stats),
        area,
        Arc::clone(&keep),
    );
    Ok(XdpPort {
        ifname: ifname.to_string(),
        queue: options.queue,
        mtu,
        attachment,
        zero_copy: rings.zero_copy,
        halves: Unsplit::new(PortHalves {
            rx: Some(Box::new(rx)),
            tx: Box::new(tx),
        }),
        stats,
        socket: rings.fd,
        _keep: keep,
    })
}

fn check_options(options: &XdpOptions) -> Result<(), XdpError> {
    interface::check_name(&options.ifname)?;
    let f = options.frames;
    if !f.is_power_of_two() || !(MIN_FRAMES..=MAX_FRAMES).contains(&f) {
        return Err(XdpError::BadOption(format!(
            "{f} UMEM frames: use a power of two from {MIN_FRAMES} to {MAX_FRAMES}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_out_of_range_are_refused_before_anything_is_opened() {
        let base = XdpOptions::new("veth0");
        assert_eq!(
            (base.queue, base.mode, base.frames),
            (0, XdpMode::Auto, 4096)
        );
        assert!(check_options(&base).is_ok());
        for frames in [0, 32, 100, 4095, 131_072] {
            let o = XdpOptions {
                frames,
                ..base.clone()
            };
            let e = open(&o).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains("power of two"), "{frames}: {e}");
        }
        assert!(open(&XdpOptions::new("bad/name")).is_err());
    }

    #[test]
    fn errors_say_what_to_do() {
        let e = XdpError::MtuTooLarge {
            ifname: "veth0".into(),
            mtu: 9000,
            max: MAX_MTU,
        };
        assert!(e.to_string().contains("ip link set dev veth0 mtu"), "{e}");
        let e = XdpError::NoQueue {
            ifname: "eth0".into(),
            queue: 4,
            queues: 2,
        };
        assert!(e.to_string().contains("pick one below 2"), "{e}");
    }
}
