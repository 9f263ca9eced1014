//! VXLAN ports and TCP links as the daemon sees every port ([`PortDevice`]): one pair of
//! halves, the inner MTU and offloads, whether a link's peer is connected, and the drops and
//! datagram counters each keeps.

use std::sync::Arc;

use weft_switch::{CounterSource, DeviceCounter, Link, OnePairDevice, PortHalves, PortTx};

use crate::tcp_link::{TcpLinkDrop, TcpLinkPort, TcpLinkStats};
use crate::{DecapDrop, OverlayStats, OverlayStatsSnapshot, VxlanPort};

/// A VXLAN port behind a switch port.
pub type VxlanDevice = OnePairDevice<Arc<OverlayStats>>;

/// The device of an opened VXLAN port (take its remote FDB first: [`VxlanPort::remote_fdb`]).
pub fn vxlan_device(port: VxlanPort) -> VxlanDevice {
    // The inner MTU the underlay allows (route MTU minus the overlay's cost).
    let mtu = u32::try_from(port.mtu()).unwrap_or(u32::MAX);
    let paths = port.socket_paths();
    let (rx, tx, stats) = port.split();
    let caps = tx.caps();
    // The inner offloads the port takes, then how its datagrams go through the kernel.
    let offloads = [("tso4", caps.tso4), ("tso6", caps.tso6), ("uso", caps.uso)]
        .into_iter()
        .filter(|(_, on)| *on)
        .map(|(name, _)| name)
        .chain(paths.names())
        .map(String::from)
        .collect();
    let halves = PortHalves {
        rx: Some(Box::new(rx)),
        tx: Box::new(tx),
    };
    OnePairDevice::new("vxlan", mtu, offloads, halves, stats)
}

impl CounterSource for OverlayStats {
    fn visit_counters(&self, visit: &mut dyn FnMut(DeviceCounter<'_>)) {
        vxlan_counters(&self.snapshot(), visit);
    }
}

/// The name a decapsulation drop is counted under.
fn decap_drop_name(reason: DecapDrop) -> &'static str {
    match reason {
        DecapDrop::Truncated => "vxlan_truncated",
        DecapDrop::BadFlags => "vxlan_bad_flags",
        DecapDrop::ReservedBits => "vxlan_reserved_bits",
        DecapDrop::UnknownVni => "vxlan_unknown_vni",
        DecapDrop::UnknownRemote => "vxlan_unknown_remote",
        DecapDrop::InnerTooShort => "vxlan_inner_too_short",
        DecapDrop::InnerTooBig => "vxlan_inner_too_big",
        DecapDrop::InnerBadSource => "vxlan_inner_bad_source",
        DecapDrop::BadGro => "vxlan_bad_gro",
    }
}

/// A VXLAN port's drops (decapsulation by reason, socket losses and errors, frames with no
/// remote), then what its offloads did: datagrams coalesced by `UDP_GRO` and merged back
/// into super-frames on receive; super-frames, `UDP_SEGMENT` sends, runs of small frames and
/// raw or bound `sendmmsg` calls on transmit.
fn vxlan_counters(s: &OverlayStatsSnapshot, visit: &mut dyn FnMut(DeviceCounter<'_>)) {
    for reason in DecapDrop::ALL {
        visit(DeviceCounter::drop(
            decap_drop_name(reason),
            s.drops(reason),
        ));
    }
    // Oversize frames are not listed: the switch refuses them (the port advertises its real
    // MTU) and counts them as `frame_too_big` before the port sees them.
    for (name, n) in [
        ("vxlan_socket_overflow", s.rx_socket_overflow),
        ("vxlan_rx_errors", s.rx_errors),
        ("vxlan_tx_errors", s.tx_errors),
        ("vxlan_no_remote", s.tx_no_remote),
    ] {
        visit(DeviceCounter::drop(name, n));
    }
    for (name, n) in [
        ("vxlan_rx_frames", s.rx_frames),
        ("vxlan_rx_coalesced", s.rx_coalesced),
        ("vxlan_rx_merged", s.rx_merged),
        ("vxlan_tx_datagrams", s.tx_datagrams),
        ("vxlan_tx_super_frames", s.tx_super_frames),
        ("vxlan_tx_gso_sends", s.tx_gso_sends),
        ("vxlan_tx_small_gso_sends", s.tx_small_gso_sends),
        ("vxlan_tx_small_gso_datagrams", s.tx_small_gso_datagrams),
        ("vxlan_tx_raw_sends", s.tx_raw_sends),
    ] {
        visit(DeviceCounter::event(name, n));
    }
}

/// A TCP link behind a switch port.
pub type TcpLinkDevice = OnePairDevice<Arc<TcpLinkStats>>;

/// The device of an opened link that carries frames up to `mtu`, with every offload across
/// when `offloads`.
pub fn tcp_link_device(link: TcpLinkPort, mtu: u32, offloads: bool) -> TcpLinkDevice {
    let (rx, tx, stats) = link.split();
    let offloads = if offloads {
        ["csum", "tso4", "tso6", "uso"].map(String::from).to_vec()
    } else {
        Vec::new()
    };
    let halves = PortHalves {
        rx: Some(Box::new(rx)),
        tx: Box::new(tx),
    };
    OnePairDevice::new("tcp_link", mtu, offloads, halves, stats)
}

impl CounterSource for TcpLinkStats {
    fn link(&self) -> Option<Link> {
        Some(if self.snapshot().connected {
            Link::Connected
        } else {
            Link::Disconnected
        })
    }

    fn visit_counters(&self, visit: &mut dyn FnMut(DeviceCounter<'_>)) {
        let s = self.snapshot();
        for reason in TcpLinkDrop::ALL {
            let name = format!("tcp_{}", reason.name());
            visit(DeviceCounter::drop(&name, s.drops(reason)));
        }
        // Lost connections lose what was in flight: listed beside the drops. (Connections
        // made are not losses; the status shows whether one is up.)
        visit(DeviceCounter::drop("tcp_io_errors", s.io_errors));
        visit(DeviceCounter::drop("tcp_disconnects", s.disconnects));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp_link::{TcpLinkConfig, TcpLinkMode};
    use weft_switch::PortDevice;

    fn names(device: &dyn PortDevice) -> Vec<String> {
        let mut out = Vec::new();
        device.visit_counters(&mut |c| out.push(c.name.to_string()));
        out
    }

    #[test]
    fn a_tcp_link_lists_its_flood_and_takeover_refusals_with_its_drops_and_waits_disconnected() {
        let config = TcpLinkConfig::new(TcpLinkMode::Listen("127.0.0.1:0".parse().unwrap()));
        let link = TcpLinkPort::open(&config).unwrap();
        let mut device = tcp_link_device(link, 1500, true);
        let names = names(&device);
        for name in [
            "tcp_handshake_limit",
            "tcp_refused_takeover",
            "tcp_disconnects",
        ] {
            assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
        }
        assert_eq!(
            device.status().words(),
            ["csum", "tso4", "tso6", "uso", "disconnected"]
        );
        assert_eq!(device.take_lanes(4).map(|l| l.len()).ok(), Some(1));
        assert!(device.take_lanes(4).is_err());
    }

    #[test]
    fn a_vxlan_port_counts_every_decapsulation_drop_under_its_own_name() {
        let mut seen = Vec::new();
        vxlan_counters(&OverlayStatsSnapshot::default(), &mut |c| {
            seen.push((c.name.to_string(), c.class));
        });
        for reason in DecapDrop::ALL {
            let name = decap_drop_name(reason);
            assert!(
                seen.iter()
                    .any(|(n, c)| n == name && *c == weft_switch::CounterClass::Drop),
                "{name}"
            );
        }
        let unique: std::collections::BTreeSet<_> = seen.iter().map(|(n, _)| n).collect();
        assert_eq!(unique.len(), seen.len(), "each counter once");
        assert!(seen.iter().any(|(n, _)| n == "vxlan_tx_gso_sends"));
    }
}
