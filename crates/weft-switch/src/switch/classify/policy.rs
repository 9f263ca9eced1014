//! The receiving port's policy as the pipeline applies it to one batch: port security
//! before the decision, storm control on the frames that flood, and what learning's
//! refusal means for the frame. Every check runs before the FDB learns from the frame.

use weft_packet::MacAddr;

use crate::counters::DropReason;
use crate::decision::{Output, Target};
use crate::fdb::{IgnoreReason, LearnOutcome};
use crate::policy::{FloodKind, MacLimitAction, PortSecurity, StormGate, StormPolicy};
use crate::port::RxFrame;
use crate::switch::PortOptions;
use crate::types::Timestamp;

/// One batch's view of the receiving port's policy.
pub(super) struct BatchPolicy<'p> {
    security: Option<&'p PortSecurity>,
    storm: &'p StormPolicy,
    /// The port's buckets, locked at the batch's first flooding frame.
    gate: Option<StormGate<'p>>,
    now: Timestamp,
    drop_over_mac_limit: bool,
}

impl<'p> BatchPolicy<'p> {
    pub(super) fn new(options: &'p PortOptions, now: Timestamp) -> Self {
        BatchPolicy {
            security: options.security.is_enabled().then_some(&options.security),
            storm: &options.storm,
            gate: None,
            now,
            drop_over_mac_limit: options
                .mac_limit
                .is_some_and(|l| l.action == MacLimitAction::Drop),
        }
    }

    /// Whether frames are checked one by one (and may not share a verdict because their
    /// first bytes match).
    #[inline(always)]
    pub(super) fn checks_frames(&self) -> bool {
        self.security.is_some() || self.storm.is_enabled()
    }

    /// Port security: whether the port may send this frame.
    #[inline(always)]
    pub(super) fn check_source(&self, frame: RxFrame<'_>) -> Result<(), DropReason> {
        match self.security {
            None => Ok(()),
            Some(security) => security.check(frame.head, frame.len()),
        }
    }

    /// Storm control for a frame to `dst` of `len` bytes going to `outputs`: takes its
    /// tokens if it floods, or says why it is dropped.
    #[inline(always)]
    pub(super) fn check_flood(
        &mut self,
        dst: MacAddr,
        len: usize,
        outputs: &[Output],
    ) -> Result<(), DropReason> {
        if !self.storm.is_enabled() {
            return Ok(());
        }
        let floods = outputs
            .iter()
            .any(|o| matches!(o.target, Target::Flood { .. }));
        if !floods {
            return Ok(());
        }
        let kind = if dst.is_broadcast() {
            FloodKind::Broadcast
        } else if dst.is_multicast() {
            FloodKind::Multicast
        } else {
            FloodKind::UnknownUnicast
        };
        if self.gate.is_none() {
            self.gate = self.storm.begin(self.now);
        }
        match &mut self.gate {
            Some(gate) => gate.admit(kind, len),
            None => Ok(()),
        }
    }

    /// The drop a learning outcome calls for, if any: a held (flapping) source, or a new
    /// source beyond a MAC limit whose action is `drop`.
    #[inline(always)]
    pub(super) fn learn_refusal(&self, outcome: LearnOutcome) -> Option<DropReason> {
        match outcome {
            LearnOutcome::Ignored(IgnoreReason::FlapHeld) => Some(DropReason::MacFlapHeld),
            LearnOutcome::Ignored(IgnoreReason::PortMacLimit) if self.drop_over_mac_limit => {
                Some(DropReason::MacLimit)
            }
            _ => None,
        }
    }
}
