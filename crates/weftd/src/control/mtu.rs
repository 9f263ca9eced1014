//! Whether a port's frames fit the switch's overlay: a port (or the guest behind it) whose
//! MTU is larger than what an overlay port of its switch carries loses every larger frame
//! it sends to another host, silently from the guest's side. `port show` warns, and the
//! metrics say it (`weft_port_mtu_over_overlay`).

use std::collections::BTreeMap;

use weft_control::state::{PortKind, SwitchState};

use super::PortRt;

/// The overlay port of a switch that carries the smallest frames: its name and MTU.
pub(super) type OverlayLimit = (String, u32);

/// Whether `kind` carries the switch's frames to other hosts.
fn is_overlay(kind: &PortKind) -> bool {
    matches!(kind, PortKind::Vxlan { .. } | PortKind::TcpLink { .. })
}

/// The overlay port of `switch` with the smallest MTU, if it has any that works.
pub(super) fn overlay_limit(
    switch: &SwitchState,
    ports: &BTreeMap<String, PortRt>,
) -> Option<OverlayLimit> {
    switch
        .ports
        .iter()
        .filter(|p| is_overlay(&p.kind))
        .filter_map(|p| {
            let rt = ports.get(&p.name).filter(|rt| rt.failed.is_none())?;
            Some((p.name.clone(), rt.device.device.mtu()))
        })
        .min_by_key(|(_, mtu)| *mtu)
}

/// The warning for a port of `kind` whose device has `mtu` and whose peer gave its guest
/// `guest_mtu` (the frames come with that one, when it said), when they do not fit `limit`.
pub(super) fn warning(
    kind: &PortKind,
    mtu: u32,
    guest_mtu: Option<u32>,
    limit: Option<&OverlayLimit>,
) -> Option<String> {
    let mtu = guest_mtu.unwrap_or(mtu);
    let (overlay, carried) = limit?;
    (!is_overlay(kind) && mtu > *carried).then(|| {
        format!(
            "MTU {mtu} is larger than overlay port {overlay} carries ({carried}): larger \
             frames to other hosts are dropped; give the guest MTU {carried} (QEMU: \
             host_mtu={carried}) or raise the underlay's MTU"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tap() -> PortKind {
        PortKind::Tap {
            ifname: None,
            netns: None,
            queues: 1,
            mtu: 1500,
            offloads: true,
        }
    }

    #[test]
    fn a_port_larger_than_the_smallest_overlay_is_warned_about_and_one_that_fits_is_not() {
        let limit = ("vx".to_string(), 1450);
        let w = warning(&tap(), 1500, None, Some(&limit)).unwrap();
        assert!(
            w.contains("MTU 1500") && w.contains("vx") && w.contains("host_mtu=1450"),
            "{w}"
        );
        assert_eq!(warning(&tap(), 1450, None, Some(&limit)), None);
        assert_eq!(warning(&tap(), 9000, None, None), None);
        // A guest given a smaller MTU than its port's sends frames that fit.
        assert_eq!(warning(&tap(), 9000, Some(1450), Some(&limit)), None);
    }
}
