//! Two weft memif ports, a server and a client, connected to each other in one process,
//! and frames moved through their halves.

use std::time::{Duration, Instant};

use weft_memif::{MemifConfig, MemifPort, MemifPortRx, MemifPortTx, Role};
use weft_packet::OffloadInfo;
use weft_switch::{PortRx, PortTx, RxBatch, TxFrame};

pub fn pair(tag: &str, config: MemifConfig) -> (super::Dir, MemifPort, MemifPort) {
    let dir = super::Dir::new(tag);
    let sd = dir.socket_dir();
    let server = MemifPort::open(
        std::sync::Arc::clone(&sd),
        "m.sock".as_ref(),
        MemifConfig {
            role: Role::Server,
            ..config.clone()
        },
    )
    .unwrap();
    let client = MemifPort::open(
        sd,
        "m.sock".as_ref(),
        MemifConfig {
            role: Role::Client,
            ..config
        },
    )
    .unwrap();
    (dir, server, client)
}

pub fn frame(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_add((i % 256) as u8))
        .collect()
}

/// Receives until `n` frames arrived or 5 s passed.
pub fn receive_n(rx: &mut MemifPortRx, n: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let mut batch = RxBatch::new(64);
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.len() < n && Instant::now() < deadline {
        batch.clear();
        rx.receive(&mut batch);
        for d in batch.descs() {
            got.push(rx.frame(d.handle).to_vec());
        }
        rx.finish();
        if batch.is_empty() {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    got
}

pub fn send_all(tx: &mut MemifPortTx, frames: &[Vec<u8>]) -> usize {
    let txf: Vec<TxFrame<'_>> = frames
        .iter()
        .map(|f| TxFrame::whole(f, OffloadInfo::default()))
        .collect();
    tx.transmit(&txf)
}

/// Waits for both ports to connect and takes their halves (server's, then client's);
/// the client offers its receive buffers on its first look, taken here.
pub fn connected_halves(
    server: &mut MemifPort,
    client: &mut MemifPort,
) -> [(MemifPortRx, MemifPortTx); 2] {
    assert!(server.wait_connected(Duration::from_secs(5)), "{server:?}");
    assert!(client.wait_connected(Duration::from_secs(5)), "{client:?}");
    let s = server.take_halves().unwrap();
    let (mut crx, ctx) = client.take_halves().unwrap();
    let mut b = RxBatch::new(8);
    crx.receive(&mut b);
    crx.finish();
    [s, (crx, ctx)]
}
