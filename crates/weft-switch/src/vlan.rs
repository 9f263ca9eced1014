//! 802.1Q port modes: which VLANs a port admits, and how a packet's VLAN is rendered on it.
//!
//! Inside the switch every packet belongs to one VLAN (`0` = no VLAN). A port's mode is one
//! representation for all three classic kinds of port:
//!
//! | kind | allowed | native |
//! |---|---|---|
//! | plain (the default: frames pass as they are) | every id, 0 included | `Some(0)` |
//! | access port in VLAN v | {v} | `Some(v)` |
//! | trunk | the listed ids | `None`, or the VLAN untagged frames belong to |
//!
//! Ingress: a tagged frame belongs to its tag's VLAN (priority tags, VID 0, to the native
//! one); an untagged frame to the native VLAN. Either must be allowed, else the frame is
//! dropped. Egress: the packet's VLAN must be allowed; it is sent untagged when it is the
//! native VLAN, tagged otherwise.

use core::fmt;

use crate::types::VlanId;

/// The largest valid VLAN id (4095 is reserved).
pub const MAX_VLAN_ID: VlanId = 4094;

/// A set of VLAN ids 0..=4095, as a bitmap.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct VlanSet([u64; 64]);

impl VlanSet {
    /// No VLAN.
    pub const fn empty() -> Self {
        VlanSet([0; 64])
    }
    /// Every id from 0 to 4094.
    pub fn all() -> Self {
        let mut s = VlanSet([u64::MAX; 64]);
        s.remove(4095);
        s
    }
    /// Adds `vid` (ids above 4095 are ignored).
    pub fn insert(&mut self, vid: VlanId) {
        if let Some(w) = self.0.get_mut(usize::from(vid >> 6)) {
            *w |= 1 << (vid & 63);
        }
    }
    /// Removes `vid`.
    pub fn remove(&mut self, vid: VlanId) {
        if let Some(w) = self.0.get_mut(usize::from(vid >> 6)) {
            *w &= !(1 << (vid & 63));
        }
    }
    /// True when `vid` is in the set.
    #[inline]
    pub fn contains(&self, vid: VlanId) -> bool {
        self.0
            .get(usize::from(vid >> 6))
            .is_some_and(|w| w & (1 << (vid & 63)) != 0)
    }
    /// The ids in the set, ascending.
    pub fn iter(&self) -> impl Iterator<Item = VlanId> + '_ {
        (0..=4095u16).filter(|v| self.contains(*v))
    }
}

impl fmt::Debug for VlanSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

/// Errors in a port's VLAN configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VlanConfigError {
    /// A VLAN id outside 1..=4094.
    #[error("VLAN id {0} is out of range: use 1 to 4094")]
    OutOfRange(VlanId),
    /// A trunk with no VLAN at all.
    #[error("a trunk port needs at least one allowed VLAN")]
    EmptyTrunk,
}

/// How a port treats VLANs. See the module documentation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PortVlanMode {
    allowed: VlanSet,
    native: Option<VlanId>,
}

impl Default for PortVlanMode {
    fn default() -> Self {
        Self::plain()
    }
}

/// The outcome of ingress classification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ingress {
    /// The packet belongs to this VLAN.
    Vlan(VlanId),
    /// The port does not admit the frame.
    Denied,
}

impl PortVlanMode {
    /// No VLAN processing: tagged frames keep their tag, untagged frames stay untagged.
    pub fn plain() -> Self {
        PortVlanMode {
            allowed: VlanSet::all(),
            native: Some(0),
        }
    }

    /// An access port in VLAN `vid`: untagged on the wire.
    pub fn access(vid: VlanId) -> Result<Self, VlanConfigError> {
        check_vid(vid)?;
        let mut allowed = VlanSet::empty();
        allowed.insert(vid);
        Ok(PortVlanMode {
            allowed,
            native: Some(vid),
        })
    }

    /// A trunk carrying `vids` tagged; untagged frames belong to `native` (which is added to
    /// the allowed set) or are dropped when it is `None`.
    pub fn trunk(
        vids: impl IntoIterator<Item = VlanId>,
        native: Option<VlanId>,
    ) -> Result<Self, VlanConfigError> {
        let mut allowed = VlanSet::empty();
        let mut any = false;
        for v in vids.into_iter().chain(native) {
            check_vid(v)?;
            allowed.insert(v);
            any = true;
        }
        if !any {
            return Err(VlanConfigError::EmptyTrunk);
        }
        Ok(PortVlanMode { allowed, native })
    }

    /// Whether this is an access port: one VLAN, untagged on the wire.
    pub fn is_access(&self) -> bool {
        matches!(self.native, Some(v) if v != 0)
            && self.allowed.0.iter().map(|w| w.count_ones()).sum::<u32>() == 1
    }

    /// The VLANs the port admits.
    pub fn allowed(&self) -> &VlanSet {
        &self.allowed
    }

    /// The VLAN of untagged frames, if they are admitted.
    pub fn native(&self) -> Option<VlanId> {
        self.native
    }

    /// Classifies a frame arriving with outer tag `tag_vid` (`None` when untagged).
    #[inline]
    pub fn ingress(&self, tag_vid: Option<VlanId>) -> Ingress {
        let vid = match tag_vid {
            None | Some(0) => match self.native {
                Some(n) => n,
                None => return Ingress::Denied,
            },
            Some(v) => v,
        };
        if self.allowed.contains(vid) {
            Ingress::Vlan(vid)
        } else {
            Ingress::Denied
        }
    }

    /// True when a packet of VLAN `vid` may leave through this port.
    #[inline]
    pub fn admits(&self, vid: VlanId) -> bool {
        self.allowed.contains(vid)
    }

    /// True when a packet of VLAN `vid` leaves this port tagged (assuming it is admitted).
    #[inline]
    pub fn tags(&self, vid: VlanId) -> bool {
        vid != 0 && self.native != Some(vid)
    }
}

fn check_vid(vid: VlanId) -> Result<(), VlanConfigError> {
    if (1..=MAX_VLAN_ID).contains(&vid) {
        Ok(())
    } else {
        Err(VlanConfigError::OutOfRange(vid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_port_keeps_tags_and_untagged_as_they_are() {
        let m = PortVlanMode::plain();
        assert_eq!(m.ingress(None), Ingress::Vlan(0));
        assert_eq!(m.ingress(Some(42)), Ingress::Vlan(42));
        assert!(!m.tags(0));
        assert!(m.tags(42));
        assert!(m.admits(0) && m.admits(4094));
        assert!(!m.admits(4095));
    }

    #[test]
    fn access_port_admits_untagged_and_own_vlan_only() {
        let m = PortVlanMode::access(10).unwrap();
        assert_eq!(m.ingress(None), Ingress::Vlan(10));
        assert_eq!(m.ingress(Some(0)), Ingress::Vlan(10), "priority tag");
        assert_eq!(m.ingress(Some(10)), Ingress::Vlan(10));
        assert_eq!(m.ingress(Some(11)), Ingress::Denied);
        assert!(m.admits(10) && !m.admits(11) && !m.admits(0));
        assert!(!m.tags(10));
    }

    #[test]
    fn trunk_without_native_drops_untagged() {
        let m = PortVlanMode::trunk([10, 20], None).unwrap();
        assert_eq!(m.ingress(None), Ingress::Denied);
        assert_eq!(m.ingress(Some(20)), Ingress::Vlan(20));
        assert_eq!(m.ingress(Some(30)), Ingress::Denied);
        assert!(m.tags(10) && m.tags(20));
    }

    #[test]
    fn trunk_native_vlan_is_untagged_on_egress() {
        let m = PortVlanMode::trunk([10, 20], Some(5)).unwrap();
        assert_eq!(m.ingress(None), Ingress::Vlan(5));
        assert!(m.admits(5) && !m.tags(5) && m.tags(10));
    }

    #[test]
    fn bad_vlan_configs_are_rejected() {
        assert_eq!(PortVlanMode::access(0), Err(VlanConfigError::OutOfRange(0)));
        assert_eq!(
            PortVlanMode::access(4095),
            Err(VlanConfigError::OutOfRange(4095))
        );
        assert_eq!(
            PortVlanMode::trunk([], None),
            Err(VlanConfigError::EmptyTrunk)
        );
        assert!(PortVlanMode::trunk([1, 5000], None).is_err());
    }
}
