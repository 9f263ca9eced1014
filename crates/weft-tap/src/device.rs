//! TAP and AF_PACKET ports as the daemon sees every port: a [`weft_switch::PortDevice`] with
//! its halves, the MTU and offloads the kernel accepted, and the drops each counted itself.

use std::sync::Arc;

use weft_switch::{CounterSource, DeviceCounter, OnePairDevice, PortHalves};

use crate::{AfPacket, Offloads, PortDrop, PortStats, TapQueue};

mod tap_lanes;

pub use tap_lanes::TapDevice;

/// An AF_PACKET socket behind a port.
pub type KernelPortDevice = OnePairDevice<Arc<PortStats>>;

/// A TAP port on `queues` (one or more queues of one device, at least one), whose device
/// has `mtu` and took `offloads`.
pub fn tap_device(queues: Vec<TapQueue>, mtu: u32, offloads: Offloads) -> TapDevice {
    TapDevice::new(queues, mtu, offload_names(offloads))
}

/// An AF_PACKET port on `port`, which carries `offloads`.
pub fn af_packet_device(port: AfPacket, offloads: Offloads) -> KernelPortDevice {
    let mtu = u32::try_from(port.mtu()).unwrap_or(u32::MAX);
    let (rx, tx, stats) = port.split();
    let halves = PortHalves {
        rx: Some(Box::new(rx)),
        tx: Box::new(tx),
    };
    OnePairDevice::new("af_packet", mtu, offload_names(offloads), halves, stats)
}

/// The drops, by reason.
impl CounterSource for PortStats {
    fn visit_counters(&self, visit: &mut dyn FnMut(DeviceCounter<'_>)) {
        for reason in PortDrop::ALL {
            visit(DeviceCounter::drop(reason.name(), self.drops(reason)));
        }
    }
}

/// The offloads as the protocol names them (`csum`, `tso4`, `tso6`, `uso`).
pub fn offload_names(offloads: Offloads) -> Vec<String> {
    let o = offloads.normalized();
    let mut names = Vec::new();
    if o.csum {
        names.push("csum");
    }
    if o.tso {
        names.extend(["tso4", "tso6"]);
    }
    if o.uso {
        names.push("uso");
    }
    names.into_iter().map(String::from).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_switch::PortDevice;

    #[test]
    fn offloads_are_named_as_the_protocol_names_them() {
        assert_eq!(
            offload_names(Offloads::ALL),
            ["csum", "tso4", "tso6", "uso"]
        );
        assert_eq!(offload_names(Offloads::CSUM_ONLY), ["csum"]);
        assert!(offload_names(Offloads::NONE).is_empty());
    }

    #[test]
    fn a_tap_queue_lists_every_drop_reason_and_gives_its_halves_once() {
        // A datagram socket moves one frame per read and write, as a TAP queue does.
        let (ours, _peer) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let fd = std::os::fd::OwnedFd::from(ours);
        let queue = TapQueue::from_fd(fd, Offloads::NONE.caps(1500), 32).unwrap();
        let mut device = tap_device(vec![queue], 1500, Offloads::NONE);
        let mut names = Vec::new();
        device.visit_counters(&mut |c| names.push(c.name.to_string()));
        let want: Vec<String> = PortDrop::ALL.iter().map(|r| r.name().to_string()).collect();
        assert_eq!(names, want);
        assert_eq!(device.take_lanes(2).map(|l| l.len()).ok(), Some(1));
        assert!(device.take_lanes(2).is_err());
    }
}
