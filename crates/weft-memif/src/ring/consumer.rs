//! The receiving end of a ring: the server on a C2S ring, the client on an S2C ring.

use super::{FrameDrop, OwnBuffers, RingFault, RingPlace, RingView};
use crate::config::{Role, MAX_CHAIN};
use crate::layout::{Desc, RING_HEAD_AT, RING_TAIL_AT};

/// Reads frames from one ring.
#[derive(Debug)]
pub struct Consumer {
    place: RingPlace,
    role: Role,
    /// The next slot to read.
    cursor: u16,
    /// Client: the head last published (slots offered up to there). Server: unused.
    offered: u16,
    /// Client: where its buffers are. Server: `None` (the client's descriptors say).
    own: Option<OwnBuffers>,
    /// Most bytes one descriptor may hold.
    buffer_size: u32,
}

/// One frame read: the slots it took and its length, or why it was dropped.
pub type ReadFrame = (u16, Result<usize, FrameDrop>);

impl Consumer {
    /// The receiving end of `place`, with both indexes at zero (as they are right after a
    /// connection). A client consumer must be given its buffers.
    pub fn new(place: RingPlace, role: Role, own: Option<OwnBuffers>, buffer_size: u32) -> Self {
        Consumer {
            place,
            role,
            cursor: 0,
            offered: 0,
            own,
            buffer_size,
        }
    }

    /// Goes on from `cursor` in a ring another process served (taken over): everything
    /// before it was read and given back; a client had offered slots up to `offered`.
    pub fn resume_at(&mut self, cursor: u16, offered: u16) {
        self.cursor = cursor;
        self.offered = offered;
    }

    /// The next slot to read (every one before it given back after [`Consumer::release`]).
    pub fn cursor(&self) -> u16 {
        self.cursor
    }

    /// A client: the slots offered up to here. A server: 0.
    pub fn offered(&self) -> u16 {
        self.offered
    }

    /// Slots published and not yet read. A producer index that ran ahead of what it may
    /// have filled breaks the ring.
    pub fn ready(&self, view: &RingView<'_>) -> Result<u16, RingFault> {
        let size = self.place.size();
        match self.role {
            Role::Server => {
                let head = view.load(RING_HEAD_AT)?;
                let ready = head.wrapping_sub(self.cursor);
                if ready > size {
                    return Err(RingFault::IndexJump {
                        which: "head",
                        by: ready,
                        size,
                    });
                }
                Ok(ready)
            }
            Role::Client => {
                let tail = view.load(RING_TAIL_AT)?;
                let ready = tail.wrapping_sub(self.cursor);
                if ready > self.offered.wrapping_sub(self.cursor) {
                    return Err(RingFault::IndexJump {
                        which: "tail",
                        by: ready,
                        size,
                    });
                }
                Ok(ready)
            }
        }
    }

    /// Reads the frame at the cursor, within `ready` slots, into `out` (one volatile copy
    /// per buffer); the cursor moves past its slots whether it was taken or dropped.
    pub fn read_frame(
        &mut self,
        view: &mut RingView<'_>,
        ready: u16,
        out: &mut [u8],
    ) -> Result<ReadFrame, RingFault> {
        let mut len = 0usize;
        let mut slots = 0u16;
        let mut dropped = None;
        loop {
            if slots >= ready {
                // The last descriptor published said NEXT: a chain that never ends.
                dropped = Some(FrameDrop::BadChain);
                break;
            }
            let slot = self.cursor.wrapping_add(slots);
            let d = view.desc(slot)?;
            slots += 1;
            if dropped.is_none() {
                dropped = self.copy_buffer(view, slot, d, out, &mut len).err();
            }
            if !d.has_next() {
                break;
            }
            if usize::from(slots) >= MAX_CHAIN && dropped.is_none() {
                dropped = Some(FrameDrop::BadChain);
            }
        }
        self.cursor = self.cursor.wrapping_add(slots);
        let result = match dropped {
            Some(reason) => Err(reason),
            None if len == 0 => Err(FrameDrop::BadDescriptor),
            None => Ok(len),
        };
        Ok((slots, result))
    }

    fn copy_buffer(
        &self,
        view: &mut RingView<'_>,
        slot: u16,
        d: Desc,
        out: &mut [u8],
        len: &mut usize,
    ) -> Result<(), FrameDrop> {
        if d.length > self.buffer_size {
            return Err(FrameDrop::BadDescriptor);
        }
        let n = usize::try_from(d.length).map_err(|_| FrameDrop::BadDescriptor)?;
        let (region, offset) = match &self.own {
            Some(own) => own.buffer(slot),
            None => (d.region, u64::from(d.offset)),
        };
        let dst = out.get_mut(*len..*len + n).ok_or(FrameDrop::TooLong)?;
        let src = view
            .buffer(region, offset, n)
            .ok_or(FrameDrop::BadDescriptor)?;
        src.copy_to(dst);
        *len += n;
        Ok(())
    }

    /// Gives the slots read back to the producer: the server moves the tail; the client
    /// offers them again (fresh descriptors for its own buffers, then the head).
    pub fn release(&mut self, view: &RingView<'_>) -> Result<(), RingFault> {
        match self.role {
            Role::Server => view.store(RING_TAIL_AT, self.cursor),
            Role::Client => {
                let Some(own) = self.own else {
                    return Err(RingFault::Unreadable);
                };
                let target = self.cursor.wrapping_add(self.place.size());
                let length = self.buffer_size;
                while self.offered != target {
                    let slot = self.offered;
                    let (region, offset) = own.buffer(slot);
                    let desc = Desc {
                        flags: 0,
                        region,
                        length,
                        offset: u32::try_from(offset).map_err(|_| RingFault::Unreadable)?,
                    };
                    view.write_desc(slot, desc)?;
                    self.offered = self.offered.wrapping_add(1);
                }
                view.store(RING_HEAD_AT, target)
            }
        }
    }

    /// Where the ring lies.
    pub fn place(&self) -> RingPlace {
        self.place
    }
}
