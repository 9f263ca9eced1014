//! Shared pieces of the end-to-end tests: namespaces and commands (`lab`), the switch
//! worker (`runner`), and a builder for a switch with TAP and AF_PACKET ends in their own
//! namespaces. Not every test binary uses every helper.
#![allow(dead_code, unreachable_pub)]

pub use weft_testlab::lab;
pub use weft_testlab::runner;

use std::sync::Arc;

use weft_switch::{PortCounters, PortId, PortOptions, PortRx, Switch, SwitchConfig};
use weft_tap::{AfPacket, AfPacketOptions, Offloads, PortStats, Tap, TapOptions};

use lab::Netns;
use runner::{IdlePolicy, SwitchThread};

/// One host on the switch: a namespace with an address, reached through a port.
pub struct End {
    pub ns: Netns,
    /// The interface in `ns` that carries `ip`.
    pub ifname: String,
    pub ip: String,
    pub port: PortId,
    /// The port's own counters, one per queue.
    pub stats: Vec<Arc<PortStats>>,
    /// The switch's counters for the port.
    pub counters: Arc<PortCounters>,
    /// The switch side of a veth pair (AF_PACKET ends).
    pub switch_side: Option<Netns>,
}

impl End {
    pub fn rx_gso(&self) -> u64 {
        self.stats.iter().map(|s| s.snapshot().rx_gso_frames).sum()
    }
    pub fn tx_gso(&self) -> u64 {
        self.stats.iter().map(|s| s.snapshot().tx_gso_frames).sum()
    }
    pub fn tx_csum_partial(&self) -> u64 {
        self.stats
            .iter()
            .map(|s| s.snapshot().tx_csum_partial)
            .sum()
    }
    pub fn port_drops(&self) -> u64 {
        self.stats.iter().map(|s| s.snapshot().total_drops()).sum()
    }
}

/// A switch being wired up.
pub struct LabBuilder {
    switch: Switch,
    extra_rx: Vec<(PortId, Box<dyn PortRx>)>,
    ends: Vec<End>,
}

impl Default for LabBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl LabBuilder {
    pub fn new() -> Self {
        LabBuilder {
            switch: Switch::new("lab", SwitchConfig::default()).expect("switch"),
            extra_rx: Vec::new(),
            ends: Vec::new(),
        }
    }

    /// A namespace with a TAP (`queues` queues) on the switch, address `10.77.0.<host>/24`.
    pub fn tap(mut self, host: u8, mtu: u32, offloads: Offloads, queues: usize) -> Self {
        let ns = Netns::new("t");
        let ifname = lab::unique("tap");
        let tap = Tap::open(
            &TapOptions::new(&ifname)
                .netns(ns.path())
                .offloads(offloads)
                .mtu(mtu)
                .queues(queues),
        )
        .unwrap_or_else(|e| panic!("open TAP {ifname}: {e}"));
        assert_eq!(tap.mtu(), mtu as usize);
        let (want, got) = (offloads.normalized(), tap.offloads());
        assert_eq!(
            (got.csum, got.tso),
            (want.csum, want.tso),
            "the kernel took the offloads"
        );
        assert!(!got.uso || want.uso, "USO only when asked for");
        let ip = format!("10.77.0.{host}");
        ns.ip(&["addr", "add", &format!("{ip}/24"), "dev", &ifname]);
        let mut stats = Vec::new();
        let mut rxs: Vec<Box<dyn PortRx>> = Vec::new();
        let mut first_tx = None;
        for q in tap.into_queues() {
            let (rx, tx, s) = q.split();
            stats.push(s);
            rxs.push(Box::new(rx));
            first_tx.get_or_insert(tx);
        }
        let mut rxs = rxs.into_iter();
        let port = self
            .switch
            .add_port(
                &ifname,
                rxs.next(),
                Box::new(first_tx.expect("a queue")),
                PortOptions::default(),
            )
            .expect("add port");
        self.extra_rx.extend(rxs.map(|rx| (port, rx)));
        let counters = self.switch.port_counters(port).expect("counters");
        self.ends.push(End {
            ns,
            ifname,
            ip,
            port,
            stats,
            counters,
            switch_side: None,
        });
        self
    }

    /// A namespace reached through a veth pair whose other end, in a namespace of its own,
    /// is an AF_PACKET port on the switch. Address `10.77.0.<host>/24`.
    pub fn veth(mut self, host: u8, mtu: u32, offloads: Offloads) -> Self {
        let side = Netns::new("s");
        let ns = Netns::new("v");
        let (inner, outer) = (lab::unique("vi"), lab::unique("vo"));
        side.ip(&[
            "link", "add", &outer, "type", "veth", "peer", "name", &inner,
        ]);
        side.ip(&["link", "set", &inner, "netns", &ns.name]);
        let mtu_s = mtu.to_string();
        side.ip(&["link", "set", &outer, "mtu", &mtu_s, "up"]);
        let ip = format!("10.77.0.{host}");
        ns.ip(&["link", "set", &inner, "mtu", &mtu_s, "up"]);
        ns.ip(&["addr", "add", &format!("{ip}/24"), "dev", &inner]);
        let port = AfPacket::open(
            &AfPacketOptions::new(&outer)
                .netns(side.path())
                .offloads(offloads),
        )
        .unwrap_or_else(|e| panic!("open AF_PACKET on {outer}: {e}"));
        assert_eq!(port.mtu(), mtu as usize);
        assert!(
            port.kernel_ignores_outgoing(),
            "this kernel has PACKET_IGNORE_OUTGOING"
        );
        let (rx, tx, stats) = port.split();
        let port = self
            .switch
            .add_port(
                &outer,
                Some(Box::new(rx)),
                Box::new(tx),
                PortOptions::default(),
            )
            .expect("add port");
        let counters = self.switch.port_counters(port).expect("counters");
        self.ends.push(End {
            ns,
            ifname: inner,
            ip,
            port,
            stats: vec![stats],
            counters,
            switch_side: Some(side),
        });
        self
    }

    pub fn start(self) -> Lab {
        let runner = SwitchThread::spawn(self.switch, self.extra_rx, IdlePolicy::default());
        Lab {
            runner: Some(runner),
            ends: self.ends,
        }
    }
}

/// A running switch and its ends. Dropping it stops the switch (closing the ports) and
/// then removes the namespaces.
pub struct Lab {
    pub runner: Option<SwitchThread>,
    pub ends: Vec<End>,
}

impl Lab {
    /// Stops the switch and returns it, for its counters.
    pub fn stop(&mut self) -> Option<Switch> {
        self.runner.take().map(SwitchThread::stop)
    }
}
