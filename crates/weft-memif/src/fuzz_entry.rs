//! Bodies of the memif fuzz targets (`fuzz/fuzz_targets/memif_*.rs`), also run as
//! proptests on stable. The port's two trust boundaries, each through the real code:
//!
//! - [`control_messages`]: any bytes on the control socket, each message with any number
//!   of descriptors, into both roles' handshakes.
//! - [`hostile_rings`]: a peer writing anything into a ring and its buffers (held in a
//!   memfd, as a real region is) while both roles' consumers and producers walk it.

use weft_packet::OffloadInfo;
use weft_switch::TxFrame;

use crate::config::Role;
use crate::handshake::{
    ClientHandshake, ClientPlan, ClientStep, ServerHandshake, ServerLimits, ServerStep,
};
use crate::layout::ClientLayout;
use crate::memory::SharedMemory;
use crate::ring::{Consumer, OwnBuffers, Producer, RingPlace, Sent};
use crate::wire::{Direction, Message, Name, MSG_SIZE, SECRET_LEN};

/// Feeds `data`, cut into messages of 128 bytes each preceded by a descriptor count, to a
/// server's and a client's handshake. Decoding never panics, a decoded message encodes
/// back to itself, and each handshake either goes on or refuses with a reason. True when
/// the server side reached CONNECT.
pub fn control_messages(data: &[u8]) -> bool {
    let mut server = ServerHandshake::new(ServerLimits {
        id: 0,
        secret: None,
        max_rings: 2,
        max_regions: 2,
        max_log2_ring_size: 10,
        max_region_bytes: 1 << 24,
        name: Name::new(b"fuzz"),
    });
    let mut client = ClientHandshake::new(ClientPlan {
        id: 0,
        secret: [0; SECRET_LEN],
        queue_pairs: 2,
        log2_ring_size: 10,
        buffer_size: 2048,
        name: Name::new(b"fuzz"),
        interface_name: Name::new(b"fuzz0"),
    });
    let (mut server_alive, mut client_alive) = (true, true);
    let mut connected = false;
    for chunk in data.chunks(MSG_SIZE + 1) {
        let Some((&fds, bytes)) = chunk.split_first() else {
            continue;
        };
        let Ok(msg) = Message::decode(bytes) else {
            continue;
        };
        assert_eq!(Message::decode(&msg.encode()).as_ref(), Ok(&msg));
        let fds = usize::from(fds % 4);
        if server_alive {
            match server.on_message(&msg, fds) {
                Ok(ServerStep::Connect { .. }) => {
                    connected = true;
                    assert!(!server.regions().is_empty());
                    for d in [Direction::ClientToServer, Direction::ServerToClient] {
                        assert!(!server.rings(d).is_empty());
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    let _ = (e.refusal(), e.to_string());
                    server_alive = false;
                }
            }
        }
        if client_alive {
            match client.on_message(&msg, fds) {
                Ok(ClientStep::Negotiated(n, layout)) => {
                    assert!(n.c2s <= 2 && n.s2c <= 2 && n.log2_ring_size <= 10);
                    assert!(layout.region_size() > 0);
                    let _ = client.next_outgoing();
                }
                Ok(_) => {}
                Err(_) => client_alive = false,
            }
        }
    }
    connected
}

const LOG2: u8 = 3;
const BUFFER: u32 = 256;
const MAX_FRAME: usize = 1024;

/// A region laid out as weft's own (one ring each way, 8 slots, 256-byte buffers); the
/// peer's writes (`offset`, bytes) from `data` land anywhere in it between the steps of a
/// consumer and a producer of the given role walking its rings.
pub fn hostile_rings(data: &[u8]) {
    let layout = ClientLayout {
        c2s: 1,
        s2c: 1,
        log2: LOG2,
        buffer_size: BUFFER,
    };
    let Ok((mem, _file)) = SharedMemory::create(layout.region_size()) else {
        return;
    };
    let role = if data.first().is_some_and(|b| b & 1 == 1) {
        Role::Client
    } else {
        Role::Server
    };
    let (rx_dir, tx_dir) = match role {
        Role::Server => (Direction::ClientToServer, Direction::ServerToClient),
        Role::Client => (Direction::ServerToClient, Direction::ClientToServer),
    };
    let place = |d| RingPlace::new(&mem, 0, layout.ring_offset(d, 0), LOG2);
    let (Some(rx_place), Some(tx_place)) = (place(rx_dir), place(tx_dir)) else {
        return;
    };
    let own = |d| {
        (role == Role::Client).then_some(OwnBuffers {
            layout,
            direction: d,
            index: 0,
        })
    };
    let mut consumer = Consumer::new(rx_place, role, own(rx_dir), BUFFER);
    let mut producer = Producer::new(tx_place, role, own(tx_dir), BUFFER);
    let (Ok(mut rx_view), Ok(mut tx_view)) = (rx_place.view(&mem), tx_place.view(&mem)) else {
        return;
    };
    if role == Role::Client && consumer.release(&rx_view).is_err() {
        return;
    }
    let rings_end = layout.buffers_offset();
    let mut out = vec![0u8; MAX_FRAME];
    let payload = [0xa5u8; 700];
    let mut rest = data.get(1..).unwrap_or_default();
    while let Some((&op, tail)) = rest.split_first() {
        // The peer writes up to 16 bytes somewhere in the rings (mostly) or the buffers.
        let n = usize::from(op & 15).min(tail.len().saturating_sub(2));
        let (at, bytes) = match tail.get(..2 + n) {
            Some(w) => (u64::from(u16::from_le_bytes([w[0], w[1]])), &w[2..]),
            None => break,
        };
        rest = &tail[(2 + n).min(tail.len())..];
        let at = if op & 16 == 0 {
            at % rings_end
        } else {
            at % layout.region_size()
        };
        let at = at.min(layout.region_size().saturating_sub(bytes.len() as u64));
        if let Some(s) = mem.slice(0, at, bytes.len()) {
            s.copy_from(bytes);
        }
        // Weft walks both rings.
        if let Ok(ready) = consumer.ready(&rx_view) {
            assert!(ready <= 1 << LOG2);
            let mut left = ready;
            while left > 0 {
                match consumer.read_frame(&mut rx_view, left, &mut out) {
                    Ok((slots, result)) => {
                        assert!(slots >= 1 && slots <= left);
                        if let Ok(len) = result {
                            assert!(len > 0 && len <= MAX_FRAME);
                        }
                        left -= slots;
                    }
                    Err(_) => break,
                }
            }
            let _ = consumer.release(&rx_view);
        }
        if let Ok(room) = producer.room(&tx_view) {
            assert!(room <= 1 << LOG2);
            let len = usize::from(op >> 5) * 100 + 1;
            let frame = TxFrame::whole(&payload[..len.min(payload.len())], OffloadInfo::default());
            if let Ok(Sent::Slots(k)) = producer.write_frame(&mut tx_view, &frame, room) {
                assert!(k >= 1 && k <= room);
            }
            let _ = producer.publish(&tx_view);
        }
    }
}

#[cfg(test)]
mod tests;
