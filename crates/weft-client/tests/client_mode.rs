//! A weft-client endpoint serving the socket of a weft port in client mode (the port
//! connects, as to QEMU's `server=on` socket): `WeftClient::from_stream`.

mod common;

use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

use weft_client::{ClientConfig, RecvBatch, TxFrame, WaitMode, WeftClient};
use weft_runtime::WorkerConfig;
use weft_vhost::VhostPortConfig;

const FRAMES: u64 = 10_000;

fn frame(from: u8, to: u8, seq: u64) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, to]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, from]);
    f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    f[14..22].copy_from_slice(&seq.to_be_bytes());
    f
}

#[test]
fn an_endpoint_serving_a_client_mode_ports_socket_exchanges_frames_in_order() {
    // Port 0 listens (the sender connects); port 1 is in client mode (the receiver listens
    // and weft connects to it).
    let rig = common::Rig::with_modes(
        "client-mode",
        &[false, true],
        VhostPortConfig::default(),
        WorkerConfig::default(),
    );
    let listener = UnixListener::bind(&rig.sockets[1]).unwrap();
    let (stream, _) = listener.accept().unwrap();
    let mut receiver = WeftClient::from_stream(stream, ClientConfig::default()).unwrap();
    let mut sender = WeftClient::connect(&rig.sockets[0], ClientConfig::default()).unwrap();
    rig.wait_running();
    // The receiver makes itself known, so the frames to it are learned unicast.
    assert_eq!(
        receiver
            .send_batch(&[TxFrame::plain(&frame(2, 0xff, 0))])
            .unwrap(),
        1
    );

    let mut batch = RecvBatch::new();
    let (mut sent, mut next) = (0u64, 0u64);
    let deadline = Instant::now() + Duration::from_secs(30);
    while next < FRAMES {
        assert!(
            Instant::now() < deadline,
            "only {next} of {FRAMES} frames arrived"
        );
        if sent < FRAMES && sent - next < 128 {
            let burst: Vec<Vec<u8>> = (sent..FRAMES.min(sent + 32))
                .map(|s| frame(1, 2, s))
                .collect();
            let frames: Vec<TxFrame<'_>> = burst.iter().map(|f| TxFrame::plain(f)).collect();
            sent += u64::try_from(sender.send_batch(&frames).unwrap()).unwrap();
        }
        let n = receiver
            .recv_wait(&mut batch, 256, Duration::from_millis(5), WaitMode::Block)
            .unwrap();
        for f in batch.iter().take(n) {
            let seq = u64::from_be_bytes(f.bytes[14..22].try_into().unwrap());
            assert_eq!(seq, next, "frames arrive whole and in order");
            next += 1;
        }
    }
    assert_eq!(rig.switch_drops(), 0);
}
