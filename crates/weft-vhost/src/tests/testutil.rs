//! Test helpers: memfds, a guest-side driver over a split ring, and a port wired to two
//! such rings without a socket.

use std::fs::File;
use std::sync::Arc;

use nix::sys::memfd::{memfd_create, MFdFlags};
use virtio_bindings::bindings::virtio_ring::{
    VRING_DESC_F_INDIRECT, VRING_DESC_F_NEXT, VRING_DESC_F_WRITE,
};
use virtio_queue::desc::split::Descriptor;
use vm_memory::{Address, Bytes, GuestAddress, GuestMemoryMmap};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

use crate::config::VhostPortConfig;
use crate::device::{DeviceShared, LaneShare, RingStart};
use crate::features::{offered_features, Features};
use crate::rx::VhostPortRx;
use crate::tx::VhostPortTx;
use crate::vring::RingLayout;

/// An anonymous memory file of `len` bytes.
pub(crate) fn memfd(len: u64) -> File {
    let file = File::from(memfd_create("weft-test", MFdFlags::MFD_CLOEXEC).unwrap());
    file.set_len(len).unwrap();
    file
}

/// Size of the test guest's memory.
pub(crate) const GUEST_MEM: u64 = 8 << 20;
/// A descriptor flag bit as the u16 a descriptor holds (the flags are 1, 2 and 4).
#[allow(clippy::cast_possible_truncation)]
pub(crate) const fn desc_flag(bit: u32) -> u16 {
    bit as u16
}
pub(crate) const NEXT: u16 = desc_flag(VRING_DESC_F_NEXT);
pub(crate) const WRITE: u16 = desc_flag(VRING_DESC_F_WRITE);
pub(crate) const INDIRECT: u16 = desc_flag(VRING_DESC_F_INDIRECT);

/// The driver side of one split ring, in test guest memory.
pub(crate) struct GuestRing {
    pub(crate) mem: GuestMemoryMmap,
    pub(crate) size: u16,
    pub(crate) desc: GuestAddress,
    pub(crate) avail: GuestAddress,
    pub(crate) used: GuestAddress,
    next_desc: u16,
    avail_idx: u16,
    used_seen: u16,
    data: GuestAddress,
    data_len: u64,
    data_next: u64,
}

impl GuestRing {
    /// A ring of `size` at `base`, with a buffer area of `data_len` bytes at `data`.
    pub(crate) fn new(
        mem: GuestMemoryMmap,
        size: u16,
        base: u64,
        data: u64,
        data_len: u64,
    ) -> Self {
        let n = u64::from(size);
        let RingLayout {
            desc, avail, used, ..
        } = RingLayout::contiguous(base, size);
        // Zero the rings (used_event/avail_event included).
        let zeros = vec![0u8; usize::try_from(16 * n + 16 + 10 * n + 16).unwrap()];
        mem.write_slice(&zeros, desc).unwrap();
        GuestRing {
            mem,
            size,
            desc,
            avail,
            used,
            next_desc: 0,
            avail_idx: 0,
            used_seen: 0,
            data: GuestAddress(data),
            data_len,
            data_next: 0,
        }
    }

    pub(crate) fn layout(&self) -> RingLayout {
        RingLayout {
            size: self.size,
            desc: self.desc,
            avail: self.avail,
            used: self.used,
            base: 0,
        }
    }

    /// Room for `len` bytes in the buffer area (wrapping).
    pub(crate) fn alloc(&mut self, len: u64) -> u64 {
        if self.data_next + len > self.data_len {
            self.data_next = 0;
        }
        let addr = self.data.0 + self.data_next;
        self.data_next += (len + 63) & !63;
        addr
    }

    /// Writes descriptor `index` as given.
    pub(crate) fn set_desc(&self, index: u16, addr: u64, len: u32, flags: u16, next: u16) {
        let d = Descriptor::new(addr, len, flags, next);
        self.mem
            .write_obj(d, self.desc.unchecked_add(u64::from(index) * 16))
            .unwrap();
    }

    /// Makes `head` available.
    pub(crate) fn publish(&mut self, head: u16) {
        let slot = u64::from(self.avail_idx % self.size);
        self.mem
            .write_obj(head.to_le(), self.avail.unchecked_add(4 + 2 * slot))
            .unwrap();
        self.avail_idx = self.avail_idx.wrapping_add(1);
        self.mem
            .write_obj(self.avail_idx.to_le(), self.avail.unchecked_add(2))
            .unwrap();
    }

    /// Sets the avail index as a broken driver might.
    pub(crate) fn set_avail_idx(&mut self, idx: u16) {
        self.avail_idx = idx;
        self.mem
            .write_obj(idx.to_le(), self.avail.unchecked_add(2))
            .unwrap();
    }

    /// Adds a chain of buffers `(addr, len, writable)`; returns its head.
    pub(crate) fn add_chain(&mut self, bufs: &[(u64, u32, bool)]) -> u16 {
        let head = self.next_desc;
        let n = u16::try_from(bufs.len()).unwrap();
        for (i, (addr, len, writable)) in bufs.iter().enumerate() {
            let i = u16::try_from(i).unwrap();
            let index = (head + i) % self.size;
            let last = i + 1 == n;
            let mut flags = if last { 0 } else { NEXT };
            if *writable {
                flags |= WRITE;
            }
            self.set_desc(index, *addr, *len, flags, (index + 1) % self.size);
        }
        self.next_desc = (head + n) % self.size;
        self.publish(head);
        head
    }

    /// The guest sends `header` + `frame`, split into buffers of `split` bytes (the rest in
    /// a last buffer). Returns the head.
    pub(crate) fn send(&mut self, header: &[u8], frame: &[u8], split: &[usize]) -> u16 {
        let bytes: Vec<u8> = header.iter().chain(frame).copied().collect();
        let mut bufs = Vec::new();
        let mut at = 0;
        for s in split.iter().copied().chain(std::iter::once(usize::MAX)) {
            let end = at + s.min(bytes.len() - at);
            let part = &bytes[at..end];
            if part.is_empty() && !bufs.is_empty() {
                break;
            }
            let addr = self.alloc(part.len() as u64);
            self.mem.write_slice(part, GuestAddress(addr)).unwrap();
            bufs.push((addr, u32::try_from(part.len()).unwrap(), false));
            at = end;
            if at == bytes.len() {
                break;
            }
        }
        self.add_chain(&bufs)
    }

    /// Posts `count` receive buffers of `len` bytes, one descriptor each.
    pub(crate) fn post_rx(&mut self, count: usize, len: u32) -> Vec<u16> {
        (0..count)
            .map(|_| {
                let addr = self.alloc(u64::from(len));
                self.add_chain(&[(addr, len, true)])
            })
            .collect()
    }

    /// Used entries added since the last call: `(id, len)`.
    pub(crate) fn take_used(&mut self) -> Vec<(u32, u32)> {
        let idx: u16 = u16::from_le(self.mem.read_obj(self.used.unchecked_add(2)).unwrap());
        let mut out = Vec::new();
        while self.used_seen != idx {
            let slot = u64::from(self.used_seen % self.size);
            let at = self.used.unchecked_add(4 + 8 * slot);
            let id: u32 = u32::from_le(self.mem.read_obj(at).unwrap());
            let len: u32 = u32::from_le(self.mem.read_obj(at.unchecked_add(4)).unwrap());
            out.push((id, len));
            self.used_seen = self.used_seen.wrapping_add(1);
        }
        out
    }

    /// The bytes the device wrote into the receive chain with head `id` (single buffer).
    pub(crate) fn read_rx(&self, id: u32, len: u32) -> Vec<u8> {
        let d: Descriptor = self
            .mem
            .read_obj(self.desc.unchecked_add(u64::from(id) * 16))
            .unwrap();
        let mut out = vec![0u8; len as usize];
        self.mem.read_slice(&mut out, d.addr()).unwrap();
        out
    }

    /// Sets the used ring flags / avail flags word the driver writes.
    pub(crate) fn set_avail_flags(&self, flags: u16) {
        self.mem.write_obj(flags.to_le(), self.avail).unwrap();
    }

    /// Sets `used_event` (EVENT_IDX).
    pub(crate) fn set_used_event(&self, value: u16) {
        let at = self.avail.unchecked_add(4 + 2 * u64::from(self.size));
        self.mem.write_obj(value.to_le(), at).unwrap();
    }

    /// The device's `avail_event` (EVENT_IDX).
    pub(crate) fn avail_event(&self) -> u16 {
        let at = self.used.unchecked_add(4 + 8 * u64::from(self.size));
        u16::from_le(self.mem.read_obj(at).unwrap())
    }

    /// The driver's available index.
    pub(crate) fn avail_idx(&self) -> u16 {
        self.avail_idx
    }

    /// Whether a driver that moved its available index from `old` must kick, by the
    /// device's suppression: `avail_event` with EVENT_IDX, the NO_NOTIFY flag otherwise
    /// (as Linux's `virtqueue_kick_prepare`).
    pub(crate) fn must_kick(&self, old: u16, event_idx: bool) -> bool {
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        let new = self.avail_idx;
        if event_idx {
            let event = self.avail_event();
            new.wrapping_sub(event).wrapping_sub(1) < new.wrapping_sub(old)
        } else {
            self.used_flags() & 1 == 0
        }
    }

    /// The used ring's flags word (NO_NOTIFY).
    pub(crate) fn used_flags(&self) -> u16 {
        u16::from_le(self.mem.read_obj(self.used).unwrap())
    }

    /// Overwrites the used ring's flags word (as only the device should).
    pub(crate) fn set_used_flags(&self, flags: u16) {
        self.mem.write_obj(flags.to_le(), self.used).unwrap();
    }
}

/// A port whose two rings are driven by the test, without a socket.
pub(crate) struct Rig {
    pub(crate) dev: Arc<DeviceShared>,
    /// The guest's receive queue (the port transmits into it).
    pub(crate) rxq: GuestRing,
    /// The guest's transmit queue (the port receives from it).
    pub(crate) txq: GuestRing,
    /// Interrupts toward the guest, per queue.
    pub(crate) rx_call: EventFd,
    pub(crate) tx_call: EventFd,
    /// The guest's kick of its transmit queue.
    pub(crate) tx_kick: EventFd,
    /// Pairs 1.. when the config has several queue pairs (`more[k - 1]` is pair `k`).
    pub(crate) more: Vec<GuestPair>,
}

/// The driver side of one more queue pair.
pub(crate) struct GuestPair {
    pub(crate) rxq: GuestRing,
    pub(crate) txq: GuestRing,
    pub(crate) rx_call: EventFd,
    pub(crate) tx_call: EventFd,
    pub(crate) tx_kick: EventFd,
}

impl GuestPair {
    /// Starts pair `k`'s rings (`rxq` the guest's receive queue, `txq` its transmit queue) on
    /// `dev`, each with a fresh call eventfd and the transmit queue with a kick, and forgets
    /// the wake-up the start wrote.
    fn start(
        dev: &DeviceShared,
        mem: &Arc<crate::memory::GuardedMemory>,
        features: Features,
        k: usize,
        rxq: GuestRing,
        txq: GuestRing,
    ) -> GuestPair {
        let pair = GuestPair {
            rxq,
            txq,
            rx_call: EventFd::new(EFD_NONBLOCK).unwrap(),
            tx_call: EventFd::new(EFD_NONBLOCK).unwrap(),
            tx_kick: EventFd::new(EFD_NONBLOCK).unwrap(),
        };
        for (index, ring, call, kick) in [
            (2 * k, &pair.rxq, &pair.rx_call, None),
            (2 * k + 1, &pair.txq, &pair.tx_call, Some(&pair.tx_kick)),
        ] {
            dev.start_ring(
                index,
                RingStart {
                    mem: Arc::clone(mem),
                    layout: ring.layout(),
                    features,
                    enabled: true,
                    kick: kick.map(|k| k.try_clone().unwrap()),
                    call: Some(call.try_clone().unwrap()),
                },
                None,
            )
            .unwrap();
        }
        let _ = pair.tx_kick.read();
        pair
    }
}

/// Guest memory each pair beyond the first adds (rings and buffers).
const PAIR_MEM: u64 = 1 << 20;

/// Features a Linux guest typically accepts from us.
pub(crate) fn all_features(config: &VhostPortConfig) -> Features {
    Features(offered_features(config))
}

impl Rig {
    pub(crate) fn new(
        config: VhostPortConfig,
        features: Features,
        size: u16,
    ) -> (Rig, VhostPortRx, VhostPortTx) {
        let extra = u64::from(config.queue_pairs.saturating_sub(1));
        let mem = GuestMemoryMmap::<()>::from_ranges(&[(
            GuestAddress(0),
            usize::try_from(GUEST_MEM + extra * PAIR_MEM).unwrap(),
        )])
        .unwrap();
        let dev = DeviceShared::new(config).unwrap();
        dev.set_features(features);
        let shared_mem = Arc::new(crate::memory::GuardedMemory::unguarded(mem));
        let first = GuestPair::start(
            &dev,
            &shared_mem,
            features,
            0,
            GuestRing::new(
                shared_mem.memory().clone(),
                size,
                0x1000,
                0x10_0000,
                0x30_0000,
            ),
            GuestRing::new(
                shared_mem.memory().clone(),
                size,
                0x8_0000,
                0x40_0000,
                0x30_0000,
            ),
        );
        let GuestPair {
            rxq,
            txq,
            rx_call,
            tx_call,
            tx_kick,
        } = first;
        let more = (1..=extra)
            .map(|k| {
                let base = GUEST_MEM + (k - 1) * PAIR_MEM;
                let ring = |desc: u64, avail: u64| {
                    GuestRing::new(shared_mem.memory().clone(), size, desc, avail, 0x7_0000)
                };
                GuestPair::start(
                    &dev,
                    &shared_mem,
                    features,
                    usize::try_from(k).unwrap(),
                    ring(base, base + 0x2_0000),
                    ring(base + 0x1_0000, base + 0x9_0000),
                )
            })
            .collect();
        let rx = VhostPortRx::new(Arc::clone(&dev), LaneShare::WHOLE).unwrap();
        let tx = VhostPortTx::new(Arc::clone(&dev), LaneShare::WHOLE);
        (
            Rig {
                dev,
                rxq,
                txq,
                rx_call,
                tx_call,
                tx_kick,
                more,
            },
            rx,
            tx,
        )
    }

    /// Halves for each of `lanes` lanes (`LaneShare`), beside the whole-port ones `new`
    /// returned.
    pub(crate) fn lane_halves(&self, lanes: usize) -> Vec<(VhostPortRx, VhostPortTx)> {
        (0..lanes)
            .map(|index| {
                let lane = LaneShare { index, lanes };
                (
                    VhostPortRx::new(Arc::clone(&self.dev), lane).unwrap(),
                    VhostPortTx::new(Arc::clone(&self.dev), lane),
                )
            })
            .collect()
    }

    /// Pair `k`'s receive queue (the port transmits into it).
    pub(crate) fn rxq_of(&mut self, k: usize) -> &mut GuestRing {
        match k {
            0 => &mut self.rxq,
            _ => &mut self.more[k - 1].rxq,
        }
    }

    /// Pair `k`'s transmit queue (the port receives from it).
    pub(crate) fn txq_of(&mut self, k: usize) -> &mut GuestRing {
        match k {
            0 => &mut self.txq,
            _ => &mut self.more[k - 1].txq,
        }
    }

    /// Pair `k`'s counters: (to the guest, from the guest).
    pub(crate) fn pair_stats(
        &self,
        k: usize,
    ) -> (crate::counters::QueueStats, crate::counters::QueueStats) {
        (
            self.dev.rx_vring_of(k).unwrap().counters.snapshot(),
            self.dev.tx_vring_of(k).unwrap().counters.snapshot(),
        )
    }

    pub(crate) fn stats_to_guest(&self) -> crate::counters::QueueStats {
        self.dev.rx_vring().counters.snapshot()
    }

    pub(crate) fn stats_from_guest(&self) -> crate::counters::QueueStats {
        self.dev.tx_vring().counters.snapshot()
    }

    pub(crate) fn fault_from_guest(&self) -> Option<crate::counters::QueueFault> {
        self.dev.tx_vring().lock().fault
    }

    pub(crate) fn fault_to_guest(&self) -> Option<crate::counters::QueueFault> {
        self.dev.rx_vring().lock().fault
    }
}

/// An Ethernet frame of `len` bytes (at least 14) from `src` to `dst`, payload a pattern.
pub(crate) fn ether_frame(dst: u8, src: u8, len: usize, seed: u8) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, dst]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, src]);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    let mut v = seed;
    for b in f.iter_mut().skip(14) {
        *b = v;
        v = v.wrapping_add(1);
    }
    f
}

/// True when `fd` is readable now (a zero-timeout poll).
pub(crate) fn readable(fd: std::os::fd::RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    unsafe { libc::poll(&mut p, 1, 0) == 1 }
}

/// A TCP/IPv4 frame with `payload` bytes of data, as a virtio sender hands it over for
/// checksum completion: the TCP checksum field holds the pseudo-header sum.
pub(crate) fn tcp4_frame(payload: usize) -> Vec<u8> {
    let data: Vec<u8> = (0..payload)
        .map(|i| u8::try_from(i % 251).unwrap())
        .collect();
    let mut f = Vec::new();
    etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .tcp(40000, 80, 1000, 1024)
        .ack(1)
        .write(&mut f, &data)
        .unwrap();
    let upper = u16::try_from(f.len() - 34).unwrap();
    let pseudo = weft_packet::checksum::pseudo_header_v4(
        [10, 0, 0, 1].into(),
        [10, 0, 0, 2].into(),
        6,
        upper,
    );
    f[50..52].copy_from_slice(&pseudo.to_be_bytes());
    f
}

/// The offload state of a [`tcp4_frame`]: checksum completion, and with `mss` segmentation.
pub(crate) fn tcp4_offload(mss: Option<u16>) -> weft_packet::OffloadInfo {
    weft_packet::OffloadInfo {
        needs_csum: true,
        csum_start: 34,
        csum_offset: 16,
        gso: if mss.is_some() {
            weft_packet::GsoKind::TcpV4
        } else {
            weft_packet::GsoKind::None
        },
        gso_size: mss.unwrap_or(0),
        hdr_len: if mss.is_some() { 54 } else { 0 },
        ..weft_packet::OffloadInfo::default()
    }
}

/// A 12-byte virtio-net header with these fields.
pub(crate) fn net_header(
    flag_bits: u8,
    gso: u8,
    hdr_len: u16,
    gso_size: u16,
    start: u16,
    off: u16,
) -> [u8; 12] {
    let mut h = weft_packet::VirtioNetHeader::new_unchecked([0u8; 12]);
    h.set_flags(flag_bits);
    h.set_gso_type(gso);
    h.set_hdr_len(hdr_len);
    h.set_gso_size(gso_size);
    h.set_csum_start(start);
    h.set_csum_offset(off);
    h.into_inner()
}
