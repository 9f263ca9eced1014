//! The stand-in for a port restored from the state file whose device could not be opened:
//! the port keeps its place (its id, the rules and static FDB entries that name it), drops
//! what the switch sends it (counted by the switch) and receives nothing.

use std::sync::Arc;

use weft_control::state::PortKind;
use weft_switch::{
    DeviceCounter, DeviceError, DeviceStatus, PortCaps, PortDevice, PortHalves, PortTx, TxFrame,
};

use super::{configured_mtu, Device, DeviceHandle};

/// A failed port's device and transmit half.
pub struct FailedPort {
    kind: &'static str,
    caps: PortCaps,
}

impl FailedPort {
    /// A stand-in device for a port of `kind` on a switch of `lanes` lanes.
    pub fn device(kind: &PortKind, lanes: usize) -> Device {
        let mtu = configured_mtu(kind);
        let caps = PortCaps::plain(usize::try_from(mtu).unwrap_or(1500));
        let kind = kind_name(kind);
        Device {
            lanes: vec![PortHalves {
                rx: None,
                tx: Box::new(FailedPort { kind, caps }),
            }],
            handle: DeviceHandle {
                device: Arc::new(FailedPort { kind, caps }),
                remote_fdb: None,
                keep: super::Keep::Reopen,
                origin: None,
            },
        }
        .spread(lanes, 0)
    }
}

/// The protocol's name of a port kind.
pub fn kind_name(kind: &PortKind) -> &'static str {
    match kind {
        PortKind::Tap { .. } => "tap",
        PortKind::AfPacket { .. } => "af_packet",
        PortKind::AfXdp { .. } => "af_xdp",
        PortKind::VhostUser { .. } => "vhost_user",
        PortKind::Memif { .. } => "memif",
        PortKind::Vxlan { .. } => "vxlan",
        PortKind::TcpLink { .. } => "tcp_link",
    }
}

impl PortTx for FailedPort {
    fn caps(&self) -> PortCaps {
        self.caps
    }

    fn transmit(&mut self, _frames: &[TxFrame<'_>]) -> usize {
        0
    }
}

impl PortDevice for FailedPort {
    fn kind(&self) -> &'static str {
        self.kind
    }

    fn mtu(&self) -> u32 {
        u32::try_from(self.caps.mtu).unwrap_or(u32::MAX)
    }

    fn take_lanes(&mut self, _lanes: usize) -> Result<Vec<PortHalves>, DeviceError> {
        Err(DeviceError::AlreadySplit)
    }

    fn status(&self) -> DeviceStatus {
        DeviceStatus::default()
    }

    fn visit_counters(&self, _visit: &mut dyn FnMut(DeviceCounter<'_>)) {}
}
