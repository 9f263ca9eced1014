//! The transmit half: frames from the switch copied into the peer's receive ring, all of
//! a burst published with one index store, then one interrupt unless the peer masked it.

use std::sync::Arc;

use weft_switch::{PortCaps, PortTx, TxFrame};

use crate::connection::{Connection, Shared};
use crate::counters::Counters;
use crate::ring::{RingFault, Sent};

/// A memif port's transmit half (a `weft_switch::PortTx`).
pub struct MemifPortTx {
    shared: Arc<Shared>,
    queue: usize,
    seen: u64,
    conn: Option<Arc<Connection>>,
    caps: PortCaps,
}

impl std::fmt::Debug for MemifPortTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemifPortTx")
            .field("queue", &self.queue)
            .field("connected", &self.conn.is_some())
            .finish()
    }
}

impl MemifPortTx {
    /// The half sending on queue `queue` (modulo the rings negotiated).
    pub(crate) fn new(shared: Arc<Shared>, queue: usize, caps: PortCaps) -> Self {
        MemifPortTx {
            shared,
            queue,
            seen: u64::MAX,
            conn: None,
            caps,
        }
    }

    fn send(&self, conn: &Connection, frames: &[TxFrame<'_>]) -> Result<usize, RingFault> {
        let counters = &self.shared.counters;
        let Some(ring) = conn.tx.get(self.queue % conn.tx.len().max(1)) else {
            return Ok(0);
        };
        let mut ring = ring.lock().unwrap_or_else(|p| p.into_inner());
        let mut view = ring.producer.place().view(&conn.memory)?;
        let mut room = ring.producer.room(&view)?;
        let mut accepted = frames.len();
        // Counted once per burst (an atomic add per frame costs more than its descriptor).
        let (mut sent, mut bytes, mut too_long) = (0u64, 0u64, 0u64);
        for (i, frame) in frames.iter().enumerate() {
            if frame.is_empty() {
                continue;
            }
            if frame.len() > self.caps.max_frame_len {
                too_long += 1;
                continue;
            }
            match ring.producer.write_frame(&mut view, frame, room)? {
                Sent::Slots(n) => {
                    room -= n;
                    sent += 1;
                    bytes += u64::try_from(frame.len()).unwrap_or(0);
                }
                Sent::Full => {
                    accepted = i;
                    Counters::add(
                        &counters.tx_ring_full,
                        u64::try_from(frames.len() - i).unwrap_or(0),
                    );
                    break;
                }
                // A producer drops only frames that need more than MAX_CHAIN buffers.
                Sent::Dropped(_) => too_long += 1,
            }
        }
        Counters::add(&counters.tx_frames, sent);
        Counters::add(&counters.tx_bytes, bytes);
        if too_long > 0 {
            Counters::add(&counters.tx_too_long, too_long);
        }
        if ring.producer.publish(&view)? && !view.masked() && ring.interrupt.signal() {
            Counters::add(&counters.interrupts_sent, 1);
        }
        Ok(accepted)
    }
}

impl PortTx for MemifPortTx {
    fn caps(&self) -> PortCaps {
        self.caps
    }

    fn transmit(&mut self, frames: &[TxFrame<'_>]) -> usize {
        if self.shared.generation() != self.seen {
            let (generation, conn) = self.shared.current();
            self.seen = generation;
            self.conn = conn;
        }
        let not_connected = || {
            Counters::add(
                &self.shared.counters.tx_not_connected,
                u64::try_from(frames.len()).unwrap_or(0),
            );
            frames.len()
        };
        let Some(conn) = self.conn.as_ref() else {
            return not_connected();
        };
        if conn.broken() {
            return not_connected();
        }
        match self.send(conn, frames) {
            Ok(n) => n,
            Err(fault) => {
                conn.fail(format!("tx ring {}: {fault}", self.queue));
                not_connected()
            }
        }
    }
}
