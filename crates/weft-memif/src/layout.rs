//! Where things lie in memif's shared memory (`memif_ring_t`, `memif_desc_t`), and the
//! layout weft gives its own region when it is the client: DPDK's (rings first, C2S then
//! S2C, then one buffer per slot of every ring). Pure arithmetic; no memory is touched.

use crate::wire::Direction;

/// A ring's header: cookie, flags and head on one cache line, tail on the next.
pub const RING_HEADER: u64 = 128;
/// [`RING_HEADER`] as an offset into a mapped ring.
pub const RING_HEADER_BYTES: usize = 128;
/// Offset of the cookie in a ring.
pub const RING_COOKIE_AT: u64 = 0;
/// Offset of the flags in a ring.
pub const RING_FLAGS_AT: u64 = 4;
/// Offset of the head index in a ring.
pub const RING_HEAD_AT: u64 = 6;
/// Offset of the tail index in a ring.
pub const RING_TAIL_AT: u64 = 64;
/// Bytes of one descriptor.
pub const DESC_SIZE: u64 = 16;
/// [`DESC_SIZE`] as a length.
pub const DESC_BYTES: usize = 16;
/// The value a ring's cookie holds.
pub const RING_COOKIE: u32 = 0x03E3_1F20;
/// Ring flag: the consumer polls; the producer does not signal the interrupt eventfd.
pub const RING_FLAG_MASK_INT: u16 = 1;
/// Descriptor flag: the frame goes on in the next slot.
pub const DESC_FLAG_NEXT: u16 = 1;
/// Ring offsets must be this aligned (head and tail are read atomically; DPDK's lie on
/// multiples of 16).
pub const RING_ALIGN: u64 = 16;

/// Bytes a ring of `2^log2` slots takes.
pub fn ring_bytes(log2: u8) -> u64 {
    RING_HEADER + (DESC_SIZE << log2)
}

/// One descriptor's fields as read (once) from the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Desc {
    /// [`DESC_FLAG_NEXT`] or not.
    pub flags: u16,
    /// Region of the buffer.
    pub region: u16,
    /// Bytes in the buffer (producer) or its room (a server-to-client slot offered).
    pub length: u32,
    /// Offset of the buffer in its region.
    pub offset: u32,
}

impl Desc {
    /// Decodes the 16 bytes of `memif_desc_t`.
    pub fn from_bytes(b: [u8; DESC_BYTES]) -> Desc {
        Desc {
            flags: u16::from_ne_bytes([b[0], b[1]]),
            region: u16::from_ne_bytes([b[2], b[3]]),
            length: u32::from_ne_bytes([b[4], b[5], b[6], b[7]]),
            offset: u32::from_ne_bytes([b[8], b[9], b[10], b[11]]),
        }
    }

    /// The 16 bytes of `memif_desc_t` (metadata zero).
    pub fn to_bytes(self) -> [u8; DESC_BYTES] {
        let mut b = [0; DESC_BYTES];
        b[0..2].copy_from_slice(&self.flags.to_ne_bytes());
        b[2..4].copy_from_slice(&self.region.to_ne_bytes());
        b[4..8].copy_from_slice(&self.length.to_ne_bytes());
        b[8..12].copy_from_slice(&self.offset.to_ne_bytes());
        b
    }

    /// True when the frame goes on in the next slot.
    pub fn has_next(self) -> bool {
        self.flags & DESC_FLAG_NEXT != 0
    }
}

/// The one region weft allocates as a client: `c2s` then `s2c` rings of `2^log2` slots,
/// then a buffer of `buffer_size` bytes for each slot of each ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClientLayout {
    /// Client-to-server rings.
    pub c2s: u16,
    /// Server-to-client rings.
    pub s2c: u16,
    /// Slots per ring, as log2.
    pub log2: u8,
    /// Bytes per buffer.
    pub buffer_size: u32,
}

impl ClientLayout {
    /// The global index of ring `index` of `direction` (C2S first).
    fn ring_number(&self, direction: Direction, index: u16) -> u64 {
        match direction {
            Direction::ClientToServer => u64::from(index),
            Direction::ServerToClient => u64::from(self.c2s) + u64::from(index),
        }
    }

    /// Offset of a ring's header.
    pub fn ring_offset(&self, direction: Direction, index: u16) -> u64 {
        self.ring_number(direction, index) * ring_bytes(self.log2)
    }

    /// Where the buffers start.
    pub fn buffers_offset(&self) -> u64 {
        (u64::from(self.c2s) + u64::from(self.s2c)) * ring_bytes(self.log2)
    }

    /// Offset of the buffer of `slot` (masked) of a ring.
    pub fn buffer_offset(&self, direction: Direction, index: u16, slot: u16) -> u64 {
        let slots = 1u64 << self.log2;
        let global = self.ring_number(direction, index) * slots + (u64::from(slot) & (slots - 1));
        self.buffers_offset() + global * u64::from(self.buffer_size)
    }

    /// Bytes the region takes.
    pub fn region_size(&self) -> u64 {
        let slots = (u64::from(self.c2s) + u64::from(self.s2c)) << self.log2;
        self.buffers_offset() + slots * u64::from(self.buffer_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_region_lays_rings_then_buffers_as_dpdk_does() {
        let l = ClientLayout {
            c2s: 1,
            s2c: 1,
            log2: 10,
            buffer_size: 2048,
        };
        assert_eq!(ring_bytes(10), 128 + 16 * 1024);
        assert_eq!(l.ring_offset(Direction::ClientToServer, 0), 0);
        assert_eq!(l.ring_offset(Direction::ServerToClient, 0), 16_512);
        assert_eq!(l.buffers_offset(), 33_024);
        assert_eq!(
            l.buffer_offset(Direction::ClientToServer, 0, 1),
            33_024 + 2048
        );
        assert_eq!(
            l.buffer_offset(Direction::ServerToClient, 0, 0),
            33_024 + 1024 * 2048
        );
        // The slot index is masked: slot 1024 is slot 0.
        assert_eq!(
            l.buffer_offset(Direction::ServerToClient, 0, 1024),
            l.buffer_offset(Direction::ServerToClient, 0, 0)
        );
        assert_eq!(l.region_size(), 33_024 + 2 * 1024 * 2048);
    }

    #[test]
    fn a_descriptor_round_trips_through_its_sixteen_bytes() {
        let d = Desc {
            flags: DESC_FLAG_NEXT,
            region: 3,
            length: 2048,
            offset: 0xabcd,
        };
        assert_eq!(Desc::from_bytes(d.to_bytes()), d);
        assert!(d.has_next());
        assert_eq!(&d.to_bytes()[12..], &[0, 0, 0, 0]);
    }
}
