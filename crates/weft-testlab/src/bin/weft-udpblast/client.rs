//! The same generator and sink as weft-client endpoints: a process owning a weft
//! `vhost-user` port (what a VM's virtio-net port is to weft), sending 64-byte
//! Ethernet/IPv4/UDP frames in `send_batch` bursts, or counting what arrives.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use weft_client::{ClientConfig, RecvBatch, TxFrame, WaitMode, WeftClient};
use weft_packet::checksum;

use crate::{rate, ReceiveWindow};

/// The sender's and the receiver's MAC addresses and IPv4 addresses.
const SENDER: ([u8; 6], [u8; 4]) = ([0x02, 0xb1, 0, 0, 0, 1], [10, 94, 0, 1]);
const RECEIVER: ([u8; 6], [u8; 4]) = ([0x02, 0xb1, 0, 0, 0, 2], [10, 94, 0, 2]);
const UDP_PORT: u16 = 9500;

/// An Ethernet/IPv4/UDP frame carrying `payload` bytes, IPv4 header checksum filled in, UDP
/// checksum zero (none, allowed over IPv4).
fn udp_frame(from: ([u8; 6], [u8; 4]), to: ([u8; 6], [u8; 4]), payload: usize) -> Result<Vec<u8>> {
    let udp_len = u16::try_from(8 + payload)?;
    let ip_len = 20 + udp_len;
    let mut f = Vec::with_capacity(14 + usize::from(ip_len));
    f.extend_from_slice(&to.0);
    f.extend_from_slice(&from.0);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let ip_start = f.len();
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&ip_len.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&from.1);
    f.extend_from_slice(&to.1);
    let csum = checksum::checksum(&f[ip_start..]);
    f[ip_start + 10..ip_start + 12].copy_from_slice(&csum.to_be_bytes());
    f.extend_from_slice(&UDP_PORT.to_be_bytes());
    f.extend_from_slice(&UDP_PORT.to_be_bytes());
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.resize(14 + usize::from(ip_len), 0x5a);
    Ok(f)
}

fn connect(socket: &Path) -> Result<WeftClient> {
    WeftClient::connect(socket, ClientConfig::default())
        .with_context(|| format!("weft-client on {}", socket.display()))
}

/// Sends 64-byte frames to the receiver's MAC for `seconds`, `burst` per `send_batch`,
/// sleeping on the backend's notification when the ring is full (the switch may share the
/// CPU).
pub(crate) fn send(socket: &Path, size: usize, seconds: f64, burst: usize) -> Result<()> {
    let mut client = connect(socket)?;
    let frame = udp_frame(SENDER, RECEIVER, size)?;
    let frames = vec![TxFrame::plain(&frame); burst];
    let (mut packets, mut full) = (0u64, 0u64);
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(seconds);
    while Instant::now() < deadline {
        let n = client.send_batch(&frames)?;
        packets += u64::try_from(n)?;
        if n < burst {
            full += 1;
            client.wait_tx_space(Duration::from_millis(10), WaitMode::Block)?;
        }
    }
    let span = start.elapsed();
    println!(
        "{{\"role\":\"client-send\",\"packets\":{packets},\"seconds\":{:.3},\"pps\":{:.0},\"ring_full\":{full},\"frame\":{},\"burst\":{burst}}}",
        span.as_secs_f64(),
        rate(packets, span),
        frame.len()
    );
    Ok(())
}

/// Announces the receiver's MAC (one broadcast, so the switches learn where it is), then
/// counts frames for up to `seconds`, stopping `idle` after the last.
pub(crate) fn recv(socket: &Path, seconds: f64, idle: Duration) -> Result<()> {
    let mut client = connect(socket)?;
    let announce = udp_frame(RECEIVER, ([0xff; 6], [255; 4]), 18)?;
    client.send_batch(&[TxFrame::plain(&announce)])?;
    let mut batch = RecvBatch::new();
    let mut window = ReceiveWindow::new(seconds, idle);
    while !window.over() {
        let n = client.recv_wait(&mut batch, 256, Duration::from_millis(100), WaitMode::Block)?;
        if n > 0 {
            let bytes = batch
                .iter()
                .map(|f| u64::try_from(f.bytes.len()).unwrap_or(0))
                .sum::<u64>();
            window.got(u64::try_from(n)?, bytes);
        }
    }
    println!(
        "{{\"role\":\"client-recv\",{},\"faults\":{}}}",
        window.json_fields(),
        client.stats().rx.total_faults()
    );
    Ok(())
}
