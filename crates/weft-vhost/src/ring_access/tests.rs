//! The fast walk against `virtio-queue`'s own: for random descriptor tables, indirect
//! tables and available rings, both yield the same heads and the same descriptors, and end
//! the same chains early.

use proptest::prelude::*;
use virtio_queue::desc::split::Descriptor;
use virtio_queue::{Queue, QueueOwnedT, QueueT};
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

use super::{GuestView, SplitRing};
use crate::counters::QueueFault;
use crate::tests::testutil::{INDIRECT, NEXT, WRITE};

/// Two regions with a hole between them: a buffer or table reaching into the hole is
/// outside guest memory for both walks.
const LOW: (u64, usize) = (0, 0x1_0000);
const HIGH: (u64, usize) = (0x2_0000, 0x1_0000);
const DESC: u64 = 0x1000;
const AVAIL: u64 = 0x3000;
const USED: u64 = 0x4000;
/// Indirect tables live here, one 1 KiB slot each (one in the high region). A table not
/// wholly inside guest memory is refused whole by the fast walk, where `virtio-queue` reads
/// the part inside (`chain::tests` pins that such a chain faults the queue).
const TABLES: [u64; 3] = [0x8000, 0x8400, 0x2_0000];

fn memory() -> GuestMemoryMmap {
    GuestMemoryMmap::from_ranges(&[(GuestAddress(LOW.0), LOW.1), (GuestAddress(HIGH.0), HIGH.1)])
        .unwrap()
}

fn queue(size: u16, next_avail: u16) -> Queue {
    let mut q = Queue::new(256).unwrap();
    q.set_size(size);
    q.set_desc_table_address(Some(u32::try_from(DESC).unwrap()), Some(0));
    q.set_avail_ring_address(Some(u32::try_from(AVAIL).unwrap()), Some(0));
    q.set_used_ring_address(Some(u32::try_from(USED).unwrap()), Some(0));
    q.set_next_avail(next_avail);
    q.set_ready(true);
    q
}

type RawDesc = (u64, u32, u16, u16);

fn raw_desc() -> impl Strategy<Value = RawDesc> {
    let addr = prop_oneof![
        4 => 0x9000..0xf000u64,
        2 => 0x2_0000..0x3_0000u64,
        1 => 0x1_0000..0x2_0000u64,
        1 => Just(u64::MAX - 8),
        2 => proptest::sample::select(TABLES.to_vec()),
    ];
    let len = prop_oneof![
        4 => 1..2048u32,
        2 => (0..20u32).prop_map(|n| n * 16),
        1 => Just(0u32),
        1 => Just(u32::MAX),
    ];
    let flags = prop_oneof![
        4 => Just(NEXT),
        3 => Just(0u16),
        1 => Just(WRITE),
        2 => Just(INDIRECT),
        1 => Just(INDIRECT | NEXT),
        1 => 0u16..8,
    ];
    (addr, len, flags, 0u16..40)
}

fn descriptors(chain: impl Iterator<Item = Descriptor>) -> Vec<RawDesc> {
    // Bounded: a walk that never ended would show as a too-long list.
    chain
        .take(4096)
        .map(|d| (d.addr().0, d.len(), d.flags(), d.next()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn fast_walk_yields_what_virtio_queue_yields(
        size_log in 0u32..=5,
        table in proptest::collection::vec(raw_desc(), 32),
        indirect in proptest::collection::vec(proptest::collection::vec(raw_desc(), 64), 3),
        heads in proptest::collection::vec(0u16..40, 0..40),
        next_avail in any::<u16>(),
    ) {
        let size = 1u16 << size_log;
        let mem = memory();
        for (i, (addr, len, flags, next)) in table.iter().enumerate().take(usize::from(size)) {
            let d = Descriptor::new(*addr, *len, *flags, *next);
            mem.write_obj(d, GuestAddress(DESC + 16 * i as u64)).unwrap();
        }
        for (slot, descs) in TABLES.iter().zip(&indirect) {
            for (i, (addr, len, flags, next)) in descs.iter().enumerate() {
                let d = Descriptor::new(*addr, *len, *flags, *next);
                mem.write_obj(d, GuestAddress(slot + 16 * i as u64)).unwrap();
            }
        }
        let count = heads.len().min(usize::from(size));
        for (k, head) in heads.iter().take(count).enumerate() {
            let pos = next_avail.wrapping_add(u16::try_from(k).unwrap()) % size;
            mem.write_obj(head.to_le(), GuestAddress(AVAIL + 4 + 2 * u64::from(pos))).unwrap();
        }
        let end = next_avail.wrapping_add(u16::try_from(count).unwrap());
        mem.write_obj(end.to_le(), GuestAddress(AVAIL + 2)).unwrap();

        let mut theirs = queue(size, next_avail);
        let expected: Vec<(u16, Vec<RawDesc>)> = theirs
            .iter(&mem)
            .unwrap()
            .map(|chain| (chain.head_index(), descriptors(chain)))
            .collect();

        let q = queue(size, next_avail);
        let view = GuestView::new(&mem);
        let ring = SplitRing::new(&view, &q).unwrap();
        let mut cursor = ring.cursor(next_avail).unwrap();
        let mut got = Vec::new();
        // Prefetching ahead over the same hostile entries (heads past the table, buffers
        // outside memory, indirect flags) must neither fail nor change what is taken.
        let mut distance = 0u16;
        loop {
            distance = distance % 9 + 1;
            ring.prefetch_ahead(&view, &cursor, distance, 76, distance.is_multiple_of(2).then_some(12));
            let Some(head) = cursor.next_head(&ring) else {
                break;
            };
            let chain = ring.chain(&view, head);
            got.push((chain.head_index(), descriptors(chain)));
        }
        prop_assert_eq!(got.len(), expected.len());
        for ((head, ours), (their_head, theirs_descs)) in got.iter().zip(&expected) {
            prop_assert_eq!(head, their_head);
            if ours != theirs_descs {
                // The one intended difference: an indirect table not wholly inside guest
                // memory is refused whole, where virtio-queue reads the part inside.
                prop_assert!(theirs_descs.starts_with(ours), "{:?} vs {:?}", ours, theirs_descs);
                prop_assert!(enters_partial_table(&mem, size, *head));
            }
        }
        prop_assert_eq!(cursor.position(), theirs.next_avail());
    }
}

/// Whether the chain at `head` reaches an indirect table that is not wholly inside one
/// region (a plain re-walk of the raw descriptors, as the test's oracle).
fn enters_partial_table(mem: &GuestMemoryMmap, size: u16, head: u16) -> bool {
    use vm_memory::GuestMemoryBackend;
    let (mut table, mut n, mut index, mut ttl) = (DESC, size, head, size);
    while ttl > 0 && index < n {
        let Ok(d) = mem.read_obj::<Descriptor>(GuestAddress(table + 16 * u64::from(index))) else {
            return false;
        };
        if d.refers_to_indirect_table() {
            let whole = mem.get_slice(d.addr(), d.len() as usize).is_ok();
            if !whole && mem.find_region(d.addr()).is_some() {
                return true;
            }
            (table, n, index) = (d.addr().0, u16::try_from(d.len() / 16).unwrap_or(0), 0);
            ttl = n;
            continue;
        }
        if !d.has_next() {
            return false;
        }
        index = d.next();
        ttl -= 1;
    }
    false
}

#[test]
fn an_available_index_more_than_a_ring_ahead_is_refused() {
    let mem = memory();
    mem.write_obj(17u16.to_le(), GuestAddress(AVAIL + 2))
        .unwrap();
    let q = queue(16, 0);
    let view = GuestView::new(&mem);
    let ring = SplitRing::new(&view, &q).unwrap();
    assert_eq!(ring.cursor(0).err(), Some(QueueFault::AvailIndexOutOfRange));
    assert!(ring.cursor(1).is_ok());
}

#[test]
fn used_entries_become_visible_with_the_index() {
    let mem = memory();
    let q = queue(4, 0);
    let view = GuestView::new(&mem);
    let ring = SplitRing::new(&view, &q).unwrap();
    assert!(ring.write_used(5, 3, 1500));
    assert_eq!(mem.read_obj::<u16>(GuestAddress(USED + 2)).unwrap(), 0);
    assert!(ring.store_used_idx(6));
    assert_eq!(mem.read_obj::<u16>(GuestAddress(USED + 2)).unwrap(), 6);
    // Position 5 of a 4-entry ring is slot 1.
    assert_eq!(mem.read_obj::<u32>(GuestAddress(USED + 4 + 8)).unwrap(), 3);
    assert_eq!(
        mem.read_obj::<u32>(GuestAddress(USED + 4 + 12)).unwrap(),
        1500
    );
}

#[test]
fn a_ring_outside_one_region_is_not_mapped() {
    let mem = memory();
    let mut q = queue(16, 0);
    // The used ring would run from the low region into the hole.
    q.set_used_ring_address(Some(u32::try_from(LOW.1 - 8).unwrap()), Some(0));
    let view = GuestView::new(&mem);
    assert!(SplitRing::new(&view, &q).is_none());
}

#[test]
fn buffers_are_found_in_either_region_and_never_across_the_hole() {
    let mem = memory();
    let view = GuestView::new(&mem);
    assert_eq!(
        view.slice(GuestAddress(0x100), 64).map(|s| s.len()),
        Some(64)
    );
    assert_eq!(
        view.slice(GuestAddress(0x2_0100), 64).map(|s| s.len()),
        Some(64)
    );
    // Back to the low region after the high one was remembered.
    assert!(view.slice(GuestAddress(0xff00), 0x100).is_some());
    assert!(view.slice(GuestAddress(0xff00), 0x101).is_none());
    assert!(view.slice(GuestAddress(0x1_8000), 1).is_none());
    assert!(view.slice(GuestAddress(u64::MAX - 4), 64).is_none());
}

proptest! {
    /// Whatever region the view remembers from the queries before, a range is translated
    /// exactly when `vm-memory`'s own checked lookup finds it wholly inside one region, and
    /// to the same host address.
    #[test]
    fn ranges_translate_as_vm_memory_translates_them(
        queries in prop::collection::vec(
            prop_oneof![
                0u64..0x3_0000,
                Just(LOW.1 as u64 - 1),
                Just(HIGH.0 - 1),
                Just(HIGH.0 + HIGH.1 as u64 - 1),
                (u64::MAX - 0x100)..=u64::MAX,
            ]
            .prop_flat_map(|addr| {
                // Lengths that end exactly at, or one byte past, the end of the region
                // `addr` is in, as well as any.
                let to_end = [LOW, HIGH]
                    .iter()
                    .map(|(start, len)| start + *len as u64)
                    .find(|end| addr < *end)
                    .map_or(0, |end| usize::try_from(end - addr).unwrap_or(0));
                (Just(addr), prop_oneof![0usize..0x1_2000, Just(to_end), Just(to_end + 1)])
            }),
            1..24,
        )
    ) {
        let mem = memory();
        let view = GuestView::new(&mem);
        for (addr, len) in queries {
            let ours = view.host_range(GuestAddress(addr), len);
            let theirs = vm_memory::GuestMemoryBackend::get_slice(&mem, GuestAddress(addr), len)
                .ok()
                .map(|s| s.ptr_guard_mut().as_ptr());
            prop_assert_eq!(ours, theirs, "{:#x} + {:#x}", addr, len);
        }
    }
}

proptest! {
    /// Whatever the buffer held before — another header, the same one, or one equal in only
    /// one of its two words — a stored header reads back whole, and the byte after it is
    /// untouched (each word is compared before it is written).
    #[test]
    fn a_stored_header_reads_back_whatever_the_buffer_held(
        mut before in any::<[u8; 13]>(),
        low in any::<u64>(),
        high in any::<u32>(),
        low_held in any::<bool>(),
        high_held in any::<bool>(),
    ) {
        if low_held {
            before[..8].copy_from_slice(&low.to_le_bytes());
        }
        if high_held {
            before[8..12].copy_from_slice(&high.to_le_bytes());
        }
        let mem = memory();
        let at = GuestAddress(0x100);
        mem.write_slice(&before, at).unwrap();
        let view = GuestView::new(&mem);
        let bytes = view.bytes(at, 12).unwrap();
        prop_assert!(bytes.store_header((low, high)));
        let mut after = [0u8; 13];
        mem.read_slice(&mut after, at).unwrap();
        prop_assert_eq!(&after[..8], &low.to_le_bytes());
        prop_assert_eq!(&after[8..12], &high.to_le_bytes());
        prop_assert_eq!(after[12], before[12]);
    }
}
