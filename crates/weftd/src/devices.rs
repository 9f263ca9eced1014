//! Port devices: what stands behind a port of a switch.
//!
//! weftd creates ports of the kinds the protocol names: `tap` (a TAP device, created in the
//! port's network namespace, gone when the port is removed or weftd exits) and `af_packet`
//! (a packet socket on an existing interface), both from weft-tap. A port restored from the
//! state file whose device cannot be opened is kept, marked failed, behind a [`FailedPort`]:
//! it keeps its place (its id, the rules and static FDB entries that name it) and drops what
//! the switch sends it.

use std::sync::Arc;

use weft_control::state::PortKind;
use weft_switch::{PortCaps, PortRx, PortTx, TxFrame};
use weft_tap::{AfPacket, AfPacketOptions, Offloads, PortStats, Tap, TapOptions};

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
    /// What the device counts itself (frames it dropped before the switch saw them, or
    /// that the kernel refused); `None` for a stand-in.
    pub stats: Option<Arc<PortStats>>,
}

/// Opens the device of port `port` (whose name a TAP takes when it names no device).
pub fn open(port: &str, kind: &PortKind) -> Result<Device, String> {
    match kind {
        PortKind::Tap {
            ifname,
            netns,
            queues,
            mtu,
            offloads,
        } => {
            if *queues != 1 {
                // The switch polls one receive half per port; model::validate refuses this
                // first, so only a hand-edited state file gets here.
                return Err(format!("{queues} queues: weftd opens TAPs with one queue"));
            }
            let mut options = TapOptions::new(ifname.as_deref().unwrap_or(port))
                .mtu(*mtu)
                .offloads(if *offloads {
                    Offloads::ALL
                } else {
                    Offloads::NONE
                });
            if let Some(ns) = netns {
                options = options.netns(weft_tap::netns::named(ns));
            }
            let tap = Tap::open(&options).map_err(|e| e.to_string())?;
            let mtu = u32::try_from(tap.mtu()).map_err(|_| "the TAP's MTU is out of range")?;
            let names = offload_names(tap.offloads());
            let queue = tap
                .into_queues()
                .into_iter()
                .next()
                .ok_or("the TAP opened without a queue")?;
            let (rx, tx, stats) = queue.split();
            Ok(Device {
                rx: Some(Box::new(rx)),
                tx: Box::new(tx),
                mtu,
                offloads: names,
                stats: Some(stats),
            })
        }
        PortKind::AfPacket { ifname } => {
            let options = AfPacketOptions::new(ifname);
            let port = AfPacket::open(&options).map_err(|e| e.to_string())?;
            let mtu =
                u32::try_from(port.mtu()).map_err(|_| "the interface's MTU is out of range")?;
            let (rx, tx, stats) = port.split();
            Ok(Device {
                rx: Some(Box::new(rx)),
                tx: Box::new(tx),
                mtu,
                offloads: offload_names(options.offloads),
                stats: Some(stats),
            })
        }
    }
}

/// The offloads as `PortInfo` names them.
fn offload_names(offloads: Offloads) -> Vec<String> {
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
            stats: None,
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_tap_in_a_missing_namespace_fails_with_the_reason() {
        let kind = PortKind::Tap {
            ifname: None,
            netns: Some(format!("weft-absent-{}", std::process::id())),
            queues: 1,
            mtu: 1500,
            offloads: true,
        };
        let Err(e) = open("t0", &kind) else {
            panic!("opened a TAP in a namespace that does not exist")
        };
        assert!(e.contains("network namespace"), "{e}");
    }

    #[test]
    fn multiqueue_taps_are_refused() {
        let kind = PortKind::Tap {
            ifname: None,
            netns: None,
            queues: 2,
            mtu: 1500,
            offloads: true,
        };
        assert!(open("t0", &kind).is_err_and(|e| e.contains("one queue")));
    }
}
