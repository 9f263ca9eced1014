//! A guest racing its own transmit buffer: it rewrites a frame after the switch has read
//! it to decide (a mock driver writing guest memory from the destination's `transmit`,
//! that is between the switch's classification and its delivery). The frame that leaves
//! must be the frame the rules and checks saw: addresses, ports and tags from the
//! snapshot the port took, only the payload from the guest's memory — still one copy from
//! guest to destination.

use std::sync::{Arc, Mutex};

use virtio_queue::desc::split::Descriptor;
use vm_memory::{Address, Bytes, GuestAddress, GuestMemoryMmap};
use weft_packet::MacAddr;
use weft_switch::{
    Action, ActionList, FlowMatch, FlowRule, PortCaps, PortId, PortOptions, PortTx, Switch,
    SwitchConfig, Timestamp, TxFrame,
};

use crate::config::VhostPortConfig;
use crate::rx::SNAPSHOT_LEN;
use crate::tests::testutil::{all_features, ether_frame, tcp4_frame, Rig};

const HDR0: [u8; 12] = [0; 12];
/// Where the TCP destination port of a [`tcp4_frame`] lies.
const TCP4_DST_PORT: usize = 14 + 20 + 2;

/// A destination that, when handed frames, first lets the source guest rewrite its
/// buffer (`race`: bytes written at guest addresses), then copies the frames as they are
/// now — what a destination port's copy would read.
struct RacingDestination {
    guest: GuestMemoryMmap,
    race: Vec<(GuestAddress, Vec<u8>)>,
    got: Delivered,
}

/// The frames a [`RacingDestination`] was handed, as it copied them.
type Delivered = Arc<Mutex<Vec<Vec<u8>>>>;

impl PortTx for RacingDestination {
    fn caps(&self) -> PortCaps {
        PortCaps::plain(9000)
    }

    fn transmit(&mut self, frames: &[TxFrame<'_>]) -> usize {
        for (addr, bytes) in &self.race {
            self.guest.write_slice(bytes, *addr).unwrap();
        }
        let mut got = self.got.lock().unwrap();
        for f in frames {
            let mut out = vec![0; f.len()];
            assert_eq!(f.copy_to(&mut out), Some(f.len()));
            got.push(out);
        }
        frames.len()
    }
}

/// A switch with the source guest's port (`a`) and a racing destination (`b`): rules drop
/// TCP to port 22 over IPv4 and IPv6 and send everything else to `b`.
fn racing_switch(
    race: impl FnOnce(GuestAddress) -> Vec<(GuestAddress, Vec<u8>)>,
    frame: &[u8],
) -> (Rig, Switch, PortId, Delivered) {
    let config = VhostPortConfig::default();
    let (mut rig, rx, tx) = Rig::new(config, all_features(&config), 256);
    let head = rig.txq.send(&HDR0, frame, &[]);
    let desc: Descriptor = rig
        .txq
        .mem
        .read_obj(rig.txq.desc.unchecked_add(u64::from(head) * 16))
        .unwrap();
    let at = GuestAddress(desc.addr().0 + HDR0.len() as u64);
    let got = Arc::new(Mutex::new(Vec::new()));
    let destination = RacingDestination {
        guest: rig.txq.mem.clone(),
        race: race(at),
        got: Arc::clone(&got),
    };
    let mut switch = Switch::new("race", SwitchConfig::default()).unwrap();
    let a = switch
        .add_port(
            "a",
            Some(Box::new(rx)),
            Box::new(tx),
            PortOptions::default(),
        )
        .unwrap();
    let b = switch
        .add_port("b", None, Box::new(destination), PortOptions::default())
        .unwrap();
    for ethertype in [0x0800, 0x86dd] {
        let ssh = FlowMatch {
            ethertype: Some(ethertype),
            ip_proto: Some(6),
            l4_dst: Some(22),
            ..FlowMatch::default()
        };
        let drop = FlowRule::new(10, ssh, ActionList::single(Action::Drop));
        switch.add_rule(drop).unwrap();
    }
    let rest = FlowRule::new(1, FlowMatch::ANY, ActionList::single(Action::Output(b)));
    switch.add_rule(rest).unwrap();
    (rig, switch, a, got)
}

/// `bytes` at `offset` into the frame at `at`.
fn write_at(at: GuestAddress, offset: usize, bytes: &[u8]) -> (GuestAddress, Vec<u8>) {
    (at.unchecked_add(offset as u64), bytes.to_vec())
}

#[test]
fn a_guest_rewriting_its_frame_after_classification_cannot_change_the_headers_delivered() {
    let frame = tcp4_frame(1400);
    assert!(frame.len() > SNAPSHOT_LEN, "part of the frame stays lent");
    let (mut rig, mut switch, a, got) = racing_switch(
        |at| {
            vec![
                // To port 22, which a rule drops, from another station, with a new payload
                // byte near the end.
                write_at(at, TCP4_DST_PORT, &22u16.to_be_bytes()),
                write_at(at, 6, &[2, 0, 0, 0, 0, 0x66]),
                write_at(at, 1000, &[0xaa]),
            ]
        },
        &frame,
    );
    assert_eq!(switch.poll(a, Timestamp(1)), 1);
    let got = got.lock().unwrap();
    assert_eq!(got.len(), 1, "classified as port 80, so delivered");
    let out = &got[0];
    assert_eq!(out.len(), frame.len());
    assert_eq!(
        out[..SNAPSHOT_LEN],
        frame[..SNAPSHOT_LEN],
        "addresses and ports as classified"
    );
    assert_eq!(
        out[1000], 0xaa,
        "the payload moves from the guest's memory (one copy)"
    );
    // The source learned is the one the switch saw, not the one written afterwards.
    let now = Timestamp(2);
    assert_eq!(
        switch.fdb().lookup(0, MacAddr([2, 0, 0, 0, 0, 1]), now),
        Some(a)
    );
    assert_eq!(
        switch.fdb().lookup(0, MacAddr([2, 0, 0, 0, 0, 0x66]), now),
        None
    );
    assert_eq!(rig.stats_from_guest().lent, 1);
    drop(got);
    assert_eq!(rig.txq.take_used().len(), 1);
}

#[test]
fn a_short_frame_is_copied_whole_before_the_switch_reads_it() {
    let frame = ether_frame(1, 2, 64, 9);
    let (_rig, mut switch, a, got) = racing_switch(|at| vec![write_at(at, 0, &[0xee; 64])], &frame);
    assert_eq!(switch.poll(a, Timestamp(1)), 1);
    assert_eq!(*got.lock().unwrap(), vec![frame]);
}

/// An IPv6/TCP frame whose extension headers (a 128-byte Hop-by-Hop header) put the TCP
/// header past the snapshot.
fn deep_ipv6_frame(dst_port: u16) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x86, 0xdd]);
    let payload_len: u16 = 128 + 20 + 500;
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&payload_len.to_be_bytes());
    f.extend_from_slice(&[0, 64]); // Hop-by-Hop next, hop limit
    f.extend_from_slice(&[0xfd; 32]); // source and destination addresses
                                      // Hop-by-Hop: next header TCP, (15 + 1) × 8 = 128 bytes, one PadN option filling it.
    f.extend_from_slice(&[6, 15, 1, 124]);
    f.extend_from_slice(&[0; 124]);
    f.extend_from_slice(&40000u16.to_be_bytes());
    f.extend_from_slice(&dst_port.to_be_bytes());
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(&[0x50, 0x10, 0, 0, 0, 0, 0, 0]);
    f.extend((0..500u16).map(|i| u8::try_from(i % 251).unwrap()));
    f
}

#[test]
fn a_frame_whose_headers_reach_past_the_snapshot_is_copied_whole_and_keeps_its_verdict() {
    let frame = deep_ipv6_frame(80);
    let port_at = 14 + 40 + 128 + 2;
    assert!(port_at > SNAPSHOT_LEN);
    let (rig, mut switch, a, got) = racing_switch(
        |at| vec![write_at(at, port_at, &22u16.to_be_bytes())],
        &frame,
    );
    assert_eq!(switch.poll(a, Timestamp(1)), 1);
    assert_eq!(
        *got.lock().unwrap(),
        vec![frame],
        "delivered as classified: port 80"
    );
    let s = rig.stats_from_guest();
    assert_eq!((s.lent, s.bounced), (0, 1));

    // The same frame sent to port 22 is dropped by the rule: its port was read.
    let (_rig, mut switch, a, got) = racing_switch(|_| Vec::new(), &deep_ipv6_frame(22));
    assert_eq!(switch.poll(a, Timestamp(1)), 1);
    assert!(got.lock().unwrap().is_empty());
}
