//! A veth pair for the AF_XDP tests: one end in this namespace for the port, the other in a
//! fresh namespace with an AF_PACKET socket that sends and receives raw frames there.
#![allow(dead_code, unreachable_pub)]

use std::process::Command;
use std::time::{Duration, Instant};

use weft_packet::OffloadInfo;
use weft_switch::{PortRx, PortTx, RxBatch, TxFrame};
use weft_tap::{AfPacket, AfPacketOptions, AfPacketRx, AfPacketTx, Offloads};
pub use weft_testlab::lab::{self, Netns};

/// IEEE 802 local experimental EtherType: nothing in the kernel answers or forwards it.
pub const TEST_ETHERTYPE: [u8; 2] = [0x88, 0xb5];

/// True when the test can run (root and `ip`); otherwise prints a SKIP line.
pub fn can_run(test: &str) -> bool {
    // SAFETY: geteuid has no arguments and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !root || !lab::installed("ip") {
        println!("SKIP {test}: needs root and the ip command (veth pairs, namespaces, XDP)");
        return false;
    }
    true
}

/// A test frame of `len` bytes: broadcast, the test EtherType, then `seq` and a pattern.
pub fn test_frame(seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].fill(0xff);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0x77, 0x01]);
    f[12..14].copy_from_slice(&TEST_ETHERTYPE);
    f[14..18].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in f.iter_mut().enumerate().skip(18) {
        *b = (i.wrapping_mul(31) as u64 + u64::from(seq)).to_le_bytes()[0];
    }
    f
}

/// The sequence number of a test frame.
pub fn seq_of(frame: &[u8]) -> Option<u32> {
    if frame.get(12..14)? != TEST_ETHERTYPE {
        return None;
    }
    let s = frame.get(14..18)?;
    Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

/// A veth pair: `host` here (for the port), its peer in `ns` with an AF_PACKET socket.
pub struct Veth {
    pub host: String,
    pub ns: Netns,
    pub peer: String,
}

impl Veth {
    /// A fresh pair, both ends up, IPv6 off on both so that only the test's frames cross.
    pub fn new(tag: &str) -> Veth {
        let ns = Netns::new(tag);
        lab::run_ok(
            ns.cmd("sysctl").args([
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ]),
            Duration::from_secs(10),
        );
        let host = lab::unique("x");
        let peer = lab::unique("xp");
        lab::run_ok(
            Command::new("ip").args([
                "link", "add", &host, "type", "veth", "peer", "name", &peer, "netns", &ns.name,
            ]),
            Duration::from_secs(10),
        );
        let veth = Veth { host, ns, peer };
        let _ = lab::run(
            Command::new("sysctl").args([
                "-qw",
                &format!("net.ipv6.conf.{}.disable_ipv6=1", veth.host),
            ]),
            Duration::from_secs(10),
        );
        lab::run_ok(
            Command::new("ip").args(["link", "set", &veth.host, "up"]),
            Duration::from_secs(10),
        );
        veth.ns.ip(&["link", "set", &veth.peer, "up"]);
        veth
    }

    /// `ip -d link show dev HOST`.
    pub fn link_show(&self) -> String {
        lab::run_ok(
            Command::new("ip").args(["-d", "link", "show", "dev", &self.host]),
            Duration::from_secs(10),
        )
    }

    /// An AF_PACKET socket on the peer end, in the namespace.
    pub fn peer_socket(&self) -> (AfPacketRx, AfPacketTx) {
        let port = AfPacket::open(
            &AfPacketOptions::new(&self.peer)
                .netns(self.ns.path())
                .offloads(Offloads::NONE),
        )
        .unwrap_or_else(|e| panic!("AF_PACKET on {}: {e}", self.peer));
        let (rx, tx, _stats) = port.split();
        (rx, tx)
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = lab::run(
            Command::new("ip").args(["link", "del", &self.host]),
            Duration::from_secs(10),
        );
    }
}

/// Sends `frames` through `tx`, retrying while it pushes back, for at most 5 s.
pub fn send_all(tx: &mut dyn PortTx, frames: &[Vec<u8>]) -> usize {
    let burst: Vec<TxFrame<'_>> = frames
        .iter()
        .map(|f| TxFrame::whole(f, OffloadInfo::default()))
        .collect();
    let mut done = 0;
    let deadline = Instant::now() + Duration::from_secs(5);
    while done < burst.len() && Instant::now() < deadline {
        let n = tx.transmit(&burst[done..(done + 64).min(burst.len())]);
        done += n;
        if n == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    done
}

/// Receives test frames through `rx` until `want` came or nothing came for `quiet`;
/// returns them (other frames are skipped).
pub fn receive_test_frames(rx: &mut dyn PortRx, want: usize, quiet: Duration) -> Vec<Vec<u8>> {
    let mut batch = RxBatch::new(64);
    let mut got = Vec::new();
    let mut last = Instant::now();
    while got.len() < want && last.elapsed() < quiet {
        batch.clear();
        rx.receive(&mut batch);
        for d in batch.descs() {
            let f = rx.frame(d.handle).to_vec();
            if seq_of(&f).is_some() {
                got.push(f);
            }
        }
        if !batch.is_empty() {
            last = Instant::now();
        }
        rx.finish();
        if batch.is_empty() {
            std::thread::sleep(Duration::from_micros(500));
        }
    }
    got
}
