//! End to end: two weft-client endpoints, in two processes, on two weft vhost-user ports of
//! one weft switch, the switch run by a weft worker thread as weftd runs it. One endpoint (a
//! child process: this test binary run again with [`SENDER_SOCKET`] set) sends a million
//! frames of mixed sizes, 60 B to 64 KB (frames above the MTU as TCP/IPv4 TSO super-frames
//! with valid headers, which the switch hands whole to the TSO-capable receiver); the other
//! checks every frame's length, content, offload state and order.
//!
//! "The receiver keeps up": the sender keeps no more frames (and receive buffers' worth of
//! bytes) in flight than the receiver's ring holds, learning what arrived from the
//! receiver through its standard input (one count per line). Within that window nothing may be lost: the switch
//! and both ports must count no drop, the clients no fault.

mod common;

use std::io::{BufRead, Write};
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use weft_client::{ClientConfig, GsoKind, OffloadInfo, RecvBatch, TxFrame, WaitMode, WeftClient};
use weft_packet::checksum;
use weft_runtime::WorkerConfig;
use weft_vhost::VhostPortConfig;

const FRAMES: u64 = 1_000_000;
/// Set in the sender's process: the vhost-user socket it connects to.
const SENDER_SOCKET: &str = "WEFT_CLIENT_E2E_SENDER_SOCKET";
const TEST_NAME: &str = "a_million_mixed_frames_pass_between_two_clients_whole_and_in_order";
const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];
/// Largest super-frame: a 65535-byte IPv4 packet behind an Ethernet header.
const MAX_TSO_FRAME: usize = 14 + 65_535;
const MSS: u16 = 1448;
/// The receiver's ring and buffers.
const RX_QUEUE: u16 = 1024;
const RX_BUFFER: usize = 4096;

fn mix(seq: u64) -> u64 {
    let mut x = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    x.wrapping_mul(0xBF58_476D_1CE4_E5B9) ^ (x >> 32)
}

/// Frame `seq`'s length: one in 16 is a super-frame (1515 B..64 KB), the rest 60..=1514 B.
fn frame_len(seq: u64) -> usize {
    let h = usize::try_from(mix(seq) >> 16).unwrap();
    if seq % 16 == 7 {
        1515 + h % (MAX_TSO_FRAME - 1515 + 1)
    } else {
        60 + h % (1514 - 60 + 1)
    }
}

fn is_tso(seq: u64) -> bool {
    frame_len(seq) > 1514
}

/// Receive buffers frame `seq` takes (header included).
fn rx_buffers(seq: u64) -> u64 {
    u64::try_from((frame_len(seq) + 12).div_ceil(RX_BUFFER)).unwrap()
}

/// The payload pattern: frame `seq` carries a slice of it from a seq-dependent offset, so
/// building and checking a frame are a copy and a compare.
fn pattern() -> Vec<u8> {
    (0..MAX_TSO_FRAME + 8192)
        .map(|i| u8::try_from(mix(i as u64) & 0xff).unwrap())
        .collect()
}

fn pattern_offset(seq: u64) -> usize {
    usize::try_from(mix(seq) % 8191).unwrap()
}

/// Writes frame `seq` into `buf` (resized); returns its offload state.
fn build(seq: u64, pattern: &[u8], buf: &mut Vec<u8>) -> OffloadInfo {
    let len = frame_len(seq);
    buf.resize(len, 0);
    buf[0..6].copy_from_slice(&MAC_B);
    buf[6..12].copy_from_slice(&MAC_A);
    let (payload_at, offload) = if is_tso(seq) {
        buf[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let ip_len = u16::try_from(len - 14).unwrap();
        let ip = &mut buf[14..34];
        ip.copy_from_slice(&[
            0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ]);
        ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
        ip[4..6].copy_from_slice(&u16::try_from(seq & 0xffff).unwrap().to_be_bytes());
        let csum = checksum::checksum(ip);
        ip[10..12].copy_from_slice(&csum.to_be_bytes());
        let tcp = &mut buf[34..54];
        tcp.copy_from_slice(&[
            0x9c, 0x40, 0x13, 0x88, 0, 0, 0, 1, 0, 0, 0, 1, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0,
        ]);
        // Partial checksum: the pseudo-header sum, as virtio's NEEDS_CSUM expects.
        let pseudo = checksum::pseudo_header_v4(
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            6,
            ip_len - 20,
        );
        tcp[16..18].copy_from_slice(&pseudo.to_be_bytes());
        (
            54,
            OffloadInfo {
                needs_csum: true,
                csum_start: 34,
                csum_offset: 16,
                gso: GsoKind::TcpV4,
                gso_size: MSS,
                hdr_len: 54,
                ..OffloadInfo::default()
            },
        )
    } else {
        buf[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
        (14, OffloadInfo::default())
    };
    let n = len - payload_at;
    let seq_bytes = seq.to_le_bytes();
    let k = n.min(8);
    buf[payload_at..payload_at + k].copy_from_slice(&seq_bytes[..k]);
    let off = pattern_offset(seq);
    buf[payload_at + k..].copy_from_slice(&pattern[off..off + n - k]);
    offload
}

fn sender(mut client: WeftClient, received: Arc<AtomicU64>) -> (WeftClient, Duration) {
    let pattern = pattern();
    const BATCH: usize = 32;
    const WINDOW_FRAMES: u64 = 512;
    let window_buffers = u64::from(RX_QUEUE) - 64;
    let mut bufs: Vec<Vec<u8>> = (0..BATCH)
        .map(|_| Vec::with_capacity(MAX_TSO_FRAME))
        .collect();
    let mut infos = [OffloadInfo::default(); BATCH];
    let mut next = 0u64; // next frame to send
    let mut acked = 0u64;
    let mut in_flight_buffers = 0u64;
    let mut waited = Duration::ZERO;
    while next < FRAMES {
        let r = received.load(Ordering::Acquire);
        while acked < r {
            in_flight_buffers -= rx_buffers(acked);
            acked += 1;
        }
        // Build as many as the receiver's window allows.
        let mut n = 0;
        let mut buffers = in_flight_buffers;
        while n < BATCH
            && next + (n as u64) < FRAMES
            && next + (n as u64) - acked < WINDOW_FRAMES
            && buffers + rx_buffers(next + n as u64) <= window_buffers
        {
            let seq = next + n as u64;
            infos[n] = build(seq, &pattern, &mut bufs[n]);
            buffers += rx_buffers(seq);
            n += 1;
        }
        if n == 0 {
            // The receiver's ring could be full: wait for it (end-to-end flow control).
            let t = Instant::now();
            std::thread::sleep(Duration::from_micros(50));
            waited += t.elapsed();
            continue;
        }
        let frames: Vec<TxFrame<'_>> = (0..n)
            .map(|i| TxFrame::with_offload(&bufs[i], infos[i]))
            .collect();
        let mut done = 0;
        while done < n {
            let sent = client.send_batch(&frames[done..]).unwrap();
            for i in done..done + sent {
                in_flight_buffers += rx_buffers(next + i as u64);
            }
            done += sent;
            if done < n {
                let t = Instant::now();
                assert!(
                    client
                        .wait_tx_space(Duration::from_secs(10), WaitMode::Block)
                        .unwrap(),
                    "the switch took no frame for 10 s: {:?}",
                    client.stats()
                );
                waited += t.elapsed();
            }
        }
        next += n as u64;
    }
    (client, waited)
}

/// The sender's process: connects to the socket it was given, learns what the receiver got
/// from its standard input, sends every frame, and reports its counters on one line.
fn sender_process(socket: &str) {
    let ev = std::env::var("EV").is_err();
    let a = WeftClient::connect(
        socket,
        ClientConfig {
            event_idx: ev,
            ..ClientConfig::default()
        },
    )
    .unwrap();
    let received = Arc::new(AtomicU64::new(0));
    {
        let received = Arc::clone(&received);
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(n) = line.unwrap_or_default().trim().parse::<u64>() else {
                    return;
                };
                received.store(n, Ordering::Release);
            }
        });
    }
    let (a, waited) = sender(a, Arc::clone(&received));
    // Frames handed to the ring are not yet received: closing now would stop the ring under
    // them. Stay until the receiver has them all.
    let deadline = Instant::now() + Duration::from_secs(60);
    while received.load(Ordering::Acquire) < FRAMES && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let s = a.stats();
    println!(
        "SENDER frames={} faults={} waited_ms={}",
        s.tx.frames,
        s.tx.total_faults() + s.rx.total_faults(),
        waited.as_millis()
    );
    a.close().unwrap();
}

#[test]
fn a_million_mixed_frames_pass_between_two_clients_whole_and_in_order() {
    if let Ok(socket) = std::env::var(SENDER_SOCKET) {
        sender_process(&socket);
        return;
    }
    let port_config = VhostPortConfig {
        max_queue_size: RX_QUEUE,
        ..VhostPortConfig::default()
    };
    let rig = common::Rig::new("e2e", 2, port_config, WorkerConfig::default());
    let ev = std::env::var("EV").is_err();
    // The sender: this test again, in its own process.
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([TEST_NAME, "--exact", "--nocapture", "--test-threads=1"])
        .env(SENDER_SOCKET, &rig.sockets[0])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut to_sender = child.stdin.take().unwrap();
    let mut b = WeftClient::connect(
        &rig.sockets[1],
        ClientConfig {
            queue_size: RX_QUEUE,
            rx_buffer_len: RX_BUFFER,
            event_idx: ev,
            ..ClientConfig::default()
        },
    )
    .unwrap();
    rig.wait_running();
    assert!(b.negotiated().mergeable_rx() && b.negotiated().rx_tso());

    let started = Instant::now();
    let pattern = pattern();
    let mut expect = Vec::with_capacity(MAX_TSO_FRAME);
    let mut batch = RecvBatch::with_capacity(256, 4 << 20);
    let mut seq = 0u64;
    let mut tso_frames = 0u64;
    let mut bytes = 0u64;
    let mut last_progress = Instant::now();
    while seq < FRAMES {
        let n = b
            .recv_wait(&mut batch, 256, Duration::from_millis(100), WaitMode::Block)
            .unwrap();
        if n == 0 {
            assert!(
                last_progress.elapsed() < Duration::from_secs(20),
                "stalled after {seq} frames; receiver {:?}; ports {:?} / {:?}",
                b.stats(),
                rig.ports[0].stats(),
                rig.ports[1].stats()
            );
            continue;
        }
        last_progress = Instant::now();
        for f in batch.iter() {
            let want = build(seq, &pattern, &mut expect);
            assert_eq!(
                f.bytes.len(),
                expect.len(),
                "frame {seq}: length (sequence bytes seen: {:?}); receiver {:?}",
                f.bytes.get(54..62).or(f.bytes.get(14..22)),
                b.stats()
            );
            if f.bytes != &expect[..] {
                let got_seq = f.bytes.get(54..62).or(f.bytes.get(14..22));
                panic!("frame {seq}: content differs (sequence bytes seen: {got_seq:?})");
            }
            if want.is_gso() {
                assert_eq!(
                    (f.offload.gso, f.offload.gso_size),
                    (GsoKind::TcpV4, MSS),
                    "frame {seq}"
                );
                assert!(f.offload.needs_csum, "frame {seq}: checksum state lost");
                tso_frames += 1;
            } else {
                assert_eq!(f.offload.gso, GsoKind::None, "frame {seq}");
            }
            bytes += f.bytes.len() as u64;
            seq += 1;
        }
        writeln!(to_sender, "{seq}").unwrap();
    }
    drop(to_sender);
    let out = child.wait_with_output().unwrap();
    let elapsed = started.elapsed();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the sender failed: {report}");
    let sender_line = report
        .lines()
        .find_map(|l| l.find("SENDER ").and_then(|i| l.get(i..)))
        .unwrap_or_else(|| panic!("no report from the sender: {report}"));
    eprintln!(
        "{FRAMES} frames ({tso_frames} TSO super-frames, {:.1} MB) in {elapsed:.2?} ({:.0} frames/s)\n{sender_line}\nreceiver {:?}",
        bytes as f64 / 1e6,
        FRAMES as f64 / elapsed.as_secs_f64(),
        b.stats()
    );
    assert!(
        sender_line.contains(&format!("frames={FRAMES} ")) && sender_line.contains(" faults=0 "),
        "{sender_line}"
    );
    assert!(
        b.recv_batch(&mut batch, 256).unwrap() == 0,
        "no frame beyond the last"
    );
    assert!(tso_frames > FRAMES / 20);
    assert_eq!(b.stats().rx.total_faults(), 0);
    assert_eq!(rig.switch_drops(), 0);
    for p in &rig.ports {
        let s = p.stats();
        assert_eq!(
            s.from_guest.total_drops() + s.to_guest.total_drops(),
            0,
            "{s:?}"
        );
        assert_eq!(
            s.from_guest.total_faults() + s.to_guest.total_faults(),
            0,
            "{s:?}"
        );
    }
    b.close().unwrap();
}
