//! `tap` ports: a TAP device weftd creates (in the port's network namespace when it names
//! one), gone when the port is removed or weftd exits.

use weft_tap::{Offloads, Tap, TapOptions};

use super::{OpenError, Opened};

/// What a `tap` port names.
pub(super) struct TapSettings<'a> {
    pub(super) ifname: Option<&'a str>,
    pub(super) netns: Option<&'a str>,
    pub(super) queues: u16,
    pub(super) mtu: u32,
    pub(super) offloads: bool,
}

/// Opens the TAP of port `port` (whose name the device takes when it names none).
pub(super) fn open(port: &str, s: &TapSettings<'_>) -> Result<Opened, OpenError> {
    if s.queues != 1 {
        // The switch polls one receive half per port; model::validate refuses this first,
        // so only a hand-edited state file gets here.
        return Err(OpenError::Settings(format!(
            "{} queues: weftd opens TAPs with one queue",
            s.queues
        )));
    }
    let mut options = TapOptions::new(s.ifname.unwrap_or(port))
        .mtu(s.mtu)
        .offloads(if s.offloads {
            Offloads::ALL
        } else {
            Offloads::NONE
        });
    if let Some(ns) = s.netns {
        options = options.netns(weft_tap::netns::named(ns));
    }
    let tap = Tap::open(&options)?;
    let mtu = u32::try_from(tap.mtu())
        .map_err(|_| OpenError::Settings("the TAP's MTU is out of range".into()))?;
    let offloads = tap.offloads();
    let queue = tap
        .into_queues()
        .into_iter()
        .next()
        .ok_or_else(|| OpenError::Settings("the TAP opened without a queue".into()))?;
    Ok(Opened::plain(weft_tap::tap_device(queue, mtu, offloads)))
}
