//! `upcall_subscribe`, `upcall_read`, `upcall_unsubscribe`: a controller's view of the
//! packets `controller` rule actions send up (`weft monitor upcalls`).
//!
//! One [`UpcallHub`] serves every switch: each lane hands its batch's upcalls to the
//! subscriptions that want its switch right after the batch, on its own thread
//! (`weft_switch::upcall::hub`). A subscription is a bounded queue; a full one loses what
//! comes and counts it (shown in every read, and in `weft_switch_upcall_subscriber_lost_total`).
//! With no subscription wanting a switch, its upcalls are dropped and counted
//! (`weft_switch_upcalls_unclaimed_total`): nothing waits in weftd for a controller that may
//! never come.
//!
//! Like a capture, a subscription belongs to the connection that made it and ends with it;
//! one left unread for [`IDLE_LIMIT`] is ended at the next request weftd answers.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use weft_control::response::{UpcallInfo, UpcallReason};
use weft_control::{ControlError, Response};
use weft_switch::{UpcallHub, UpcallSubscription};

use super::{limit, Controller, Session};

/// Subscriptions at once, at most (every lane copies each upcall into each of them).
pub(super) const MAX_SUBSCRIPTIONS: usize = 8;
/// Upcalls a subscription holds by default, and at most.
const DEFAULT_QUEUE: u32 = 1024;
/// (8192 upcalls of a 2 KiB snap length are 16 MiB; eight subscriptions 128 MiB at most.)
const MAX_QUEUE: u32 = 8192;
/// Bytes of each frame a subscription keeps: the switch's upcall snap length.
const SNAPLEN: usize = 2048;
/// A subscription unread this long is ended.
pub(super) const IDLE_LIMIT: Duration = Duration::from_secs(30);

struct Subscription {
    queue: Arc<UpcallSubscription>,
    last_read: Instant,
}

/// The subscriptions, and the hub every switch hands its upcalls to.
#[derive(Default)]
pub(super) struct Upcalls {
    hub: Arc<UpcallHub>,
    last_id: u64,
    running: BTreeMap<u64, Subscription>,
}

impl Upcalls {
    /// The hub a new switch lane hands its upcalls to.
    pub(super) fn hub(&self) -> Arc<UpcallHub> {
        Arc::clone(&self.hub)
    }

    /// Ends the subscriptions unread since `now - IDLE_LIMIT`.
    pub(super) fn end_idle(&mut self, now: Instant) {
        let hub = &self.hub;
        self.running.retain(|id, s| {
            let keep = now.saturating_duration_since(s.last_read) < IDLE_LIMIT;
            if !keep {
                hub.unsubscribe(&s.queue);
                tracing::info!(id, "upcall subscription ended: not read for 30 s");
            }
            keep
        });
    }

    fn end(&mut self, id: u64) -> bool {
        match self.running.remove(&id) {
            Some(s) => {
                self.hub.unsubscribe(&s.queue);
                true
            }
            None => false,
        }
    }
}

fn no_subscription(id: u64) -> ControlError {
    ControlError::not_found(format!("no upcall subscription {id}")).with_hint(
        "subscribe with upcall_subscribe (weft monitor upcalls); a subscription ends with its \
         connection, or when it is not read for 30 s",
    )
}

impl Controller {
    pub(super) fn upcall_subscribe(
        &mut self,
        switch: Option<String>,
        queue: Option<u32>,
        session: &mut Session,
    ) -> Result<Response, ControlError> {
        if let Some(name) = &switch {
            self.switch_rt(name)?;
        }
        let queue = queue.unwrap_or(DEFAULT_QUEUE);
        if !(1..=MAX_QUEUE).contains(&queue) {
            return Err(ControlError::invalid(format!(
                "queue {queue} is out of range: use 1 to {MAX_QUEUE} upcalls"
            )));
        }
        if self.upcalls.running.len() >= MAX_SUBSCRIPTIONS {
            return Err(limit(format!(
                "{MAX_SUBSCRIPTIONS} upcall subscriptions are running already"
            ))
            .with_hint("end one (upcall_unsubscribe), or close the connection that made it"));
        }
        let capacity = usize::try_from(queue).unwrap_or(1024);
        let subscription = Arc::new(UpcallSubscription::new(switch, capacity, SNAPLEN));
        self.upcalls.hub.subscribe(Arc::clone(&subscription));
        self.upcalls.last_id += 1;
        let id = self.upcalls.last_id;
        self.upcalls.running.insert(
            id,
            Subscription {
                queue: subscription,
                last_read: Instant::now(),
            },
        );
        session.upcalls.push(id);
        Ok(Response::UpcallSubscribed { id })
    }

    pub(super) fn upcall_read(
        &mut self,
        id: u64,
        max: Option<u32>,
    ) -> Result<Response, ControlError> {
        let s = self
            .upcalls
            .running
            .get_mut(&id)
            .ok_or_else(|| no_subscription(id))?;
        s.last_read = Instant::now();
        let max = max.unwrap_or(256);
        if max == 0 {
            return Err(ControlError::invalid("max must be at least 1"));
        }
        // 4096 upcalls of 2 KiB are 16 MiB of hex: within the client's response bound.
        let max = usize::try_from(max.min(4096)).unwrap_or(4096);
        let mut upcalls = Vec::new();
        s.queue.drain(max, |u| {
            upcalls.push(UpcallInfo {
                switch: u.switch.to_string(),
                port: u.port.to_string(),
                reason: match u.reason {
                    weft_switch::UpcallReason::Action => UpcallReason::Action,
                },
                cookie: u.rule.map(|r| r.cookie),
                priority: u.rule.map(|r| r.priority),
                orig_len: u32::try_from(u.orig_len).unwrap_or(u32::MAX),
                data: weft_control::codec::hex_encode(u.data),
            });
        });
        Ok(Response::Upcalls {
            upcalls,
            lost: s.queue.lost(),
        })
    }

    pub(super) fn upcall_unsubscribe(
        &mut self,
        id: u64,
        session: &mut Session,
    ) -> Result<Response, ControlError> {
        if !self.upcalls.end(id) {
            return Err(no_subscription(id));
        }
        session.upcalls.retain(|u| *u != id);
        Ok(Response::Done)
    }

    /// Ends the subscriptions a connection left.
    pub(super) fn end_upcall_session(&mut self, session: &mut Session) {
        for id in std::mem::take(&mut session.upcalls) {
            self.upcalls.end(id);
        }
    }

    /// Subscriptions running (tests and metrics).
    pub fn upcall_subscriptions(&self) -> usize {
        self.upcalls.running.len()
    }
}
