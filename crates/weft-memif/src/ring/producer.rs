//! The sending end of a ring: the client on a C2S ring (into its own buffers), the server
//! on an S2C ring (into the buffers the client offered).

use vm_memory::VolatileSlice;
use weft_switch::TxFrame;

use super::{FrameDrop, OwnBuffers, RingFault, RingPlace, RingView};
use crate::config::{Role, MAX_CHAIN};
use crate::layout::{Desc, DESC_FLAG_NEXT, RING_HEAD_AT, RING_TAIL_AT};

/// Writes frames into one ring.
#[derive(Debug)]
pub struct Producer {
    place: RingPlace,
    role: Role,
    /// The next slot to fill (the client's head, the server's tail: only weft moves it).
    cursor: u16,
    /// The cursor last published.
    published: u16,
    own: Option<OwnBuffers>,
    buffer_size: u32,
}

/// What became of one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// Written into this many slots (published by [`Producer::publish`]).
    Slots(u16),
    /// Not enough free slots: nothing written.
    Full,
    /// Dropped: too long for the chain weft writes.
    Dropped(FrameDrop),
}

impl Producer {
    /// The sending end of `place`, both indexes at zero. A client producer must be given
    /// its buffers.
    pub fn new(place: RingPlace, role: Role, own: Option<OwnBuffers>, buffer_size: u32) -> Self {
        Producer {
            place,
            role,
            cursor: 0,
            published: 0,
            own,
            buffer_size,
        }
    }

    /// Goes on from `position` in a ring another process served (taken over): every slot
    /// before it was written and published.
    pub fn resume_at(&mut self, position: u16) {
        self.cursor = position;
        self.published = position;
    }

    /// The cursor last published.
    pub fn published(&self) -> u16 {
        self.published
    }

    /// Free slots now. An index the peer moves that ran past what it may have taken or
    /// offered breaks the ring.
    pub fn room(&self, view: &RingView<'_>) -> Result<u16, RingFault> {
        let size = self.place.size();
        match self.role {
            Role::Client => {
                let tail = view.load(RING_TAIL_AT)?;
                let in_flight = self.published.wrapping_sub(tail);
                if in_flight > size {
                    return Err(RingFault::IndexJump {
                        which: "tail",
                        by: tail.wrapping_sub(self.published),
                        size,
                    });
                }
                Ok(size - in_flight - self.cursor.wrapping_sub(self.published))
            }
            Role::Server => {
                let head = view.load(RING_HEAD_AT)?;
                let offered = head.wrapping_sub(self.published);
                if offered > size {
                    return Err(RingFault::IndexJump {
                        which: "head",
                        by: offered,
                        size,
                    });
                }
                Ok(offered - self.cursor.wrapping_sub(self.published))
            }
        }
    }

    /// Writes `frame` into the slots at the cursor, chained when it needs more than one
    /// buffer, within `room` free slots.
    pub fn write_frame(
        &mut self,
        view: &mut RingView<'_>,
        frame: &TxFrame<'_>,
        room: u16,
    ) -> Result<Sent, RingFault> {
        let len = frame.len();
        let mut pos = 0usize;
        let mut slots = 0u16;
        loop {
            if slots >= room {
                return Ok(Sent::Full);
            }
            if usize::from(slots) >= MAX_CHAIN {
                return Ok(Sent::Dropped(FrameDrop::TooLong));
            }
            let slot = self.cursor.wrapping_add(slots);
            let (region, offset, room_here) = match &self.own {
                Some(own) => {
                    let (r, o) = own.buffer(slot);
                    (r, o, self.buffer_size)
                }
                None => {
                    let offered = view.desc(slot)?;
                    (
                        offered.region,
                        u64::from(offered.offset),
                        offered.length.min(self.buffer_size),
                    )
                }
            };
            let room_here = usize::try_from(room_here).map_err(|_| RingFault::BadOffer)?;
            if room_here == 0 {
                return Err(RingFault::BadOffer);
            }
            let n = room_here.min(len - pos);
            let dst = view.buffer(region, offset, n).ok_or(RingFault::BadOffer)?;
            copy_range(frame, pos, dst);
            pos += n;
            slots += 1;
            let more = pos < len;
            let desc = Desc {
                flags: if more { DESC_FLAG_NEXT } else { 0 },
                region,
                // n <= buffer_size <= 65535.
                length: u32::try_from(n).map_err(|_| RingFault::BadOffer)?,
                offset: u32::try_from(offset).map_err(|_| RingFault::BadOffer)?,
            };
            view.write_desc(slot, desc)?;
            if !more {
                break;
            }
        }
        self.cursor = self.cursor.wrapping_add(slots);
        Ok(Sent::Slots(slots))
    }

    /// Publishes every frame written since the last call with one index store. True when
    /// there was something to publish.
    pub fn publish(&mut self, view: &RingView<'_>) -> Result<bool, RingFault> {
        if self.cursor == self.published {
            return Ok(false);
        }
        let at = match self.role {
            Role::Client => RING_HEAD_AT,
            Role::Server => RING_TAIL_AT,
        };
        view.store(at, self.cursor)?;
        self.published = self.cursor;
        Ok(true)
    }

    /// Where the ring lies.
    pub fn place(&self) -> RingPlace {
        self.place
    }
}

/// Copies the frame's bytes `[pos, pos + dst.len())` into `dst`, walking its head, body
/// and shared tail.
fn copy_range(frame: &TxFrame<'_>, mut pos: usize, dst: VolatileSlice<'_>) {
    let mut written = 0usize;
    for piece in [frame.head(), frame.body] {
        if written == dst.len() {
            return;
        }
        if pos >= piece.len() {
            pos -= piece.len();
            continue;
        }
        let n = (piece.len() - pos).min(dst.len() - written);
        if let Ok(d) = dst.subslice(written, n) {
            d.copy_from(&piece[pos..pos + n]);
        }
        written += n;
        pos = 0;
    }
    let tail = frame.tail.as_volatile();
    let n = tail.len().saturating_sub(pos).min(dst.len() - written);
    if n > 0 {
        if let (Ok(src), Ok(d)) = (tail.subslice(pos, n), dst.subslice(written, n)) {
            src.copy_to_volatile_slice(d);
        }
    }
}
