//! Bodies of the fuzz targets for the switch (see `fuzz/`), kept in the library so that a
//! proptest runs the same code on stable.

use weft_packet::{GsoKind, OffloadInfo};

use crate::flow_match::FlowMatch;
use crate::flow_table::{Action, ActionList, FlowRule};
use crate::memory_port::memory_port;
use crate::port::PortCaps;
use crate::switch::{PortOptions, Switch, SwitchConfig};
use crate::types::{PortId, Timestamp};
use crate::vlan::PortVlanMode;

/// Feeds hostile frames with hostile offload metadata through a switch with plain, access
/// and trunk ports (and, when the first byte is odd, flow rules): nothing may panic, and
/// every injected frame must be received and counted.
///
/// Input: one mode byte, then records `[port][flags][gso_size:2][csum_start:2][csum_offset][len:2][frame]`.
pub fn pipeline(data: &[u8]) {
    let Some((&mode, mut rest)) = data.split_first() else {
        return;
    };
    let Ok(mut sw) = Switch::new(
        "fuzz",
        SwitchConfig {
            batch_size: 8,
            ..SwitchConfig::default()
        },
    ) else {
        return;
    };
    let caps = [
        PortCaps::plain(1500),
        PortCaps::full_offload(1500),
        PortCaps::plain(9000),
    ];
    let modes = [
        PortVlanMode::plain(),
        PortVlanMode::access(10).unwrap_or_default(),
        PortVlanMode::trunk([10, 20], Some(1)).unwrap_or_default(),
    ];
    let mut handles = Vec::new();
    for (i, (caps, vlan)) in caps.iter().zip(modes).enumerate() {
        let (rx, tx, h) = memory_port(*caps, 64);
        let options = PortOptions {
            vlan,
            flood_unknown_unicast: i != 1,
            learning: true,
            ..PortOptions::default()
        };
        if let Ok(id) = sw.add_port(&format!("p{i}"), Some(Box::new(rx)), Box::new(tx), options) {
            handles.push((id, h));
        }
    }
    if mode & 1 == 1 {
        let rules = [
            FlowRule::new(
                5,
                FlowMatch {
                    in_port: Some(PortId(0)),
                    ..FlowMatch::default()
                },
                ActionList::from_slice(&[Action::PushVlan(20), Action::Normal, Action::Controller])
                    .unwrap_or_default(),
            ),
            FlowRule::new(
                3,
                FlowMatch {
                    ethertype: Some(0x0800),
                    ..FlowMatch::default()
                },
                ActionList::from_slice(&[Action::PopVlan, Action::Flood]).unwrap_or_default(),
            ),
        ];
        for r in rules {
            let _ = sw.add_rule(r);
        }
    }
    let mut now = 0u64;
    let mut injected = 0u64;
    while rest.len() >= 10 {
        let (head, tail) = rest.split_at(10);
        let len = usize::from(u16::from_le_bytes([head[8], head[9]])).min(tail.len());
        let (frame, tail) = tail.split_at(len);
        rest = tail;
        let flags = head[1];
        let gso = match flags >> 4 & 3 {
            0 => GsoKind::None,
            1 => GsoKind::TcpV4,
            2 => GsoKind::TcpV6,
            _ => GsoKind::UdpL4,
        };
        let offload = OffloadInfo {
            needs_csum: flags & 1 != 0,
            data_valid: flags & 2 != 0,
            csum_start: u16::from_le_bytes([head[4], head[5]]),
            csum_offset: u16::from(head[6]),
            gso,
            gso_size: u16::from_le_bytes([head[2], head[3]]),
            hdr_len: u16::from(head[7]),
        };
        let Some((id, h)) = handles.get(usize::from(head[0]) % handles.len().max(1)) else {
            return;
        };
        if h.inject_with(frame, offload) {
            injected += 1;
        }
        now += u64::from(flags) * 1_000_000_000;
        sw.poll(*id, Timestamp(now));
        sw.drain_upcalls(|_| {});
    }
    // Every injected frame was received and counted, none was left behind.
    let received: u64 = handles
        .iter()
        .filter_map(|(id, _)| sw.port_counters(*id))
        .map(|c| c.rx_packets.get())
        .sum();
    assert_eq!(received, injected);
    assert!(handles.iter().all(|(_, h)| h.pending_rx() == 0));
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn pipeline_survives_arbitrary_input(data in proptest::collection::vec(any::<u8>(), 0..2048)) {
            super::pipeline(&data);
        }
    }
}
