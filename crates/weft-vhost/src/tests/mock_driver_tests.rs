//! The port's two halves against rings an independent driver builds and reads: rust-vmm
//! `virtio-queue`'s mock (`MockSplitQueue`). Every other test drives the port with our own
//! driver (`testutil::GuestRing`), written beside the device; a misreading of the virtio
//! spec the two shared would pass those tests and shows here.
//!
//! Quirks of the mock (virtio-queue 0.18) the rig works around:
//! - Its used ring starts `size` bytes after the available ring's entries, not `2 × size`
//!   (`SplitQueueRing::end` adds the element count, not bytes): the used ring lies over
//!   the upper half of the available ring and over `used_event`. A ring here makes at most
//!   [`Driver::avail_room`] chains available, the entries below the overlap (the mock never
//!   wraps its available ring either).
//! - `build_chain`, under `add_chain` and `add_indirect_chain`, always starts at
//!   descriptor 0 and uses fixed buffers (0x1000 bytes at [`MOCK_BUFFER`]): descriptor 0 is
//!   left to it, and the chains written through `add_desc_chains` start at descriptor 1.
//!   Every mock puts its first indirect table at [`MOCK_INDIRECT`]: only one ring of a
//!   rig uses `add_indirect_chain`.
//! - It knows nothing of `EVENT_IDX` or `IN_ORDER`: neither is negotiated unless a test
//!   says so.

use std::sync::Arc;

use virtio_bindings::bindings::virtio_config::VIRTIO_F_IN_ORDER;
use virtio_bindings::bindings::virtio_ring::VIRTIO_RING_F_EVENT_IDX;
use virtio_queue::desc::split::Descriptor as SplitDescriptor;
use virtio_queue::desc::RawDescriptor;
use virtio_queue::mock::MockSplitQueue;
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};
use weft_packet::{OffloadInfo, VirtioNetHeader};
use weft_switch::{PortRx, PortTx, RxBatch, TxFrame};

use crate::config::VhostPortConfig;
use crate::counters::{QueueFault, QueueStats};
use crate::device::{DeviceShared, LaneShare, RingStart};
use crate::features::Features;
use crate::rx::VhostPortRx;
use crate::tests::testutil::{all_features, ether_frame, NEXT, WRITE};
use crate::tx::VhostPortTx;
use crate::vring::{RingLayout, RX_QUEUE, TX_QUEUE};

mod budget;
mod dirty_log;
mod malformed;
mod traffic;
mod tso;

/// Descriptors per ring.
const SIZE: u16 = 256;
/// Guest memory from address 0.
const LOW_MEM: u64 = 16 << 20;
/// Where the mock puts its indirect tables: a second memory region.
const MOCK_INDIRECT: u64 = 0x3000_0000;
const INDIRECT_MEM: u64 = 1 << 20;
/// An address in neither region.
const UNMAPPED: u64 = 0x2000_0000;
/// The buffer every descriptor `build_chain` writes points at, and its length.
const MOCK_BUFFER: u64 = 0x1000;
const MOCK_BUFFER_LEN: usize = 0x1000;
/// The guest's receive and transmit rings, and their buffer areas.
const RXQ_RING: u64 = 0x10_0000;
const TXQ_RING: u64 = 0x20_0000;
const RXQ_DATA: u64 = 0x40_0000;
const TXQ_DATA: u64 = 0x80_0000;
const DATA_LEN: u64 = 0x40_0000;
/// A virtio-net header asking for nothing.
const HDR0: [u8; 12] = [0; 12];

fn guest_memory() -> GuestMemoryMmap {
    let len = |l: u64| usize::try_from(l).unwrap();
    GuestMemoryMmap::from_ranges(&[
        (GuestAddress(0), len(LOW_MEM)),
        (GuestAddress(MOCK_INDIRECT), len(INDIRECT_MEM)),
    ])
    .unwrap()
}

/// What the mock driver accepts: everything the port offers but `EVENT_IDX` and
/// `IN_ORDER`, then `add` and not `remove`.
fn features(add: &[u32], remove: &[u32]) -> Features {
    let offered = all_features(&VhostPortConfig::default()).0;
    let mut f = offered & !(1 << VIRTIO_RING_F_EVENT_IDX) & !(1 << VIRTIO_F_IN_ORDER);
    for bit in add {
        assert!(offered & (1 << bit) != 0, "bit {bit} is not offered");
        f |= 1 << bit;
    }
    for bit in remove {
        f &= !(1 << bit);
    }
    Features(f)
}

/// The features of [`features`], with or without `EVENT_IDX`.
fn with_event_idx(event_idx: bool) -> Features {
    let add: &[u32] = if event_idx {
        &[VIRTIO_RING_F_EVENT_IDX]
    } else {
        &[]
    };
    features(add, &[])
}

fn header_of(bytes: &[u8]) -> VirtioNetHeader<[u8; 12]> {
    VirtioNetHeader::new_unchecked(bytes[..12].try_into().unwrap())
}

/// The driver side of one queue: the mock, the next free descriptor and the used entries
/// read so far.
struct Driver<'m> {
    mem: &'m GuestMemoryMmap,
    mock: MockSplitQueue<'m, GuestMemoryMmap>,
    next_desc: u16,
    used_seen: u16,
    data: u64,
    data_next: u64,
}

impl<'m> Driver<'m> {
    fn new(mem: &'m GuestMemoryMmap, ring: u64, data: u64) -> Self {
        Driver {
            mem,
            mock: MockSplitQueue::create(mem, GuestAddress(ring), SIZE),
            next_desc: 1,
            used_seen: 0,
            data,
            data_next: 0,
        }
    }

    /// Where the port finds the mock's rings.
    fn layout(&self) -> RingLayout {
        RingLayout {
            size: SIZE,
            desc: self.mock.desc_table_addr(),
            avail: self.mock.avail_addr(),
            used: self.mock.used_addr(),
            base: 0,
        }
    }

    /// Available-ring entries below the mock's used ring (see the module documentation).
    fn avail_room(&self) -> u16 {
        let entries = self.mock.avail_addr().0 + 4;
        let room = (self.mock.used_addr().0 - entries) / 2;
        u16::try_from(room).unwrap().min(SIZE)
    }

    fn avail_idx(&self) -> u16 {
        self.mock.avail().idx().load()
    }

    /// Writes `bytes` into this queue's buffer area; their address.
    fn write(&mut self, bytes: &[u8]) -> u64 {
        let at = self.alloc(bytes.len());
        self.mem.write_slice(bytes, GuestAddress(at)).unwrap();
        at
    }

    /// Room for `len` bytes in this queue's buffer area.
    fn alloc(&mut self, len: usize) -> u64 {
        let len = u64::try_from(len).unwrap();
        assert!(self.data_next + len <= DATA_LEN, "buffer area used up");
        let at = self.data + self.data_next;
        self.data_next += len.next_multiple_of(64);
        at
    }

    /// The index the next descriptor written goes to.
    fn next_desc(&self) -> u16 {
        self.next_desc
    }

    /// Writes `descs` as they are from the next free descriptor on, with the mock's
    /// `add_desc_chains` (which makes each descriptor not following a NEXT one a chain
    /// head, available in order).
    fn add_raw(&mut self, descs: &[SplitDescriptor]) {
        let raw: Vec<RawDescriptor> = descs.iter().copied().map(RawDescriptor::from).collect();
        self.mock.add_desc_chains(&raw, self.next_desc).unwrap();
        self.next_desc += u16::try_from(descs.len()).unwrap();
        assert!(
            self.avail_idx() <= self.avail_room(),
            "past the mock's used ring"
        );
    }

    /// Makes each chain of buffers `(addr, len, flags)` available (NEXT and `next` filled
    /// in), in order; their heads.
    fn add_chains(&mut self, chains: &[Vec<(u64, u32, u16)>]) -> Vec<u16> {
        let mut descs = Vec::new();
        let mut heads = Vec::new();
        for chain in chains {
            heads.push(self.next_desc + u16::try_from(descs.len()).unwrap());
            for (i, &(addr, len, flags)) in chain.iter().enumerate() {
                let index = self.next_desc + u16::try_from(descs.len()).unwrap();
                descs.push(if i + 1 < chain.len() {
                    SplitDescriptor::new(addr, len, flags | NEXT, index + 1)
                } else {
                    SplitDescriptor::new(addr, len, flags, 0)
                });
            }
        }
        self.add_raw(&descs);
        heads
    }

    /// The mock's own indirect chain of `len` read-only descriptors (each [`MOCK_BUFFER`],
    /// linked by NEXT) in a table at [`MOCK_INDIRECT`]; its head (always 0).
    fn add_mock_indirect(&mut self, len: u16) -> u16 {
        self.mock.add_indirect_chain(len).unwrap();
        let head = self.avail_idx() - 1;
        let head = self
            .mock
            .avail()
            .ring()
            .ref_at(usize::from(head))
            .unwrap()
            .load();
        let d = self.desc(head);
        assert_eq!(head, 0);
        assert_eq!((d.addr().0, d.len()), (MOCK_INDIRECT, 16 * u32::from(len)));
        assert!(self.avail_idx() <= self.avail_room());
        head
    }

    /// Descriptor `index` of the table.
    fn desc(&self, index: u16) -> SplitDescriptor {
        SplitDescriptor::from(self.mock.desc_table().load(index).unwrap())
    }

    /// The guest sends `header` + `frame`, in buffers of the `split` sizes and one more for
    /// the rest; the chain's head.
    fn send(&mut self, header: &[u8], frame: &[u8], split: &[usize]) -> u16 {
        let bytes = [header, frame].concat();
        let mut rest = &bytes[..];
        let mut bufs = Vec::new();
        for piece in split.iter().map(Some).chain([None]) {
            let (now, later) = rest.split_at(piece.map_or(rest.len(), |n| (*n).min(rest.len())));
            if !now.is_empty() {
                bufs.push((self.write(now), u32::try_from(now.len()).unwrap(), 0));
            }
            rest = later;
        }
        self.add_chains(&[bufs])[0]
    }

    /// Posts one receive chain of write-only buffers of `lens` bytes; its head.
    fn post(&mut self, lens: &[u32]) -> u16 {
        let bufs = lens
            .iter()
            .map(|len| (self.alloc(usize::try_from(*len).unwrap()), *len, WRITE))
            .collect();
        self.add_chains(&[bufs])[0]
    }

    /// Posts `count` receive chains of one `len`-byte buffer; their heads.
    fn post_each(&mut self, count: usize, len: u32) -> Vec<u16> {
        let chains: Vec<_> = (0..count)
            .map(|_| vec![(self.alloc(usize::try_from(len).unwrap()), len, WRITE)])
            .collect();
        self.add_chains(&chains)
    }

    /// Used elements `(id, len)` the device added since the last call, read with the
    /// mock's accessors.
    fn used(&mut self) -> Vec<(u32, u32)> {
        let idx = self.mock.used().idx().load();
        let mut out = Vec::new();
        while self.used_seen != idx {
            let slot = usize::from(self.used_seen % SIZE);
            let elem = self.mock.used().ring().ref_at(slot).unwrap().load();
            out.push((elem.id(), elem.len()));
            self.used_seen = self.used_seen.wrapping_add(1);
        }
        out
    }

    /// The bytes of used elements `used`, one after the other (a mergeable frame whole).
    fn read_used(&self, used: &[(u32, u32)]) -> Vec<u8> {
        used.iter()
            .flat_map(|(id, len)| self.read_chain(*id, *len))
            .collect()
    }

    /// The first `len` bytes of the chain at `head`, direct or indirect.
    fn read_chain(&self, head: u32, len: u32) -> Vec<u8> {
        let len = usize::try_from(len).unwrap();
        let mut d = self.desc(u16::try_from(head).unwrap());
        let mut indirect = None;
        if d.refers_to_indirect_table() {
            indirect = Some(d.addr());
            d = self.mem.read_obj(d.addr()).unwrap();
        }
        let mut out = Vec::new();
        loop {
            let take = usize::try_from(d.len()).unwrap().min(len - out.len());
            let mut part = vec![0u8; take];
            self.mem.read_slice(&mut part, d.addr()).unwrap();
            out.extend(part);
            if out.len() == len || !d.has_next() {
                break;
            }
            d = match indirect {
                Some(table) => {
                    let at = table.0 + 16 * u64::from(d.next());
                    self.mem.read_obj(GuestAddress(at)).unwrap()
                }
                None => self.desc(d.next()),
            };
        }
        assert_eq!(
            out.len(),
            len,
            "chain {head} holds less than its used length"
        );
        out
    }
}

/// A port whose two rings are driven by the mock.
struct MockRig<'m> {
    dev: Arc<DeviceShared>,
    rx: VhostPortRx,
    tx: VhostPortTx,
    /// The guest's receive queue (the port transmits into it).
    rxq: Driver<'m>,
    /// The guest's transmit queue (the port receives from it).
    txq: Driver<'m>,
    /// Interrupts toward the guest on its receive queue.
    rx_call: EventFd,
    _tx_call: EventFd,
    _tx_kick: EventFd,
}

impl<'m> MockRig<'m> {
    fn new(mem: &'m GuestMemoryMmap, features: Features) -> Self {
        Self::logged(mem, features, None)
    }

    /// As [`MockRig::new`], both rings logging into `log` (their used rings included)
    /// when given: a live migration in progress.
    fn logged(
        mem: &'m GuestMemoryMmap,
        features: Features,
        log: Option<Arc<crate::memory::DirtyLog>>,
    ) -> Self {
        let counters = Arc::new(crate::memory::LogCounters::default());
        let rxq = Driver::new(mem, RXQ_RING, RXQ_DATA);
        let txq = Driver::new(mem, TXQ_RING, TXQ_DATA);
        let dev = DeviceShared::new(VhostPortConfig::default()).unwrap();
        dev.set_features(features);
        let shared = Arc::new(crate::memory::GuardedMemory::unguarded(mem.clone()));
        let rx_call = EventFd::new(EFD_NONBLOCK).unwrap();
        let tx_call = EventFd::new(EFD_NONBLOCK).unwrap();
        let tx_kick = EventFd::new(EFD_NONBLOCK).unwrap();
        for (index, driver, call, kick) in [
            (RX_QUEUE, &rxq, &rx_call, None),
            (TX_QUEUE, &txq, &tx_call, Some(&tx_kick)),
        ] {
            dev.start_ring(
                index,
                RingStart {
                    mem: Arc::clone(&shared),
                    layout: driver.layout(),
                    features,
                    enabled: true,
                    kick: kick.map(|k| k.try_clone().unwrap()),
                    call: Some(call.try_clone().unwrap()),
                },
                log.as_ref().map(|log| crate::memory::RingLog {
                    log: Arc::clone(log),
                    used: Some(driver.layout().used.0),
                    counters: Arc::clone(&counters),
                }),
            )
            .unwrap();
        }
        let rx = VhostPortRx::new(Arc::clone(&dev), LaneShare::WHOLE).unwrap();
        let tx = VhostPortTx::new(Arc::clone(&dev), LaneShare::WHOLE);
        MockRig {
            dev,
            rx,
            tx,
            rxq,
            txq,
            rx_call,
            _tx_call: tx_call,
            _tx_kick: tx_kick,
        }
    }

    /// One receive and its `finish`: the frames the switch saw, copied, with their offload
    /// state.
    fn receive(&mut self) -> Vec<(Vec<u8>, OffloadInfo)> {
        let mut batch = RxBatch::new(64);
        self.rx.receive(&mut batch);
        let frames = batch
            .descs()
            .iter()
            .map(|d| (self.rx.frame(d.handle).to_vec(), d.offload))
            .collect();
        self.rx.finish();
        frames
    }

    /// Transmits `frames` without offloads; how many the port took.
    fn transmit(&mut self, frames: &[&[u8]]) -> usize {
        let frames: Vec<TxFrame<'_>> = frames
            .iter()
            .map(|f| TxFrame::whole(f, OffloadInfo::default()))
            .collect();
        self.tx.transmit(&frames)
    }

    fn stats_from_guest(&self) -> QueueStats {
        self.dev.tx_vring().counters.snapshot()
    }

    fn stats_to_guest(&self) -> QueueStats {
        self.dev.rx_vring().counters.snapshot()
    }

    fn fault_from_guest(&self) -> Option<QueueFault> {
        self.dev.tx_vring().lock().fault
    }

    fn fault_to_guest(&self) -> Option<QueueFault> {
        self.dev.rx_vring().lock().fault
    }

    /// A frame the guest sends reaches the switch byte for byte and its chain comes back.
    fn assert_guest_to_switch_works(&mut self, seed: u8, context: &str) {
        let f = ether_frame(1, 2, 200, seed);
        let head = self.txq.send(&HDR0, &f, &[]);
        let got = self.receive();
        assert_eq!(got.len(), 1, "{context}");
        assert_eq!(got[0].0, f, "{context}");
        assert_eq!(self.txq.used(), vec![(u32::from(head), 0)], "{context}");
    }

    /// A frame the switch sends lands byte for byte in a buffer the guest posts.
    fn assert_switch_to_guest_works(&mut self, seed: u8, context: &str) {
        let f = ether_frame(2, 1, 200, seed);
        let head = self.rxq.post(&[2048]);
        assert_eq!(self.transmit(&[&f]), 1, "{context}");
        let used = self.rxq.used();
        assert_eq!(used, vec![(u32::from(head), 12 + 200)], "{context}");
        let got = self.rxq.read_chain(used[0].0, used[0].1);
        assert_eq!(&got[12..], &f[..], "{context}");
    }
}
