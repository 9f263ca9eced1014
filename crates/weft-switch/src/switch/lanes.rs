//! A switch as one lane of several (`crate::lanes`): what its FDB learned goes to the
//! other lanes after each batch, and what they learned comes in before the next.

use crate::lanes::{Lane, LaneRecord};
use crate::types::Timestamp;

use super::Switch;

/// What a switch keeps for its part in a lane group.
#[derive(Debug)]
pub(super) struct LaneState {
    pub(super) lane: Lane,
    /// Records of one batch on their way out (reserved once: a batch learns at most one
    /// entry per frame).
    outgoing: Vec<LaneRecord>,
}

impl Switch {
    /// Makes this switch one lane of a group (see `crate::lanes`): from now on it tells
    /// the other lanes what it learns and takes in what they learn. Its ports, rules and
    /// static entries are the caller's to keep the same on every lane.
    pub fn join_lanes(&mut self, lane: Lane) {
        self.fdb.start_journal(self.config.batch_size);
        self.lane = Some(LaneState {
            lane,
            outgoing: Vec::with_capacity(self.config.batch_size),
        });
    }

    /// This switch's lane, if it is one.
    pub fn lane(&self) -> Option<&Lane> {
        self.lane.as_ref().map(|l| &l.lane)
    }

    /// Takes in what the other lanes learned. The pipeline does it before each batch; the
    /// control plane before reading the FDB. Returns the records applied.
    pub fn sync_lanes(&mut self, now: Timestamp) -> usize {
        let Switch {
            lane,
            fdb,
            ports,
            membership,
            ..
        } = self;
        let Some(state) = lane.as_mut() else {
            return 0;
        };
        let (mut applied, mut stale) = (0u64, 0u64);
        for record in state.lane.take() {
            let port_here = ports
                .get(record.entry.port.index())
                .is_some_and(Option::is_some);
            if record.membership != *membership || !port_here {
                stale += 1;
                continue;
            }
            fdb.learn_from_peer(record.entry, now);
            applied += 1;
        }
        state.lane.count_taken(applied, stale);
        usize::try_from(applied).unwrap_or(usize::MAX)
    }

    /// Posts what this batch learned to the other lanes.
    pub(super) fn post_learned(&mut self) {
        let Switch {
            lane,
            fdb,
            membership,
            ..
        } = self;
        let Some(state) = lane.as_mut() else {
            return;
        };
        let membership = *membership;
        let outgoing = &mut state.outgoing;
        outgoing.clear();
        let lost = fdb.drain_journal(|entry| {
            // The journal holds at most a batch, which `outgoing` was reserved for.
            if outgoing.len() < outgoing.capacity() {
                outgoing.push(LaneRecord { entry, membership });
            }
        });
        state.lane.count_lost(lost);
        state.lane.post(outgoing);
    }
}
