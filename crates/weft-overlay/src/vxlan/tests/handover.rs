//! Handing a live port over (as to another weftd, in one process: the descriptors are
//! duplicates, so the old port may be dropped once the new one holds its own).

use std::net::IpAddr;
use std::time::Duration;

use weft_packet::{MacAddr, OffloadInfo};
use weft_switch::{PortRx, PortTx, RxBatch, TxFrame};

use super::sockets::{can_run, config, frame, lo, port, receive_all};
use crate::vxlan::remote_fdb::EntrySource;
use crate::{VxlanConfig, VxlanHandover, VxlanPort};

const STATION: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);

/// A frame from the station behind B, numbered by its UDP source port.
fn from_station(n: u16) -> Vec<u8> {
    frame([2, 0, 0, 0, 0, 0xa], n)
}

fn send(tx: &mut impl PortTx, frames: &[Vec<u8>]) {
    let tx_frames: Vec<TxFrame<'_>> = frames
        .iter()
        .map(|f| TxFrame::whole(f, OffloadInfo::default()))
        .collect();
    assert_eq!(tx.transmit(&tx_frames), frames.len());
}

/// The description as weftd carries it: through JSON.
fn through_json(h: &VxlanHandover) -> VxlanHandover {
    serde_json::from_str(&serde_json::to_string(h).unwrap()).unwrap()
}

fn learning(c: VxlanConfig) -> VxlanConfig {
    VxlanConfig {
        learning: true,
        ..c
    }
}

#[test]
fn a_handed_over_port_keeps_its_address_its_learned_remotes_with_their_age_and_every_datagram() {
    if !can_run("a_handed_over_port_keeps_its_address_its_learned_remotes_with_their_age_and_every_datagram") {
        return;
    }
    let (pa, pb) = (port(54), port(55));
    let ca = learning(config(lo(1), pa, pb));
    let a = VxlanPort::open(&ca).unwrap();
    let source = a.handover_source();
    let (mut arx, atx, _) = a.split();
    let (mut brx, mut btx, _) = VxlanPort::open(&config(lo(2), pb, pa).remote(lo(1)))
        .unwrap()
        .split();

    // A learns the station behind B from its first frame.
    send(&mut btx, &[from_station(1)]);
    assert_eq!(receive_all(&mut arx, 1), [from_station(1)]);
    std::thread::sleep(Duration::from_millis(120));

    let (h, fds) = source.handover().unwrap();
    assert_eq!(
        fds.len(),
        1 + usize::from(h.raw_fd.is_some()) + h.bound.len()
    );
    assert_eq!(h.local.port(), pa);
    assert_eq!(h.learned.len(), 1);
    assert!(h.learned[0].age_ms >= 100, "{:?}", h.learned);
    let bound_ports: Vec<u16> = h.bound.iter().map(|b| b.port).collect();

    // Paused between the hand-over and the adoption: this one waits in the socket.
    send(&mut btx, &[from_station(2)]);
    drop((arx, atx));

    let adopted = VxlanPort::adopt(&ca, through_json(&h), fds).unwrap();
    assert_eq!(adopted.local_addr().map(|a| a.port()), Some(pa));
    let fdb = adopted.remote_fdb();
    let (_, entry, age) = fdb
        .entries()
        .into_iter()
        .find(|(mac, _, _)| *mac == MacAddr([2, 0, 0, 0, 0, 1]))
        .expect("the learned entry survives");
    assert_eq!(
        (entry.endpoint, entry.source),
        (lo(2), EntrySource::Learned)
    );
    assert!(
        age.unwrap() >= Duration::from_millis(100),
        "its age goes on: {age:?}"
    );
    let (mut arx, mut atx, _) = adopted.split();
    let kept: Vec<u16> = atx.gso.iter().map(|g| g.1).collect();
    assert_eq!(kept, bound_ports, "the same source ports");

    // Nothing lost: the datagram sent while paused, then the next.
    send(&mut btx, &[from_station(3)]);
    assert_eq!(receive_all(&mut arx, 2), [from_station(2), from_station(3)]);

    // The adopted port sends to the learned remote.
    let to_station = frame(STATION.octets(), 77);
    send(&mut atx, std::slice::from_ref(&to_station));
    assert_eq!(receive_all(&mut brx, 1), [to_station]);
}

#[test]
fn datagrams_a_batch_left_undrained_cross_the_hand_over_in_order() {
    if !can_run("datagrams_a_batch_left_undrained_cross_the_hand_over_in_order") {
        return;
    }
    let (pa, pb) = (port(56), port(57));
    let to_b = MacAddr([2, 0, 0, 0, 0, 0xb]);
    let (_arx, mut atx, _) = VxlanPort::open(&config(lo(1), pa, pb).static_mac(to_b, lo(2)))
        .unwrap()
        .split();
    let cb = config(lo(2), pb, pa).remote(lo(1));
    let b = VxlanPort::open(&cb).unwrap();
    assert!(b.socket_paths().udp_gro, "the test needs UDP GRO");
    let source = b.handover_source();
    let (mut brx, btx, _) = b.split();

    // Equal frames leave in segmented sends and arrive coalesced; a batch of 8 leaves the
    // rest of the buffer parked.
    let frames: Vec<Vec<u8>> = (0..60).map(|i| frame(to_b.octets(), 1000 + i)).collect();
    send(&mut atx, &frames);
    let mut first = Vec::new();
    for _ in 0..200 {
        let mut batch = RxBatch::new(8);
        brx.receive(&mut batch);
        first.extend(batch.descs().iter().map(|d| brx.frame(d.handle).to_vec()));
        brx.finish();
        if !first.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(first.len(), 8);

    let (h, fds) = source.handover().unwrap();
    assert!(
        !h.pending.is_empty(),
        "datagrams were waiting in user space"
    );
    drop((brx, btx));
    let (mut brx, _btx, _) = VxlanPort::adopt(&cb, through_json(&h), fds)
        .unwrap()
        .split();
    let rest = receive_all(&mut brx, frames.len() - first.len());
    first.extend(rest);
    assert_eq!(first, frames, "each frame once, in order");
}

#[test]
fn an_abandoned_hand_over_leaves_the_port_working() {
    if !can_run("an_abandoned_hand_over_leaves_the_port_working") {
        return;
    }
    let (pa, pb) = (port(58), port(59));
    let ca = config(lo(1), pa, pb).remote(lo(2));
    let a = VxlanPort::open(&ca).unwrap();
    let source = a.handover_source();
    let (mut arx, mut atx, _) = a.split();
    let (mut brx, mut btx, _) = VxlanPort::open(&config(lo(2), pb, pa).remote(lo(1)))
        .unwrap()
        .split();
    let (h, fds) = source.handover().unwrap();
    drop((h, fds));
    send(&mut btx, &[from_station(1)]);
    assert_eq!(receive_all(&mut arx, 1), [from_station(1)]);
    let back = frame([0xff; 6], 9);
    send(&mut atx, std::slice::from_ref(&back));
    assert_eq!(receive_all(&mut brx, 1), [back]);
    drop((arx, atx));
    assert!(
        matches!(
            source.handover(),
            Err(crate::OverlayError::Handover(
                crate::HandoverError::PortClosed
            ))
        ),
        "a closed port has nothing to hand over"
    );
}

#[test]
fn the_directorys_entries_and_vteps_cross_the_hand_over() {
    if !can_run("the_directorys_entries_and_vteps_cross_the_hand_over") {
        return;
    }
    let ca = config(lo(1), port(60), port(61)).remote(lo(2));
    let a = VxlanPort::open(&ca).unwrap();
    let source = a.handover_source();
    let fdb = a.remote_fdb();
    let vtep: IpAddr = lo(3);
    fdb.set_directory_remotes(&[vtep]).unwrap();
    fdb.replace_directory(&[(STATION, vtep)]);
    let (h, fds) = source.handover().unwrap();
    drop(a);
    let adopted = VxlanPort::adopt(&ca, through_json(&h), fds).unwrap();
    let fdb = adopted.remote_fdb();
    assert_eq!(fdb.flood_remotes(), [lo(2), vtep]);
    let entry = fdb.lookup(STATION).unwrap();
    assert_eq!(
        (entry.endpoint, entry.source),
        (vtep, EntrySource::Directory)
    );
}
