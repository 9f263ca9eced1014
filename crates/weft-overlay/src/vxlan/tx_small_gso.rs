//! Ordinary frames through UDP segmentation offload. A run of consecutive frames in a burst
//! that go to the same single remote (a unicast FDB hit, or any frame when the port has only
//! one remote), from the same source port (offload socket), and are
//! all the same length (the last may be shorter) leave in ONE `sendmsg` with `UDP_SEGMENT` =
//! VXLAN header + frame length, gathered without a copy: iovecs [VXLAN header, frame head,
//! frame body] per frame. The kernel then makes one pass through UDP/IP and the underlay
//! device for the run instead of one per datagram; the datagrams are the ones the raw
//! `sendmmsg` path would send (same ports, VXLAN header, inner frame; the kernel fills in
//! the IPv4 UDP checksum where the raw path leaves it zero). Runs of one frame, floods
//! (head-end replication) and super-frames stay on their own paths; `transmit` hands
//! everything to the kernel in burst order.

use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsFd;

use weft_packet::vxlan::{self, HEADER_LEN as VXLAN_HEADER_LEN};
use weft_packet::Vni;
use weft_switch::TxFrame;
use weft_sys::{IoVec, IoVecStore};

use crate::vxlan::sys::SockAddr;
use crate::vxlan::tx::VxlanTx;
use crate::vxlan::tx_burst::Burst;
use crate::vxlan::tx_burst::DATAGRAM_IOVECS;
use crate::vxlan::tx_super::{MAX_GSO_PAYLOAD, MAX_GSO_SEGMENTS};
use crate::vxlan::udp_offload::{send_segmented, socket_full, UIO_MAXIOV};

/// Where a frame of a burst goes, worked out once per burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// A TCP super-frame: segmented by the port (`tx_super`).
    Super,
    /// Its L3 packet exceeds the inner MTU: not sent, answered (`too_big`).
    TooBig,
    /// Too short to carry a destination MAC.
    Malformed,
    /// One remote endpoint: a unicast FDB hit, or the port's only remote.
    Unicast {
        /// The remote endpoint.
        remote: IpAddr,
        /// Index of the offload socket whose port is the flow's source port.
        socket: usize,
        /// The UDP source port.
        src_port: u16,
        /// The inner frame's length.
        len: usize,
    },
    /// Every remote (broadcast, multicast, unknown unicast) when there are several: head-end
    /// replication.
    Flood {
        /// Index of the bound socket whose port is the flow's source port.
        socket: usize,
        /// The UDP source port.
        src_port: u16,
    },
}

impl Route {
    /// What a segmented run must share, and the datagram payload's length (VXLAN header +
    /// frame); `None` for frames that never go in a run.
    fn run_key(&self) -> Option<((IpAddr, usize), usize)> {
        match *self {
            Route::Unicast {
                remote,
                socket,
                len,
                ..
            } => Some(((remote, socket), len.checked_add(VXLAN_HEADER_LEN)?)),
            _ => None,
        }
    }
}

/// Most frames in one run: each takes [`DATAGRAM_IOVECS`] iovecs, and the kernel's segment
/// limit.
const MAX_RUN: usize = if MAX_GSO_SEGMENTS < UIO_MAXIOV / DATAGRAM_IOVECS {
    MAX_GSO_SEGMENTS
} else {
    UIO_MAXIOV / DATAGRAM_IOVECS
};

/// How many frames from the start of `routes` form one segmented send: the first frame's
/// key shared by every frame, every datagram as long as the first but the last (which may be
/// shorter; a longer one starts a new run), at most [`MAX_GSO_SEGMENTS`] datagrams and
/// [`MAX_GSO_PAYLOAD`] bytes, and datagrams shorter than `max_segment`. 0 when the first frame
/// cannot be in a run; 1 is a run not worth a segmented send.
pub(crate) fn run_len(routes: &[Route], max_segment: usize) -> usize {
    let Some((key, segment)) = routes.first().and_then(Route::run_key) else {
        return 0;
    };
    if segment >= max_segment || segment > MAX_GSO_PAYLOAD {
        return 0;
    }
    let mut count = 1;
    let mut bytes = segment;
    for route in routes.iter().skip(1).take(MAX_RUN - 1) {
        let Some((k, len)) = route.run_key() else {
            break;
        };
        if k != key || len > segment || bytes + len > MAX_GSO_PAYLOAD {
            break;
        }
        count += 1;
        bytes += len;
        if len < segment {
            break; // A shorter datagram can only be the last.
        }
    }
    count
}

/// The burst cut into sends, in order: `(frames, true)` for a segmented run, `(frames,
/// false)` for one frame on another path. (`transmit` walks the burst the same way, cutting
/// on the fly.)
#[cfg(test)]
pub(crate) fn runs(
    routes: &[Route],
    max_segment: usize,
) -> impl Iterator<Item = (std::ops::Range<usize>, bool)> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        let rest = routes.get(at..).filter(|r| !r.is_empty())?;
        let n = run_len(rest, max_segment);
        let (len, segmented) = if n >= 2 { (n, true) } else { (1, false) };
        let range = at..at + len;
        at += len;
        Some((range, segmented))
    })
}

/// The iovecs of one segmented send and the VXLAN header they all start with.
pub(crate) struct SmallGsoScratch {
    header: [u8; VXLAN_HEADER_LEN],
    iov: IoVecStore,
    /// Datagrams at least this long are not sent segmented: the kernel refused one (`EINVAL`:
    /// a segment too large for the route's MTU).
    pub(crate) max_segment: usize,
}

impl SmallGsoScratch {
    pub(crate) fn new(vni: Vni) -> SmallGsoScratch {
        let mut header = [0; VXLAN_HEADER_LEN];
        // The buffer is exactly a header long: this cannot fail.
        let _ = vxlan::emit(vni, &mut header);
        SmallGsoScratch {
            header,
            iov: IoVecStore::with_capacity(DATAGRAM_IOVECS * MAX_RUN),
            max_segment: usize::MAX,
        }
    }
}

/// How a segmented send of a run went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunSent {
    /// Every datagram went (or was refused with an error and counted).
    Done,
    /// The socket buffer is full: nothing went; the caller stops the burst here.
    Full,
    /// The kernel refused the segmentation itself: send the run another way.
    Refused,
}

impl VxlanTx {
    /// Sends `frames` (a run found by [`run_len`], frame `first` of `burst` on) as one
    /// `sendmsg` with `UDP_SEGMENT`. A segmented send is all or nothing: the kernel builds
    /// the whole buffer before it cuts it.
    pub(crate) fn send_small_run(
        &mut self,
        frames: &[TxFrame<'_>],
        burst: &Burst,
        first: usize,
    ) -> RunSent {
        let key = burst.routes.get(first).and_then(Route::run_key);
        let Some(((remote, socket), segment)) = key else {
            return RunSent::Refused;
        };
        let Some(fd) = self.gso.get(socket).map(|g| g.0.as_fd()) else {
            return RunSent::Refused;
        };
        let Ok(gso_size) = u16::try_from(segment) else {
            return RunSent::Refused;
        };
        let s = &mut self.small;
        let mut iov = s.iov.start();
        for (i, frame) in frames.iter().enumerate() {
            iov.extend(&burst.iovecs(first + i, frame, IoVec::new(&s.header)));
        }
        let to = SockAddr::new(SocketAddr::new(remote, self.remote_port));
        let datagrams = u64::try_from(frames.len()).unwrap_or(u64::MAX);
        match send_segmented(fd, &to, iov.as_slice(), Some(gso_size)) {
            Ok(_) => {
                self.stats.tx(datagrams, datagrams);
                self.stats.tx_small_gso(datagrams);
                RunSent::Done
            }
            Err(e) if socket_full(&e) => RunSent::Full,
            Err(e) => match e.raw_os_error() {
                // The route's device cannot take UDP GSO (no checksum offload): never again,
                // as `tx_super` does.
                Some(libc::EIO) => {
                    self.gso_refused = true;
                    RunSent::Refused
                }
                // A segment the route's MTU cannot take: not this size or larger again.
                Some(libc::EINVAL) => {
                    s.max_segment = s.max_segment.min(segment);
                    RunSent::Refused
                }
                // No route and the like: the raw path would have failed each datagram.
                _ => {
                    self.stats.tx_error(datagrams);
                    RunSent::Done
                }
            },
        }
    }
}
