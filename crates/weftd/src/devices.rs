//! Port devices: what stands behind a port of a switch.
//!
//! weftd creates ports of the kinds the protocol names (`tap`, `af_packet`). Until the
//! weft-tap crate (issue 5) is wired in, opening one fails with a clear error; nothing is
//! faked. A port restored from the state file whose device cannot be opened is kept, marked
//! failed, behind a [`FailedPort`]: it keeps its place (its id, the rules and static FDB
//! entries that name it) and drops what the switch sends it.

use weft_control::state::PortKind;
use weft_switch::{PortCaps, PortRx, PortTx, TxFrame};

/// An opened device: the halves the switch takes, and what the port reports.
pub struct Device {
    /// The receive half (the worker polls it).
    pub rx: Option<Box<dyn PortRx>>,
    /// The transmit half.
    pub tx: Box<dyn PortTx>,
    /// MTU.
    pub mtu: u32,
    /// Offloads the device takes on transmit (`csum`, `tso4`, `tso6`, `uso`).
    pub offloads: Vec<String>,
}

/// Opens the device of a port.
pub fn open(kind: &PortKind) -> Result<Device, String> {
    match kind {
        PortKind::Tap { .. } => Err(
            "tap ports need the weft-tap crate (issue 5), which this weftd is built without"
                .to_string(),
        ),
        PortKind::AfPacket { .. } => Err(
            "af_packet ports need the weft-tap crate (issue 5), which this weftd is built without"
                .to_string(),
        ),
    }
}

/// The MTU a port of this kind has, as configured.
pub fn configured_mtu(kind: &PortKind) -> u32 {
    match kind {
        PortKind::Tap { mtu, .. } => *mtu,
        PortKind::AfPacket { .. } => 1500,
    }
}

/// The stand-in for a port whose device failed: it takes no frame (the switch counts them
/// as dropped on this port) and receives none.
pub struct FailedPort {
    caps: PortCaps,
}

impl FailedPort {
    /// A stand-in device for a port of `kind`.
    pub fn device(kind: &PortKind) -> Device {
        let mtu = configured_mtu(kind);
        Device {
            rx: None,
            tx: Box::new(FailedPort {
                caps: PortCaps::plain(usize::try_from(mtu).unwrap_or(1500)),
            }),
            mtu,
            offloads: Vec::new(),
        }
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
