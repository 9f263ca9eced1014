//! `af_xdp` ports: an AF_XDP socket on one receive queue of an existing interface, its
//! frames redirected there by the XDP program weft-xdp attaches (and detaches when the port
//! goes).

use weft_control::state::XdpAttach;
use weft_xdp::{XdpMode, XdpOptions};

use super::{OpenError, Opened};

/// Opens an AF_XDP socket on queue `queue` of interface `ifname`.
pub(super) fn open(ifname: &str, queue: u32, attach: XdpAttach) -> Result<Opened, OpenError> {
    let options = XdpOptions {
        queue,
        mode: match attach {
            XdpAttach::Auto => XdpMode::Auto,
            XdpAttach::Native => XdpMode::Native,
            XdpAttach::Generic => XdpMode::Generic,
        },
        ..XdpOptions::new(ifname)
    };
    Ok(Opened::plain(weft_xdp::open(&options)?))
}
