//! The receive half: frames the peer wrote into the rings weft consumes, copied once each
//! into weft's buffers and lent to the switch; their slots go back to the peer when the
//! switch finishes the batch.
//!
//! A half serves one or more queues (queue `q` of a port split into `L` lanes goes to
//! lane `q % L`). Its readiness descriptor is an epoll set over its queues' interrupt
//! eventfds and a wake eventfd the control thread writes when the peer changes.
//!
//! The peer's interrupts (a `write` to an eventfd per burst, paid by the peer) are asked
//! for only when the worker may sleep on them, as VNET/P's adaptive dispatch does for
//! guests (`weft_vhost::Dispatch`): at a high rate (switch-driven) the ring's
//! `MASK_INT` flag stays set and the half asks to be polled; at a low rate (peer-driven)
//! it is set while frames keep coming and cleared when a look finds the ring empty. The
//! interrupt is drained then, and the ring looked at again after, so a signal racing the
//! look is never lost and a busy ring costs no system call.

use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::Arc;
use std::time::Instant;

use weft_switch::{FrameHandle, PortRx, RxBatch, RxDesc, RxFrame};
use weft_sys::event::{epoll_add, epoll_delete, Epoll, EventSet};
use weft_vhost::{Dispatch, DispatchMode, Driven};

use crate::connection::{Connection, Shared};
use crate::counters::Counters;
use crate::ring::{Consumer, RingFault};

/// One queue this half reads.
struct Queue {
    index: usize,
    consumer: Consumer,
    /// The cursor moved since the last release.
    moved: bool,
    /// Who makes weft look at the ring: the peer's interrupts, or the worker polling.
    dispatch: Dispatch,
    /// The ring's `MASK_INT` flag as weft last stored it.
    masked: bool,
}

/// A memif port's receive half (a `weft_switch::PortRx`).
pub struct MemifPortRx {
    shared: Arc<Shared>,
    queues: Vec<usize>,
    wake: usize,
    epoll: Epoll,
    seen: u64,
    conn: Option<Arc<Connection>>,
    active: Vec<Queue>,
    /// Frames of the current batch, `max_frame` bytes apart.
    buf: Vec<u8>,
    frames: Vec<(usize, usize)>,
    max_frame: usize,
    backlog: bool,
    start: usize,
}

impl std::fmt::Debug for MemifPortRx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemifPortRx")
            .field("queues", &self.queues)
            .field("connected", &self.conn.is_some())
            .finish()
    }
}

impl MemifPortRx {
    /// A half for `queues`, woken through `rx_wakes[wake]`.
    pub(crate) fn new(
        shared: Arc<Shared>,
        queues: Vec<usize>,
        wake: usize,
        max_frame: usize,
    ) -> std::io::Result<Self> {
        let epoll = Epoll::new()?;
        if let Some(w) = shared.rx_wakes.get(wake) {
            epoll_add(&epoll, w.as_fd(), EventSet::IN, u64::MAX)?;
        }
        Ok(MemifPortRx {
            shared,
            queues,
            wake,
            epoll,
            seen: u64::MAX,
            conn: None,
            active: Vec::new(),
            buf: Vec::new(),
            frames: Vec::new(),
            max_frame,
            backlog: false,
            start: 0,
        })
    }

    /// Picks up a new connection (or its absence) between batches.
    fn refresh(&mut self) {
        if let Some(w) = self.shared.rx_wakes.get(self.wake) {
            let _ = w.read();
        }
        let (generation, conn) = self.shared.current();
        self.seen = generation;
        if let Some(old) = self.conn.take() {
            for q in &self.active {
                if let Some(ring) = old.rx.get(q.index) {
                    let _ = epoll_delete(&self.epoll, ring.interrupt.as_fd());
                }
            }
        }
        self.active.clear();
        self.backlog = false;
        let Some(conn) = conn else {
            return;
        };
        for &index in &self.queues {
            let Some(ring) = conn.rx.get(index) else {
                continue;
            };
            let mut consumer = ring.consumer(conn.role, conn.buffer_size);
            // Interrupts wanted until the rate says otherwise. A client offers its buffers.
            let ready = ring.place.set_masked(&conn.memory, false).and_then(|()| {
                if ring.own.is_some() {
                    consumer.release(&ring.place.view(&conn.memory)?)
                } else {
                    Ok(())
                }
            });
            if let Err(fault) = ready {
                conn.fail(format!("rx ring {index}: {fault}"));
                break;
            }
            ring.note_released(&consumer);
            let _ = epoll_add(&self.epoll, ring.interrupt.as_fd(), EventSet::IN, 0);
            self.active.push(Queue {
                index,
                consumer,
                moved: false,
                dispatch: Dispatch::new(DispatchMode::default()),
                masked: false,
            });
        }
        self.conn = Some(conn);
    }

    #[allow(clippy::too_many_arguments)]
    fn read_queue(
        conn: &Connection,
        now: Instant,
        q: &mut Queue,
        batch: &mut RxBatch,
        buf: &mut [u8],
        frames: &mut Vec<(usize, usize)>,
        max_frame: usize,
        counters: &Counters,
    ) -> Result<bool, RingFault> {
        let mut view = q.consumer.place().view(&conn.memory)?;
        let mut ready = q.consumer.ready(&view)?;
        if ready == 0 && q.dispatch.driven() == Driven::Guest {
            // The worker may sleep after this look: interrupts on, then look again.
            if q.masked {
                q.consumer.place().set_masked(&conn.memory, false)?;
                q.masked = false;
            }
            if let Some(ring) = conn.rx.get(q.index) {
                ring.interrupt.drain();
            }
            ready = q.consumer.ready(&view)?;
        }
        // Counted once per burst: a shared counter's atomic add per frame costs more
        // than the frame's descriptor.
        let (mut taken, mut bytes) = (0u64, 0u64);
        while ready > 0 && batch.room() > 0 {
            let at = frames.len() * max_frame;
            let Some(out) = buf.get_mut(at..at + max_frame) else {
                break;
            };
            let (slots, result) = q.consumer.read_frame(&mut view, ready, out)?;
            ready = ready.saturating_sub(slots);
            q.moved = true;
            match result {
                Ok(len) => {
                    let handle = FrameHandle(u32::try_from(frames.len()).unwrap_or(u32::MAX));
                    if batch
                        .push(RxDesc {
                            handle,
                            offload: Default::default(),
                        })
                        .is_ok()
                    {
                        frames.push((at, len));
                        taken += 1;
                        bytes += u64::try_from(len).unwrap_or(0);
                    }
                }
                Err(reason) => counters.rx_drop(reason),
            }
        }
        if taken > 0 {
            Counters::add(&counters.rx_frames, taken);
            Counters::add(&counters.rx_bytes, bytes);
        }
        let (driven, _) = q
            .dispatch
            .observe(now, usize::try_from(taken).unwrap_or(usize::MAX));
        // Frames are coming or the worker polls anyway: the peer need not signal.
        if (driven == Driven::Switch || taken > 0) && !q.masked {
            q.consumer.place().set_masked(&conn.memory, true)?;
            q.masked = true;
        }
        Ok(ready > 0)
    }
}

impl PortRx for MemifPortRx {
    fn receive(&mut self, batch: &mut RxBatch) {
        // Slots of a batch the switch did not finish (or of dropped frames only) go back.
        self.finish();
        if self.shared.generation() != self.seen {
            self.refresh();
        }
        self.backlog = false;
        let Some(conn) = self.conn.clone() else {
            return;
        };
        if conn.broken() {
            return;
        }
        if conn.memory.tripped() {
            conn.fail("memory truncated under the port".into());
            return;
        }
        let need = batch.capacity() * self.max_frame;
        if self.buf.len() < need {
            self.buf.resize(need, 0);
        }
        let now = Instant::now();
        let n = self.active.len();
        for k in 0..n {
            let i = (self.start + k) % n;
            let Some(q) = self.active.get_mut(i) else {
                continue;
            };
            match Self::read_queue(
                &conn,
                now,
                q,
                batch,
                &mut self.buf,
                &mut self.frames,
                self.max_frame,
                &self.shared.counters,
            ) {
                Ok(more) => self.backlog |= more,
                Err(fault) => {
                    conn.fail(format!("rx ring {}: {fault}", q.index));
                    return;
                }
            }
        }
        self.start = self.start.wrapping_add(1);
    }

    fn frame(&self, handle: FrameHandle) -> RxFrame<'_> {
        let Some(&(at, len)) = usize::try_from(handle.0)
            .ok()
            .and_then(|i| self.frames.get(i))
        else {
            return RxFrame::default();
        };
        self.buf
            .get(at..at + len)
            .map_or_else(RxFrame::default, RxFrame::local)
    }

    fn finish(&mut self) {
        self.frames.clear();
        let Some(conn) = &self.conn else {
            return;
        };
        for q in &mut self.active {
            if !q.moved {
                continue;
            }
            q.moved = false;
            let released = q
                .consumer
                .place()
                .view(&conn.memory)
                .and_then(|view| q.consumer.release(&view));
            if let Some(ring) = conn.rx.get(q.index) {
                ring.note_released(&q.consumer);
            }
            if let Err(fault) = released {
                conn.fail(format!("rx ring {}: {fault}", q.index));
            }
        }
    }

    fn readiness_fd(&self) -> Option<RawFd> {
        Some(self.epoll.as_raw_fd())
    }

    /// Frames left, or a ring whose peer was asked not to signal: an idle worker polls.
    fn needs_polling(&self) -> bool {
        self.backlog || self.active.iter().any(|q| q.masked)
    }
}
