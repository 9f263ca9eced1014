//! Telling each receive half what all the other ports accept (`PortRx::peers_accept`),
//! when ports come and go or one's capabilities change: a port that merges what it receives
//! into super-frames then merges only what no destination would cut again.

use crate::port::PortCaps;

use super::Switch;

impl Switch {
    /// Tells every receive half what its peers accept, if that may have changed since the
    /// last time. Runs only on such a change (rare), so it may take its time: O(ports²).
    pub(super) fn tell_peers_if_changed(&mut self) {
        if !self.peers_changed {
            return;
        }
        self.peers_changed = false;
        let Switch { ports, rx, .. } = self;
        for (me, rx) in rx.iter_mut().enumerate() {
            let Some(rx) = rx.as_mut() else { continue };
            let others = ports
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != me)
                .filter_map(|(_, slot)| slot.as_ref().map(|s| s.caps));
            rx.peers_accept(&common_caps(others));
        }
    }
}

/// What every one of `caps` takes: an offload only if all have it, the smallest lengths.
/// With none at all, everything (nothing would be cut).
pub(crate) fn common_caps(caps: impl Iterator<Item = PortCaps>) -> PortCaps {
    caps.fold(
        PortCaps {
            mtu: usize::MAX,
            max_frame_len: usize::MAX,
            max_gso_frame_len: usize::MAX,
            ..PortCaps::full_offload(0)
        },
        |all, c| PortCaps {
            mtu: all.mtu.min(c.mtu),
            max_frame_len: all.max_frame_len.min(c.max_frame_len),
            partial_csum: all.partial_csum && c.partial_csum,
            tso4: all.tso4 && c.tso4,
            tso6: all.tso6 && c.tso6,
            uso: all.uso && c.uso,
            max_gso_frame_len: all.max_gso_frame_len.min(c.max_gso_frame_len),
        },
    )
}
