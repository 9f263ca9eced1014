//! Handing a batch's upcalls to the subscriptions of the switch's [`UpcallHub`], on the
//! lane's own thread, right after the batch: one lock of the hub's list and one of each
//! subscription that wants this switch, whatever the number of upcalls.

use std::sync::Arc;

use crate::upcall::{RuleRef, SubscribedUpcall, UpcallHub};

use super::Switch;

impl Switch {
    /// Hands the upcalls of every batch from now on to `hub`'s subscriptions (none: they
    /// wait in the lane's queue for [`drain_upcalls`](Switch::drain_upcalls)). With a hub
    /// and no subscription that wants this switch, upcalls are dropped and counted
    /// (`UpcallStats::unclaimed`).
    pub fn set_upcall_hub(&mut self, hub: Option<Arc<UpcallHub>>) {
        self.upcall_hub = hub;
    }

    /// Moves the queued upcalls to the hub's subscriptions, counting what no one wanted and
    /// what a full subscription lost; the queue's buffers are kept for the next batch.
    pub(super) fn hand_upcalls(&mut self) {
        let Switch {
            name,
            ports,
            table,
            upcalls,
            upcall_hub,
            ..
        } = self;
        let Some(hub) = upcall_hub else { return };
        let mut claimed = false;
        let mut lost = 0u64;
        {
            let subscriptions = hub.lock();
            for sub in subscriptions.iter().filter(|s| s.wants(name)) {
                claimed = true;
                let mut w = sub.writer();
                for u in upcalls.iter() {
                    let port = ports
                        .get(u.key.in_port.index())
                        .and_then(Option::as_ref)
                        .map_or("", |p| p.name.as_str());
                    let rule = u.rule.and_then(|id| table.get(id)).map(|r| RuleRef {
                        cookie: r.cookie,
                        priority: r.priority,
                    });
                    let up = SubscribedUpcall {
                        switch: name,
                        port,
                        reason: u.reason,
                        rule,
                        orig_len: u.orig_len,
                        data: &u.data,
                    };
                    if !w.push(&up) {
                        lost += 1;
                    }
                }
            }
        }
        if !claimed {
            upcalls.note_unclaimed(upcalls.len());
        }
        upcalls.note_subscriber_lost(lost);
        upcalls.drain(|_| {});
    }
}
