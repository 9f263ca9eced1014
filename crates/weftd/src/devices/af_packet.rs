//! `af_packet` ports: a packet socket on an existing interface (veth or physical).

use weft_tap::{AfPacket, AfPacketOptions};

use super::{OpenError, Opened};

/// Binds a packet socket to interface `ifname`.
pub(super) fn open(ifname: &str) -> Result<Opened, OpenError> {
    let options = AfPacketOptions::new(ifname);
    let port = AfPacket::open(&options)?;
    Ok(Opened::plain(weft_tap::af_packet_device(
        port,
        options.offloads,
    )))
}
