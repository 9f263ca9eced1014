//! Raw frames written onto an interface (inside a namespace) through an AF_PACKET socket: the
//! traffic source of the overlay leak test, sending whatever bytes it is given, as fast as
//! the socket takes them.

use std::path::Path;
use std::time::{Duration, Instant};

use weft_packet::OffloadInfo;
use weft_switch::{PortTx, TxFrame};
use weft_tap::{AfPacket, AfPacketOptions, Offloads};

/// Frames per `transmit` call.
const BURST: usize = 64;

/// Sends each of `frames` `copies` times (round-robin over the list) on `interface` in the
/// namespace at `netns`; returns how many the socket accepted. Retries a full socket for up
/// to a second per burst, so nearly every frame is handed to the kernel.
pub fn send_frames(netns: &Path, interface: &str, frames: &[Vec<u8>], copies: usize) -> u64 {
    let options = AfPacketOptions::new(interface)
        .netns(netns)
        .offloads(Offloads::NONE);
    let port = AfPacket::open(&options)
        .unwrap_or_else(|e| panic!("AF_PACKET on {interface} in {}: {e}", netns.display()));
    let (_rx, mut tx, _stats) = port.split();
    let total = frames.len() * copies;
    let mut sent = 0u64;
    let mut next = 0usize;
    let mut burst: Vec<TxFrame<'_>> = Vec::with_capacity(BURST);
    while next < total {
        burst.clear();
        for i in next..(next + BURST).min(total) {
            burst.push(TxFrame::whole(
                &frames[i % frames.len()],
                OffloadInfo::default(),
            ));
        }
        let mut done = 0;
        let deadline = Instant::now() + Duration::from_secs(1);
        while done < burst.len() && Instant::now() < deadline {
            let n = tx.transmit(&burst[done..]);
            done += n;
            if n == 0 {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        sent += u64::try_from(done).unwrap_or(u64::MAX);
        next += burst.len();
    }
    sent
}
