//! The same generator and sink as weft-client endpoints: a process owning a weft
//! `vhost-user` port (what a VM's virtio-net port is to weft), sending 64-byte
//! Ethernet/IPv4/UDP frames in `send_batch` bursts, or counting what arrives; connecting to
//! the port's socket, or serving it for a port in client mode.

use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use weft_client::{ClientConfig, RecvBatch, TxFrame, WaitMode, WeftClient};
use weft_packet::{checksum, MacAddr};

use crate::pace::{put_sequence, sequence};
use crate::{ReceiveWindow, RecvPlan, SendPlan, SendTally};

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

/// How often a receiver announces its MAC again (well inside any switch's ageing time).
const ANNOUNCE_EVERY: Duration = Duration::from_secs(10);

/// Where a frame's UDP payload (and so its sequence number) starts.
const PAYLOAD_AT: usize = 14 + 20 + 8;

/// A weft-client endpoint: the port's socket, whether it serves it (`listen`: the frontend
/// of a port in client mode), its own MAC (`None`: its role's) and ring size.
pub(crate) struct Endpoint<'a> {
    pub(crate) socket: &'a Path,
    pub(crate) listen: bool,
    pub(crate) mac: Option<MacAddr>,
    pub(crate) queue_size: u16,
}

/// Connects to the port's socket, or with `listen` serves it: binds it (replacing a stale
/// socket left by an earlier run) and takes one connection.
fn connect(end: &Endpoint<'_>) -> Result<WeftClient> {
    let socket = end.socket;
    let config = ClientConfig {
        queue_size: end.queue_size,
        ..ClientConfig::default()
    };
    if !end.listen {
        return WeftClient::connect(socket, config)
            .with_context(|| format!("weft-client on {}", socket.display()));
    }
    if std::fs::symlink_metadata(socket).is_ok_and(|m| m.file_type().is_socket()) {
        std::fs::remove_file(socket)
            .with_context(|| format!("removing stale {}", socket.display()))?;
    }
    let listener =
        UnixListener::bind(socket).with_context(|| format!("listening on {}", socket.display()))?;
    let (stream, _) = listener
        .accept()
        .context("accepting the port's connection")?;
    WeftClient::from_stream(stream, config)
        .with_context(|| format!("weft-client served on {}", socket.display()))
}

/// Sends frames to the receiver's MAC, `burst` per `send_batch`, as the plan says, each with
/// its sequence number; sleeps on the backend's notification when the ring is full (the
/// switch may share the CPU).
pub(crate) fn send(end: &Endpoint<'_>, plan: &SendPlan) -> Result<()> {
    let mut client = connect(end)?;
    let template = udp_frame(SENDER, RECEIVER, plan.size)?;
    let mut frames = vec![template.clone(); plan.burst];
    let mut full = 0u64;
    let mut tally = SendTally::new("client-send", plan);
    let deadline = tally.start + Duration::from_secs_f64(plan.seconds);
    while Instant::now() < deadline {
        let n = tally.allowance(plan.burst, &format!(",\"ring_full\":{full}"));
        if n == 0 {
            continue;
        }
        for (seq, frame) in (tally.packets..).zip(frames.iter_mut().take(n)) {
            put_sequence(&mut frame[PAYLOAD_AT..], seq);
        }
        let batch: Vec<TxFrame<'_>> = frames[..n].iter().map(|f| TxFrame::plain(f)).collect();
        let sent = client.send_batch(&batch)?;
        tally.packets += u64::try_from(sent)?;
        if sent < n {
            full += 1;
            client.wait_tx_space(Duration::from_millis(10), WaitMode::Block)?;
        }
    }
    println!(
        "{{\"role\":\"client-send\",{},\"ring_full\":{full},\"frame\":{},\"burst\":{}}}",
        tally.json_fields(),
        template.len(),
        plan.burst
    );
    Ok(())
}

/// Announces the receiver's MAC (a broadcast, so the switches learn where it is; again every
/// 10 s), then counts frames as the plan says, checking their sequence numbers.
///
/// Only frames addressed to the receiver's MAC (`mac`, else client-send's destination) are
/// counted: broadcasts, floods and other stations' frames are `others`.
pub(crate) fn recv(end: &Endpoint<'_>, plan: &RecvPlan) -> Result<()> {
    let mut client = connect(end)?;
    let me = (end.mac.map_or(RECEIVER.0, |m| m.0), RECEIVER.1);
    let announce = udp_frame(me, ([0xff; 6], [255; 4]), 18)?;
    client.send_batch(&[TxFrame::plain(&announce)])?;
    let mut batch = RecvBatch::new();
    let mut window = ReceiveWindow::new("client-recv", plan);
    let mut announced = Instant::now();
    let mut others = 0u64;
    while !window.over() {
        // Again now and then, as a VM's own traffic would: the switches' entries for it
        // stay learned however long the run.
        if announced.elapsed() >= ANNOUNCE_EVERY {
            client.send_batch(&[TxFrame::plain(&announce)])?;
            announced = Instant::now();
        }
        let n = client.recv_wait(&mut batch, 256, Duration::from_millis(100), WaitMode::Block)?;
        for frame in batch.iter().take(n) {
            if frame.bytes.get(..6) == Some(&me.0[..]) {
                window.got(
                    frame.bytes.len(),
                    frame.bytes.get(PAYLOAD_AT..).and_then(sequence),
                );
            } else {
                others += 1;
            }
        }
    }
    println!(
        "{{\"role\":\"client-recv\",{},\"others\":{others},\"faults\":{}}}",
        window.json_fields(),
        client.stats().rx.total_faults()
    );
    Ok(())
}
