//! The hand-over conversation, message by message:
//!
//! 1. new → old: [`Hello`] (the hand-over protocol this binary speaks, its version).
//! 2. old → new: [`Answer::Refuse`] (and the old weftd carries on), or [`Answer::Offer`]
//!    with the listening sockets and the lock attached; then one [`PortOffer`] per port,
//!    each with its device's descriptors attached. From the offer on, the old weftd's
//!    workers are held and its ports' control threads parked.
//! 3. new → old: [`Verdict::Adopted`] once every device is taken over, or
//!    [`Verdict::Abandon`] with why (the old weftd resumes). A new weftd that dies or goes
//!    quiet counts as abandoning.
//! 4. old → new, after `Adopted`: [`Bye`]; the old weftd then exits without closing
//!    anything. A new weftd that gets no `Bye` exits (the old one may have resumed).
//!
//! A change to what a message means is a new [`PROTOCOL`]: the old weftd refuses any other
//! (so a binary that would misread its devices never gets them).

use serde::{Deserialize, Serialize};
use weft_control::state::State;

use crate::devices::Carried;

/// The hand-over protocol this binary speaks.
pub const PROTOCOL: u32 = 1;

/// The first message: who is asking.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The hand-over protocol the new weftd speaks.
    pub protocol: u32,
    /// The new weftd's version (for the logs).
    pub version: String,
}

/// The old weftd's answer to [`Hello`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// No hand-over; the old weftd carries on.
    Refuse {
        /// Why, for the new weftd to print.
        reason: String,
    },
    /// The live state; the ports follow.
    Offer(Box<Offer>),
}

/// What the old weftd hands over besides the ports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offer {
    /// The old weftd's version.
    pub version: String,
    /// Its process id (the new weftd waits for it to exit).
    pub pid: u32,
    /// The configuration, as in the state file.
    pub state: State,
    /// Which descriptors came with this message, in order.
    pub listeners: Listeners,
    /// Ports that follow, one [`PortOffer`] each.
    pub ports: usize,
    /// What each switch had learned.
    pub fdb: Vec<SwitchFdb>,
    /// systemd's notification socket, when systemd runs the old weftd (the new one tells
    /// it its pid).
    pub notify_socket: Option<String>,
}

/// The descriptors attached to the [`Offer`], in this order: the lock, the control
/// socket, the old weftd's standard output and error (where a weftd in the foreground
/// goes on writing: a terminal, a file, systemd's journal), then each one present.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listeners {
    /// The control socket over TCP.
    pub control_tcp: bool,
    /// The metrics listener.
    pub metrics: bool,
}

impl Listeners {
    /// How many descriptors come with the offer.
    pub fn fd_count(self) -> usize {
        4 + usize::from(self.control_tcp) + usize::from(self.metrics)
    }
}

/// One port's device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortOffer {
    /// Its switch.
    pub switch: String,
    /// The port.
    pub port: String,
    /// The device, whose descriptors come with this message.
    pub device: Carried,
}

/// What a switch had learned: its dynamic FDB entries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchFdb {
    /// The switch.
    pub switch: String,
    /// Its learned entries.
    pub entries: Vec<LearnedMac>,
}

/// A learned FDB entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LearnedMac {
    /// Its VLAN.
    pub vlan: u16,
    /// The station's address.
    #[serde(with = "weft_control::text_form::mac")]
    pub mac: weft_packet::MacAddr,
    /// The port it was learned on (by name: ids are the new weftd's own).
    pub port: String,
    /// Milliseconds since it was last seen.
    pub age_ms: u64,
}

/// The new weftd's last word.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every device is taken over: the old weftd must exit, closing nothing.
    Adopted,
    /// The new weftd gives up: the old one resumes.
    Abandon {
        /// Why.
        reason: String,
    },
}

/// The old weftd's last message: it will never resume (sent after [`Verdict::Adopted`]).
/// Until it arrives the new weftd may not assume the devices are its alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bye;
