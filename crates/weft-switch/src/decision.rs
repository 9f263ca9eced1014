//! Where a packet goes: the value the classify stage computes per packet and the flow cache
//! stores per flow. Fixed size and `Copy`, so neither the batch nor the cache allocates.

use crate::counters::DropReason;
use crate::flow_table::RuleId;
use crate::types::{PortId, VlanId};

/// The most outputs one decision holds (a rule has at most this many actions).
pub const MAX_OUTPUTS: usize = 8;

/// The VLAN a packet leaves with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VlanState {
    /// The packet's VLAN (0 = none): rendered as the outer tag where the egress port tags it.
    pub vid: VlanId,
    /// A VLAN pushed below `vid` by a `push_vlan` on an already tagged packet (QinQ): always
    /// rendered as a tag after the outer one.
    pub inner: Option<VlanId>,
}

impl VlanState {
    /// `push_vlan(vid)`: an untagged packet gets `vid`; a tagged one keeps its VLAN as an
    /// inner tag under `vid`. A third level is not represented: the innermost is replaced.
    pub fn push(self, vid: VlanId) -> Self {
        if self.vid == 0 {
            VlanState {
                vid,
                inner: self.inner,
            }
        } else {
            VlanState {
                vid,
                inner: Some(self.vid),
            }
        }
    }

    /// `pop_vlan`: the inner VLAN (if one was pushed) becomes the packet's VLAN, else none.
    pub fn pop(self) -> Self {
        match self.inner {
            Some(inner) => VlanState {
                vid: inner,
                inner: None,
            },
            None => VlanState {
                vid: 0,
                inner: None,
            },
        }
    }
}

/// One place a packet goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// A single port.
    Port(PortId),
    /// Every port admitting the VLAN but the ingress one. `unknown_unicast` marks flooding
    /// of a unicast address the FDB does not know: ports that opted out of it are skipped.
    Flood {
        /// Flooding caused by an FDB miss rather than a group address.
        unknown_unicast: bool,
    },
}

/// A target and the VLAN the packet has when sent there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Output {
    /// Where.
    pub target: Target,
    /// With which VLAN.
    pub vlan: VlanState,
}

const NO_OUTPUT: Output = Output {
    target: Target::Port(PortId(0)),
    vlan: VlanState {
        vid: 0,
        inner: None,
    },
};

/// The verdict for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Decision {
    outputs: [Output; MAX_OUTPUTS],
    len: u8,
    /// Also hand a copy to the control plane (the `controller` action).
    pub to_controller: bool,
    /// Why the packet goes nowhere, when it goes nowhere (no output, no controller).
    pub drop: Option<DropReason>,
    /// The flow rule that made this decision (whose hit counters it feeds); `None` when
    /// the learning bridge decided.
    pub rule: Option<RuleId>,
}

impl Decision {
    /// A decision with no output yet.
    pub const fn empty() -> Self {
        Decision {
            outputs: [NO_OUTPUT; MAX_OUTPUTS],
            len: 0,
            to_controller: false,
            drop: None,
            rule: None,
        }
    }

    /// Drop, for `reason`.
    pub const fn dropped(reason: DropReason) -> Self {
        let mut d = Self::empty();
        d.drop = Some(reason);
        d
    }

    /// A single output.
    pub const fn single(target: Target, vlan: VlanState) -> Self {
        let mut d = Self::empty();
        d.outputs[0] = Output { target, vlan };
        d.len = 1;
        d
    }

    /// Appends an output; false (and nothing added) when [`MAX_OUTPUTS`] are there already.
    pub fn push(&mut self, target: Target, vlan: VlanState) -> bool {
        let Some(slot) = self.outputs.get_mut(usize::from(self.len)) else {
            return false;
        };
        *slot = Output { target, vlan };
        self.len += 1;
        true
    }

    /// The outputs, in action order.
    pub fn outputs(&self) -> &[Output] {
        &self.outputs[..usize::from(self.len)]
    }

    /// The one port of a single-port decision.
    pub fn single_port(&self) -> Option<PortId> {
        match self.outputs() {
            [Output {
                target: Target::Port(p),
                ..
            }] => Some(*p),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_on_tagged_packet_keeps_old_vlan_inside() {
        let s = VlanState {
            vid: 10,
            inner: None,
        }
        .push(20);
        assert_eq!(
            s,
            VlanState {
                vid: 20,
                inner: Some(10)
            }
        );
        assert_eq!(
            s.pop(),
            VlanState {
                vid: 10,
                inner: None
            }
        );
        assert_eq!(s.pop().pop(), VlanState::default());
        assert_eq!(
            VlanState::default().push(5),
            VlanState {
                vid: 5,
                inner: None
            }
        );
    }

    #[test]
    fn decision_holds_at_most_max_outputs() {
        let mut d = Decision::empty();
        for i in 0..MAX_OUTPUTS {
            assert!(d.push(
                Target::Port(PortId(u16::try_from(i).unwrap())),
                VlanState::default()
            ));
        }
        assert!(!d.push(
            Target::Flood {
                unknown_unicast: false
            },
            VlanState::default()
        ));
        assert_eq!(d.outputs().len(), MAX_OUTPUTS);
        assert_eq!(d.single_port(), None);
        assert_eq!(
            Decision::single(Target::Port(PortId(3)), VlanState::default()).single_port(),
            Some(PortId(3))
        );
    }
}
