//! weft-client endpoints for the end-to-end tests: a process owning a weftd `vhost-user`
//! port, sending hand-built Ethernet/IPv4 frames and answering ARP and ICMP echo for its own
//! address (enough for a TAP endpoint's `ping` to succeed against it).

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};

use weft_client::{ClientConfig, RecvBatch, TxFrame, WaitMode, WeftClient};
use weft_packet::checksum;

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_ARP: u16 = 0x0806;
const PROTO_ICMP: u8 = 1;
const PROTO_UDP: u8 = 17;

/// One weft-client endpoint: its port's client, MAC and IPv4 address.
pub(crate) struct ClientEndpoint {
    client: WeftClient,
    batch: RecvBatch,
    pub(crate) mac: [u8; 6],
    pub(crate) ip: Ipv4Addr,
}

impl ClientEndpoint {
    /// Connects to the vhost-user socket at `socket`, retrying while weftd brings it up.
    pub(crate) fn connect(socket: &Path, mac: [u8; 6], ip: Ipv4Addr) -> ClientEndpoint {
        let deadline = Instant::now() + Duration::from_secs(10);
        let client = loop {
            match WeftClient::connect(socket, ClientConfig::default()) {
                Ok(c) => break c,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => panic!("weft-client on {}: {e}", socket.display()),
            }
        };
        ClientEndpoint {
            client,
            batch: RecvBatch::new(),
            mac,
            ip,
        }
    }

    /// Sends `frame`, waiting for ring space if it must.
    pub(crate) fn send(&mut self, frame: &[u8]) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.client.send_batch(&[TxFrame::plain(frame)]).unwrap() == 0 {
            assert!(Instant::now() < deadline, "no transmit space for 5 s");
            self.client
                .wait_tx_space(Duration::from_millis(100), WaitMode::Block)
                .unwrap();
        }
    }

    /// The frames that arrive within `window` (waiting at most that long in all).
    pub(crate) fn receive_for(&mut self, window: Duration) -> Vec<Vec<u8>> {
        let deadline = Instant::now() + window;
        let mut frames = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            self.client
                .recv_wait(&mut self.batch, 64, left, WaitMode::Block)
                .unwrap();
            frames.extend(self.batch.iter().map(|f| f.bytes.to_vec()));
        }
        frames
    }

    /// Waits up to `timeout` for a frame equal to `expected`; true when one came.
    pub(crate) fn receives(&mut self, expected: &[u8], timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            self.client
                .recv_wait(&mut self.batch, 64, left, WaitMode::Block)
                .unwrap();
            if self.batch.iter().any(|f| f.bytes == expected) {
                return true;
            }
        }
        false
    }

    /// Answers, without waiting, every ARP request for this endpoint's address and every
    /// ICMP echo request to it that has arrived. Returns how many answers went out.
    pub(crate) fn answer_pending(&mut self) -> usize {
        self.client.recv_batch(&mut self.batch, 64).unwrap();
        let answers: Vec<Vec<u8>> = self
            .batch
            .iter()
            .filter_map(|f| answer(f.bytes, self.mac, self.ip))
            .collect();
        for a in &answers {
            self.send(a);
        }
        answers.len()
    }
}

fn ethernet(dst: [u8; 6], src: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + payload.len());
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// An IPv4 packet (header checksum filled in) around `upper`.
fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, upper: &[u8]) -> Vec<u8> {
    let total = u16::try_from(20 + upper.len()).unwrap();
    let mut p = vec![0x45, 0];
    p.extend_from_slice(&total.to_be_bytes());
    p.extend_from_slice(&[0, 0, 0x40, 0, 64, protocol, 0, 0]);
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    let csum = checksum::checksum(&p);
    p[10..12].copy_from_slice(&csum.to_be_bytes());
    p.extend_from_slice(upper);
    p
}

/// An Ethernet/IPv4/UDP frame with valid checksums.
pub(crate) fn udp_frame(
    (src_mac, src_ip): ([u8; 6], Ipv4Addr),
    (dst_mac, dst_ip): ([u8; 6], Ipv4Addr),
    port: u16,
    payload: &[u8],
) -> Vec<u8> {
    let len = u16::try_from(8 + payload.len()).unwrap();
    let mut udp = Vec::with_capacity(usize::from(len));
    udp.extend_from_slice(&port.to_be_bytes());
    udp.extend_from_slice(&port.to_be_bytes());
    udp.extend_from_slice(&len.to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(payload);
    let pseudo = checksum::pseudo_header_v4(src_ip, dst_ip, PROTO_UDP, len);
    let folded = checksum::finish(checksum::combine(pseudo, checksum::sum(&udp)));
    // Zero means "no checksum" in UDP over IPv4: all ones is the same value.
    let csum = if folded == 0 { 0xffff } else { folded };
    udp[6..8].copy_from_slice(&csum.to_be_bytes());
    ethernet(
        dst_mac,
        src_mac,
        ETHERTYPE_IPV4,
        &ipv4(src_ip, dst_ip, PROTO_UDP, &udp),
    )
}

fn arp(op: u16, sender: ([u8; 6], Ipv4Addr), target: ([u8; 6], Ipv4Addr)) -> Vec<u8> {
    let mut a = vec![0, 1, 8, 0, 6, 4];
    a.extend_from_slice(&op.to_be_bytes());
    a.extend_from_slice(&sender.0);
    a.extend_from_slice(&sender.1.octets());
    a.extend_from_slice(&target.0);
    a.extend_from_slice(&target.1.octets());
    a
}

/// A broadcast ARP request from `(mac, ip)` for `target`.
pub(crate) fn arp_request(mac: [u8; 6], ip: Ipv4Addr, target: Ipv4Addr) -> Vec<u8> {
    let body = arp(1, (mac, ip), ([0; 6], target));
    ethernet([0xff; 6], mac, ETHERTYPE_ARP, &body)
}

/// The answer to `frame` if it is an ARP request for `ip` or an ICMP echo request to it.
fn answer(frame: &[u8], mac: [u8; 6], ip: Ipv4Addr) -> Option<Vec<u8>> {
    let ethertype = u16::from_be_bytes(frame.get(12..14)?.try_into().ok()?);
    let src_mac: [u8; 6] = frame.get(6..12)?.try_into().ok()?;
    let body = frame.get(14..)?;
    match ethertype {
        ETHERTYPE_ARP => {
            let is_request = body.get(0..8)? == [0, 1, 8, 0, 6, 4, 0, 1];
            let target = Ipv4Addr::from(<[u8; 4]>::try_from(body.get(24..28)?).ok()?);
            if !is_request || target != ip {
                return None;
            }
            let sender_ip = Ipv4Addr::from(<[u8; 4]>::try_from(body.get(14..18)?).ok()?);
            let reply = arp(2, (mac, ip), (src_mac, sender_ip));
            Some(ethernet(src_mac, mac, ETHERTYPE_ARP, &reply))
        }
        ETHERTYPE_IPV4 => {
            let header_len = usize::from(body.first()? & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes(body.get(2..4)?.try_into().ok()?));
            let dst = Ipv4Addr::from(<[u8; 4]>::try_from(body.get(16..20)?).ok()?);
            let src = Ipv4Addr::from(<[u8; 4]>::try_from(body.get(12..16)?).ok()?);
            let icmp = body.get(header_len..total)?;
            if body[9] != PROTO_ICMP || dst != ip || icmp.first() != Some(&8) {
                return None;
            }
            let mut reply = icmp.to_vec();
            reply[0] = 0;
            reply[2..4].copy_from_slice(&[0, 0]);
            let csum = checksum::checksum(&reply);
            reply[2..4].copy_from_slice(&csum.to_be_bytes());
            Some(ethernet(
                src_mac,
                mac,
                ETHERTYPE_IPV4,
                &ipv4(ip, src, PROTO_ICMP, &reply),
            ))
        }
        _ => None,
    }
}
