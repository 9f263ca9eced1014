//! What a matching rule does: [`Action`] and the inline [`ActionList`].

use core::fmt;
use core::hash::{Hash, Hasher};

use crate::types::{PortId, VlanId, MAX_PORTS};

use super::FlowError;

/// The most actions one rule holds.
pub const MAX_ACTIONS: usize = 8;

/// One step of a rule's action list. Actions apply in order, as OpenFlow's apply-actions:
/// a VLAN action changes what the outputs after it send.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Action {
    /// Send a copy out of this port.
    Output(PortId),
    /// Send to every port of the packet's VLAN except the one it came in on.
    Flood,
    /// Forward as the learning bridge would (FDB lookup, flood on a miss).
    Normal,
    /// Drop the packet. Valid only as the sole action.
    Drop,
    /// Set the packet's VLAN (1..=4094) for the actions after this one.
    PushVlan(VlanId),
    /// Make the packet untagged for the actions after this one.
    PopVlan,
    /// Hand the packet to the control plane (an upcall).
    Controller,
}

/// A rule's actions: at most [`MAX_ACTIONS`], stored inline so that a rule (and a cached
/// decision) is `Copy` and never allocates.
#[derive(Clone, Copy)]
pub struct ActionList {
    /// `actions[..len]` are the list; the rest is filler.
    actions: [Action; MAX_ACTIONS],
    len: u8,
}

impl ActionList {
    /// An empty list (not a valid rule on its own: see [`validate`](Self::validate)).
    pub const fn new() -> Self {
        ActionList {
            actions: [Action::Drop; MAX_ACTIONS],
            len: 0,
        }
    }

    /// A list of one action.
    pub const fn single(action: Action) -> Self {
        let mut actions = [Action::Drop; MAX_ACTIONS];
        actions[0] = action;
        ActionList { actions, len: 1 }
    }

    /// A list with these actions, if there are at most [`MAX_ACTIONS`].
    pub fn from_slice(actions: &[Action]) -> Result<Self, FlowError> {
        let mut list = ActionList::new();
        for &action in actions {
            list.push(action)?;
        }
        Ok(list)
    }

    /// Appends an action, if there is room.
    pub fn push(&mut self, action: Action) -> Result<(), FlowError> {
        let slot = self
            .actions
            .get_mut(usize::from(self.len))
            .ok_or(FlowError::TooManyActions)?;
        *slot = action;
        self.len += 1;
        Ok(())
    }

    /// The actions, in order.
    pub fn as_slice(&self) -> &[Action] {
        // `len` never exceeds MAX_ACTIONS: only `push` raises it, after a bounds check.
        &self.actions[..usize::from(self.len)]
    }

    /// Iterates over the actions in order.
    pub fn iter(&self) -> core::slice::Iter<'_, Action> {
        self.as_slice().iter()
    }

    /// How many actions there are.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Checks the list: not empty, `Drop` only alone, at most one `PushVlan` and one
    /// `PopVlan`, VLAN ids in 1..=4094, output ports below [`MAX_PORTS`].
    pub fn validate(&self) -> Result<(), FlowError> {
        if self.is_empty() {
            return Err(FlowError::EmptyActions);
        }
        let (mut pushes, mut pops) = (0, 0);
        for action in self.iter() {
            match *action {
                Action::Drop if self.len() > 1 => return Err(FlowError::DropWithOtherActions),
                Action::PushVlan(vlan) => {
                    if !(1..=4094).contains(&vlan) {
                        return Err(FlowError::InvalidPushVlan { vlan });
                    }
                    pushes += 1;
                    if pushes > 1 {
                        return Err(FlowError::DuplicatePushVlan);
                    }
                }
                Action::PopVlan => {
                    pops += 1;
                    if pops > 1 {
                        return Err(FlowError::DuplicatePopVlan);
                    }
                }
                Action::Output(port) if port.index() >= MAX_PORTS => {
                    return Err(FlowError::OutputPortOutOfRange { port });
                }
                Action::Output(_)
                | Action::Flood
                | Action::Normal
                | Action::Drop
                | Action::Controller => {}
            }
        }
        Ok(())
    }
}

impl Default for ActionList {
    fn default() -> Self {
        ActionList::new()
    }
}

impl PartialEq for ActionList {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for ActionList {}

impl Hash for ActionList {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
    }
}

impl fmt::Debug for ActionList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl TryFrom<&[Action]> for ActionList {
    type Error = FlowError;
    fn try_from(actions: &[Action]) -> Result<Self, FlowError> {
        ActionList::from_slice(actions)
    }
}

impl<'a> IntoIterator for &'a ActionList {
    type Item = &'a Action;
    type IntoIter = core::slice::Iter<'a, Action>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}
