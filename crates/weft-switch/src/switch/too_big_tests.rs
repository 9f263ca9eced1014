//! The `PortTx::too_big` hook: which frames a destination is told about, and that the drop is
//! counted whatever the port does.

use std::sync::{Arc, Mutex};

use weft_packet::MacAddr;

use super::*;
use crate::counters::DropReason;
use crate::memory_port::{memory_port, MemoryPortHandle, MemoryTx};
use crate::port::{PortCaps, PortTx, TxFrame};

const T0: Timestamp = Timestamp(1_000_000_000);

fn mac(last: u8) -> MacAddr {
    MacAddr([0x02, 0, 0, 0, 0, last])
}

/// A frame of `len` bytes (EtherType 0x88b5), its bytes numbered so copies can be compared.
fn frame(dst: MacAddr, src: MacAddr, len: usize) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len.max(14))
        .map(|i| u8::try_from(i % 251).unwrap())
        .collect();
    f[..6].copy_from_slice(&dst.0);
    f[6..12].copy_from_slice(&src.0);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f
}

/// The frames a port was told were too big, with the MTU it was told.
type Refused = Arc<Mutex<Vec<(Vec<u8>, usize)>>>;

/// A memory port's transmit half that records what the hook gets.
struct RecordingTx {
    inner: MemoryTx,
    refused: Refused,
}

impl PortTx for RecordingTx {
    fn caps(&self) -> PortCaps {
        self.inner.caps()
    }
    fn transmit(&mut self, frames: &[TxFrame<'_>]) -> usize {
        self.inner.transmit(frames)
    }
    fn too_big(&mut self, frame: &TxFrame<'_>, mtu: usize) {
        let mut bytes = vec![0; frame.len()];
        assert_eq!(frame.copy_to(&mut bytes), Some(frame.len()));
        self.refused.lock().unwrap().push((bytes, mtu));
    }
}

struct Port {
    id: PortId,
    handle: MemoryPortHandle,
    refused: Refused,
}

fn add(sw: &mut Switch, name: &str, mtu: usize) -> Port {
    let (rx, inner, handle) = memory_port(PortCaps::plain(mtu), 1024);
    let refused = Refused::default();
    let tx = RecordingTx {
        inner,
        refused: Arc::clone(&refused),
    };
    let id = sw
        .add_port(
            name,
            Some(Box::new(rx)),
            Box::new(tx),
            PortOptions::default(),
        )
        .unwrap();
    Port {
        id,
        handle,
        refused,
    }
}

/// A memory port of MTU 1500 without the hook.
fn add_plain(sw: &mut Switch, name: &str, options: PortOptions) -> (PortId, MemoryPortHandle) {
    let (rx, tx, handle) = memory_port(PortCaps::plain(1500), 16);
    let id = sw
        .add_port(name, Some(Box::new(rx)), Box::new(tx), options)
        .unwrap();
    (id, handle)
}

fn too_big_drops(sw: &Switch, port: &Port) -> u64 {
    sw.port_counters(port.id)
        .unwrap()
        .snapshot()
        .drops(DropReason::FrameTooBig)
}

#[test]
fn the_hook_gets_each_oversize_frame_once_with_the_port_mtu_and_the_rest_is_sent() {
    let mut sw = Switch::new("br0", SwitchConfig::default()).unwrap();
    let a = add(&mut sw, "a", 9000);
    let b = add(&mut sw, "b", 1400);
    // b's MAC is learned, so what follows is unicast to b.
    assert!(b.handle.inject(&frame(MacAddr::BROADCAST, mac(2), 60)));
    sw.poll(b.id, T0);
    a.handle.take_sent();
    // One batch: frames of 1414 B carry 1400 B of L3 packet (fit), 1415 B do not.
    let lens = [1415, 100, 2000, 1414, 9000];
    for len in lens {
        assert!(a.handle.inject(&frame(mac(2), mac(1), len)));
    }
    sw.poll(a.id, T0);
    let sent: Vec<usize> = b.handle.take_sent().iter().map(|(f, _)| f.len()).collect();
    assert_eq!(sent, [100, 1414], "the frames that fit leave, in order");
    let refused = b.refused.lock().unwrap().clone();
    let want: Vec<(Vec<u8>, usize)> = [1415, 2000, 9000]
        .into_iter()
        .map(|len| (frame(mac(2), mac(1), len), 1400))
        .collect();
    assert_eq!(
        refused, want,
        "each oversize frame once, whole, with b's MTU"
    );
    assert_eq!(too_big_drops(&sw, &b), 3);
    assert!(a.refused.lock().unwrap().is_empty());
}

#[test]
fn a_flood_too_big_for_one_port_reaches_the_others_and_only_that_port_is_told() {
    let mut sw = Switch::new("br0", SwitchConfig::default()).unwrap();
    let src = add(&mut sw, "src", 9000);
    let small = add(&mut sw, "small", 1000);
    let large = add(&mut sw, "large", 1500);
    let f = frame(MacAddr::BROADCAST, mac(1), 1200);
    assert!(src.handle.inject(&f));
    sw.poll(src.id, T0);
    assert_eq!(large.handle.take_sent(), [(f.clone(), Default::default())]);
    assert!(small.handle.take_sent().is_empty());
    assert_eq!(*small.refused.lock().unwrap(), [(f, 1000)]);
    assert!(large.refused.lock().unwrap().is_empty());
    assert!(src.refused.lock().unwrap().is_empty());
    assert_eq!(
        (too_big_drops(&sw, &small), too_big_drops(&sw, &large)),
        (1, 0)
    );
}

#[test]
fn the_hook_sees_the_frame_as_it_would_have_left_with_its_vlan_tag() {
    let mut sw = Switch::new("br0", SwitchConfig::default()).unwrap();
    let access_options = PortOptions {
        vlan: crate::vlan::PortVlanMode::access(10).unwrap(),
        ..PortOptions::default()
    };
    let (access, h) = add_plain(&mut sw, "access", access_options);
    let trunk = add(&mut sw, "trunk", 1000);
    let trunk_options = PortOptions {
        vlan: crate::vlan::PortVlanMode::trunk([10], None).unwrap(),
        ..PortOptions::default()
    };
    sw.set_port_options(trunk.id, trunk_options).unwrap();
    let f = frame(MacAddr::BROADCAST, mac(1), 1100);
    assert!(h.inject(&f));
    sw.poll(access, T0);
    let refused = trunk.refused.lock().unwrap().clone();
    assert_eq!(refused.len(), 1);
    let (bytes, mtu) = &refused[0];
    assert_eq!((bytes.len(), *mtu), (f.len() + 4, 1000));
    assert_eq!(
        &bytes[12..16],
        &[0x81, 0x00, 0x00, 10],
        "tagged for the trunk"
    );
    assert_eq!(&bytes[16..], &f[12..]);
}

#[test]
fn a_port_without_the_hook_counts_the_drop_and_sends_nothing() {
    let mut sw = Switch::new("br0", SwitchConfig::default()).unwrap();
    let src = add(&mut sw, "src", 9000);
    let (plain_id, plain) = add_plain(&mut sw, "plain", PortOptions::default());
    assert!(src.handle.inject(&frame(MacAddr::BROADCAST, mac(1), 1600)));
    sw.poll(src.id, T0);
    assert!(plain.take_sent().is_empty());
    let c = sw.port_counters(plain_id).unwrap().snapshot();
    assert_eq!((c.drops(DropReason::FrameTooBig), c.tx_packets), (1, 0));
}
