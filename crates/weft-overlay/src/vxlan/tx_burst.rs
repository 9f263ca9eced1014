//! One burst as the transmit half sends it: each frame's route, and for each frame with a
//! partial checksum (the port takes them, `caps.partial_csum`, so that the switch hands a
//! whole burst in one call instead of completing and sending such frames one at a time) a
//! copy with the checksum completed. 64 B frames cost a few nanoseconds to copy; the copies
//! live in one buffer that keeps its capacity from burst to burst.

use weft_packet::gso::complete_checksum;
use weft_switch::{SharedTail, TxFrame};
use weft_sys::IoVec;

use crate::vxlan::tx_small_gso::Route;

/// Room kept for completed copies from the start (grown when a burst needs more).
const ARENA_START: usize = 256 * 128;
/// Iovecs per datagram: the encapsulation header and a frame's three pieces.
pub(crate) const DATAGRAM_IOVECS: usize = 4;

/// Routes and completed copies of the burst being sent. (`Default` allocates nothing: the
/// placeholder while a burst is out of the port.)
#[derive(Default)]
pub(crate) struct Burst {
    pub(crate) routes: Vec<Route>,
    /// Per frame: where its completed copy lies in `arena`, if it has one.
    completed: Vec<Option<(usize, usize)>>,
    arena: Vec<u8>,
}

impl Burst {
    pub(crate) fn new(capacity: usize) -> Burst {
        Burst {
            routes: Vec::with_capacity(capacity),
            completed: Vec::with_capacity(capacity),
            arena: Vec::with_capacity(ARENA_START),
        }
    }

    /// Routes every frame with `route` and completes the partial checksums (a frame whose
    /// checksum cannot be completed is `Malformed`).
    pub(crate) fn prepare(
        &mut self,
        frames: &[TxFrame<'_>],
        route: impl Fn(&TxFrame<'_>) -> Route,
    ) {
        self.routes.clear();
        self.completed.clear();
        self.arena.clear();
        for frame in frames {
            let mut r = route(frame);
            let mut copy = None;
            if frame.offload.needs_csum && !matches!(r, Route::Super | Route::TooBig) {
                copy = self.complete(frame);
                if copy.is_none() {
                    r = Route::Malformed;
                }
            }
            self.routes.push(r);
            self.completed.push(copy);
        }
    }

    fn complete(&mut self, frame: &TxFrame<'_>) -> Option<(usize, usize)> {
        let at = self.arena.len();
        self.arena.resize(at + frame.len(), 0);
        let done = self.arena.get_mut(at..).and_then(|room| {
            let len = frame.copy_to(room)?;
            complete_checksum(room.get_mut(..len)?, &frame.offload).ok()?;
            Some((at, len))
        });
        if done.is_none() {
            self.arena.truncate(at);
        }
        done
    }

    /// Frame `index`'s bytes as they go out: (head, body, tail), its completed copy (as the
    /// body) if it has one.
    fn parts<'a>(
        &'a self,
        index: usize,
        frame: &'a TxFrame<'_>,
    ) -> (&'a [u8], &'a [u8], SharedTail<'a>) {
        let copy = self
            .completed
            .get(index)
            .copied()
            .flatten()
            .and_then(|(at, len)| self.arena.get(at..at + len));
        match copy {
            Some(bytes) => (&[], bytes, SharedTail::default()),
            None => (frame.head(), frame.body, frame.tail),
        }
    }

    /// Frame `index`'s datagram as iovecs: [`header`, the frame's head, its body, its tail
    /// in a guest's memory] (its completed copy, if it has one, as the body; unused pieces
    /// have length 0).
    pub(crate) fn iovecs<'a>(
        &'a self,
        index: usize,
        frame: &'a TxFrame<'_>,
        header: IoVec<'a>,
    ) -> [IoVec<'a>; DATAGRAM_IOVECS] {
        let (head, body, tail) = self.parts(index, frame);
        [
            header,
            IoVec::new(head),
            IoVec::new(body),
            IoVec::shared(tail.as_volatile()),
        ]
    }
}
