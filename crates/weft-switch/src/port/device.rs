//! What every kind of port device offers the daemon beside its halves: its MTU, what it
//! negotiated, whether it is connected, and the counters it keeps itself.
//!
//! The switch never calls this; the daemon does, without knowing the kind: `port show`,
//! `--json` and the metrics endpoint read every device through [`PortDevice`], and a new kind
//! (memif, AF_XDP) is one implementation.

use super::PortHalves;

/// A port device: opened by its driver, split into per-lane halves once, then kept by the
/// daemon for as long as the port exists (dropping it closes what it owns, e.g. a vhost-user
/// socket).
pub trait PortDevice: Send + Sync {
    /// The kind's name as the protocol spells it (`tap`, `af_packet`, `vhost_user`, ...).
    fn kind(&self) -> &'static str;

    /// The largest frame the device carries, without the Ethernet header.
    fn mtu(&self) -> u32;

    /// The device's halves for a switch of `lanes` lanes, first lane first. A device with
    /// one receive queue gives one pair (the daemon keeps its receive half on one lane and
    /// shares its transmit half); a multiqueue device gives up to `lanes` pairs. The halves
    /// are given once: a second call is [`DeviceError::AlreadySplit`].
    fn take_lanes(&mut self, lanes: usize) -> Result<Vec<PortHalves>, DeviceError>;

    /// What the device is doing now: its offloads, whether its peer is there, its faults.
    fn status(&self) -> DeviceStatus;

    /// Every counter the device keeps itself, zeros included, each once.
    fn visit_counters(&self, visit: &mut dyn FnMut(DeviceCounter<'_>));
}

/// Why a device gave no halves.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// The halves were taken before.
    #[error("the port's halves were already taken")]
    AlreadySplit,
    /// The driver could not split the device.
    #[error("{0}")]
    Split(String),
}

/// A device's state as `port show` lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceStatus {
    /// The offloads the device takes on transmit now (`csum`, `tso4`, `tso6`, `uso`, and
    /// how a tunnel's datagrams go), as negotiated where a peer negotiates them.
    pub offloads: Vec<String>,
    /// Whether its peer (a vhost-user frontend, the other end of a link) is there; `None`
    /// for a device that has no peer.
    pub link: Option<Link>,
    /// Whether a vhost-user frontend started its rings.
    pub running: bool,
    /// What is broken now, each as `<where>:<why>` (a vhost-user ring and its fault), until
    /// the peer repairs it.
    pub broken: Vec<String>,
    /// What the device does now beside moving frames, one word each (a vhost-user port
    /// logging the pages it writes for a live migration: `logging`).
    pub activity: Vec<String>,
    /// The MTU the peer gave its guest, when it said (a vhost-user frontend's
    /// `NET_SET_MTU`, QEMU `host_mtu`).
    pub peer_mtu: Option<u32>,
}

impl DeviceStatus {
    /// The status as one list, as `port show` has always shown it: the offloads, then
    /// `connected` or `disconnected`, `running`, what it is doing (`logging`), and
    /// `broken:<where>:<why>` for each fault.
    pub fn words(&self) -> Vec<String> {
        let mut words = self.offloads.clone();
        match self.link {
            Some(Link::Connected) => words.push("connected".into()),
            Some(Link::Disconnected) => words.push("disconnected".into()),
            None => {}
        }
        if self.running {
            words.push("running".into());
        }
        words.extend(self.activity.iter().cloned());
        words.extend(self.broken.iter().map(|b| format!("broken:{b}")));
        words
    }
}

/// Whether a device's peer is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// Connected.
    Connected,
    /// Waiting for its peer.
    Disconnected,
}

/// One counter a device keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceCounter<'a> {
    /// Its name: a drop reason without the `port_` prefix the daemon shows it under, or an
    /// event counter's full name (`vhost_to_guest_kicks`).
    pub name: &'a str,
    /// Its value.
    pub value: u64,
    /// Whether it counts frames lost or events.
    pub class: CounterClass,
}

/// What a device counter counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterClass {
    /// Frames the device dropped before the switch saw them, or that its kernel or peer
    /// refused: shown beside the switch's drops as `port_<name>`.
    Drop,
    /// Anything else it did (kicks, notifications, batches by size, datagrams sent).
    Event,
}

impl<'a> DeviceCounter<'a> {
    /// A drop counter.
    pub fn drop(name: &'a str, value: u64) -> Self {
        DeviceCounter {
            name,
            value,
            class: CounterClass::Drop,
        }
    }

    /// An event counter.
    pub fn event(name: &'a str, value: u64) -> Self {
        DeviceCounter {
            name,
            value,
            class: CounterClass::Event,
        }
    }
}

/// The one pair of halves of a device that has one, until it is taken. (Behind a mutex only
/// so that the device stays `Sync`; it is taken through `&mut`, never locked.)
pub struct Unsplit(std::sync::Mutex<Option<PortHalves>>);

impl Unsplit {
    /// Holds `halves` until they are taken.
    pub fn new(halves: PortHalves) -> Unsplit {
        Unsplit(std::sync::Mutex::new(Some(halves)))
    }

    /// The pair the first time, then [`DeviceError::AlreadySplit`].
    pub fn take(&mut self) -> Result<Vec<PortHalves>, DeviceError> {
        let slot = match self.0.get_mut() {
            Ok(slot) => slot,
            Err(poisoned) => poisoned.into_inner(),
        };
        slot.take()
            .map(|h| vec![h])
            .ok_or(DeviceError::AlreadySplit)
    }
}

/// Where a device with one pair of halves reads its counters and its peer's presence.
pub trait CounterSource: Send + Sync {
    /// Whether the peer is there; `None` (the default) for a device without one.
    fn link(&self) -> Option<Link> {
        None
    }

    /// Every counter, zeros included, each once.
    fn visit_counters(&self, visit: &mut dyn FnMut(DeviceCounter<'_>));
}

impl<T: CounterSource + ?Sized> CounterSource for std::sync::Arc<T> {
    fn link(&self) -> Option<Link> {
        (**self).link()
    }

    fn visit_counters(&self, visit: &mut dyn FnMut(DeviceCounter<'_>)) {
        (**self).visit_counters(visit);
    }
}

/// A device with one receive queue and one transmit queue (TAP, AF_PACKET, VXLAN, TCP
/// link): fixed MTU and offloads, counters from its halves' shared `counters`.
pub struct OnePairDevice<C> {
    kind: &'static str,
    mtu: u32,
    offloads: Vec<String>,
    halves: Unsplit,
    counters: C,
}

impl<C: CounterSource> OnePairDevice<C> {
    /// A device of `kind` whose halves are `halves`.
    pub fn new(
        kind: &'static str,
        mtu: u32,
        offloads: Vec<String>,
        halves: PortHalves,
        counters: C,
    ) -> OnePairDevice<C> {
        OnePairDevice {
            kind,
            mtu,
            offloads,
            halves: Unsplit::new(halves),
            counters,
        }
    }

    /// Where it reads its counters.
    pub fn counters(&self) -> &C {
        &self.counters
    }
}

impl<C: CounterSource> PortDevice for OnePairDevice<C> {
    fn kind(&self) -> &'static str {
        self.kind
    }

    fn mtu(&self) -> u32 {
        self.mtu
    }

    fn take_lanes(&mut self, _lanes: usize) -> Result<Vec<PortHalves>, DeviceError> {
        self.halves.take()
    }

    fn status(&self) -> DeviceStatus {
        DeviceStatus {
            offloads: self.offloads.clone(),
            link: self.counters.link(),
            ..DeviceStatus::default()
        }
    }

    fn visit_counters(&self, visit: &mut dyn FnMut(DeviceCounter<'_>)) {
        self.counters.visit_counters(visit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_reads_as_the_words_port_show_has_always_listed() {
        let status = DeviceStatus {
            offloads: vec!["csum".into(), "tso4".into()],
            link: Some(Link::Connected),
            running: true,
            broken: vec!["rx0:avail_index_out_of_range".into()],
            activity: vec!["logging".into()],
            peer_mtu: Some(1450),
        };
        assert_eq!(
            status.words(),
            [
                "csum",
                "tso4",
                "connected",
                "running",
                "logging",
                "broken:rx0:avail_index_out_of_range"
            ]
        );
        assert!(DeviceStatus::default().words().is_empty());
    }

    #[test]
    fn halves_are_taken_once() {
        let (rx, tx, _h) = crate::memory_port::memory_port(crate::PortCaps::plain(1500), 4);
        let mut slot = Unsplit::new(PortHalves {
            rx: Some(Box::new(rx)),
            tx: Box::new(tx),
        });
        assert_eq!(slot.take().map(|v| v.len()).ok(), Some(1));
        assert!(matches!(slot.take(), Err(DeviceError::AlreadySplit)));
    }

    struct Up;
    impl CounterSource for Up {
        fn link(&self) -> Option<Link> {
            Some(Link::Connected)
        }
        fn visit_counters(&self, visit: &mut dyn FnMut(DeviceCounter<'_>)) {
            visit(DeviceCounter::drop("lost", 2));
        }
    }

    #[test]
    fn a_one_pair_device_reports_its_offloads_link_and_counters_and_splits_once() {
        let (rx, tx, _h) = crate::memory_port::memory_port(crate::PortCaps::plain(1500), 4);
        let halves = PortHalves {
            rx: Some(Box::new(rx)),
            tx: Box::new(tx),
        };
        let mut device = OnePairDevice::new("test", 9000, vec!["csum".into()], halves, Up);
        assert_eq!(device.status().words(), ["csum", "connected"]);
        let mut seen = Vec::new();
        device.visit_counters(&mut |c| seen.push((c.name.to_string(), c.value, c.class)));
        assert_eq!(seen, [("lost".to_string(), 2, CounterClass::Drop)]);
        assert_eq!((device.kind(), device.mtu()), ("test", 9000));
        assert_eq!(device.take_lanes(3).map(|l| l.len()).ok(), Some(1));
        assert!(device.take_lanes(3).is_err());
    }
}
