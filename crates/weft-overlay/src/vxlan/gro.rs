//! UDP GRO on receive (and the socket's drop count, read from the same control messages): with `UDP_GRO` on, the kernel may hand one buffer holding several
//! datagrams of one flow, each `gso_size` bytes but the last, and says `gso_size` in a control
//! message. This reads that message and cuts the buffer back into datagrams. Pure (no I/O):
//! the control bytes come from the kernel, but are read as untrusted all the same.

use std::ops::Range;

use crate::vxlan::udp_offload::UDP_GRO;

/// Size of a `cmsghdr` on 64-bit Linux: `cmsg_len` (usize), `cmsg_level`, `cmsg_type` (i32).
const CMSG_HEADER: usize = 16;
/// Control messages are padded to this alignment.
const CMSG_ALIGN: usize = 8;

/// Why a received buffer's control messages could not be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroError {
    /// A control message is shorter than its header or runs past the buffer.
    BadControl,
    /// The `UDP_GRO` value is zero, negative or above 65535.
    BadSegmentSize,
}

/// What a received buffer's control messages say.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RxControl {
    /// The `UDP_GRO` segment size: `None` when the buffer is one datagram.
    pub gro_segment: Option<u16>,
    /// The socket's `SO_RXQ_OVFL` count: datagrams the kernel dropped because the socket's
    /// receive buffer was full, since the socket was opened (wrapping at 2³²). The kernel
    /// sends it only once there has been a drop.
    pub socket_drops: Option<u32>,
}

/// Reads the control messages of one received buffer (untrusted: any bad length is an error,
/// never a panic).
pub fn read_control(control: &[u8]) -> Result<RxControl, GroError> {
    let mut out = RxControl::default();
    let mut at = 0;
    while control.len().saturating_sub(at) >= CMSG_HEADER {
        let word = |o: usize, n: usize| control.get(at + o..at + o + n);
        let len_bytes: [u8; 8] = word(0, 8)
            .and_then(|b| b.try_into().ok())
            .ok_or(GroError::BadControl)?;
        let len = usize::try_from(u64::from_ne_bytes(len_bytes)).unwrap_or(usize::MAX);
        let int_at = |o: usize| -> Result<i32, GroError> {
            let b: [u8; 4] = word(o, 4)
                .and_then(|b| b.try_into().ok())
                .ok_or(GroError::BadControl)?;
            Ok(i32::from_ne_bytes(b))
        };
        let (level, kind) = (int_at(8)?, int_at(12)?);
        if len < CMSG_HEADER || len > control.len() - at {
            return Err(GroError::BadControl);
        }
        let known = (level == libc::SOL_UDP && kind == UDP_GRO)
            || (level == libc::SOL_SOCKET && kind == libc::SO_RXQ_OVFL);
        if known && len < CMSG_HEADER + 4 {
            return Err(GroError::BadControl);
        }
        if level == libc::SOL_UDP && kind == UDP_GRO {
            out.gro_segment = match u16::try_from(int_at(CMSG_HEADER)?) {
                Ok(size) if size > 0 => Some(size),
                _ => return Err(GroError::BadSegmentSize),
            };
        } else if level == libc::SOL_SOCKET && kind == libc::SO_RXQ_OVFL {
            out.socket_drops = Some(u32::from_ne_bytes(int_at(CMSG_HEADER)?.to_ne_bytes()));
        }
        at += len.div_ceil(CMSG_ALIGN) * CMSG_ALIGN;
    }
    Ok(out)
}

/// The segment size a control buffer announces: `Ok(None)` when there is no `UDP_GRO`
/// message (the buffer is one datagram).
pub fn gro_segment_size(control: &[u8]) -> Result<Option<u16>, GroError> {
    read_control(control).map(|c| c.gro_segment)
}

/// The datagrams in a buffer of `len` bytes cut every `segment` bytes (`segment` > 0).
pub fn gro_segments(len: usize, segment: u16) -> impl Iterator<Item = Range<usize>> {
    let step = usize::from(segment).max(1);
    (0..len)
        .step_by(step)
        .map(move |start| start..(start + step).min(len))
}
