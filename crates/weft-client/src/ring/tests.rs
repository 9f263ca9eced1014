//! Ring arithmetic, wrap-around, event-index math, and a hostile used ring.

use proptest::prelude::*;

use super::*;

fn ring(size: u16, event_idx: bool) -> (SharedMemory, DriverRing) {
    let layout = RingLayout::new(0, size);
    let mem = SharedMemory::new(
        usize::try_from(layout.len())
            .unwrap()
            .next_multiple_of(4096),
    )
    .unwrap();
    (mem, DriverRing::new(layout, event_idx))
}

/// The backend's side in miniature: takes what is available, returns it used.
fn device_use(mem: &SharedMemory, l: &RingLayout, used_idx: &mut u16, ids: &[(u32, u32)]) {
    for &(id, len) in ids {
        let at = l.used + 4 + 8 * u64::from(*used_idx % l.size);
        mem.store_u32(at, id).unwrap();
        mem.store_u32(at + 4, len).unwrap();
        *used_idx = used_idx.wrapping_add(1);
    }
    mem.store_u16(l.used + 2, *used_idx, Ordering::Release)
        .unwrap();
}

#[test]
fn layout_matches_the_virtio_split_ring_sizes() {
    let l = RingLayout::new(0x1000, 256);
    assert_eq!(l.avail, 0x1000 + 16 * 256);
    assert_eq!(l.used, (l.avail + 6 + 512).next_multiple_of(4));
    assert_eq!(l.len(), l.used + 6 + 8 * 256 - 0x1000);
    assert_eq!(l.used % 4, 0);
}

#[test]
fn used_ids_out_of_range_or_not_in_flight_are_counted_not_trusted() {
    let (mem, mut r) = ring(8, true);
    let l = r.layout;
    let id = r.take_free().unwrap();
    r.push_avail(&mem, id).unwrap();
    r.publish(&mem).unwrap();
    let mut used = 0;
    device_use(
        &mem,
        &l,
        &mut used,
        &[
            (9, 0),
            (u32::MAX, 0),
            (u32::from(id) + 1, 0),
            (u32::from(id), 5),
            (u32::from(id), 5),
        ],
    );
    assert_eq!(r.used_pending(&mem).unwrap(), 5);
    let got: Vec<_> = (0..5).map(|_| r.next_used(&mem).unwrap()).collect();
    assert_eq!(got, vec![None, None, None, Some(Used { id, len: 5 }), None]);
    assert_eq!(r.stats.faults_of(RingFault::UsedIdOutOfRange), 2);
    assert_eq!(r.stats.faults_of(RingFault::UsedIdNotInFlight), 2);
}

#[test]
fn a_used_index_running_a_ring_ahead_breaks_only_that_ring() {
    let (mem, mut r) = ring(8, false);
    mem.store_u16(r.layout.used + 2, 9, Ordering::Release)
        .unwrap();
    assert_eq!(r.used_pending(&mem).unwrap(), 0);
    assert!(r.is_broken());
    assert_eq!(r.stats.faults_of(RingFault::UsedIndexRunaway), 1);
    mem.store_u16(r.layout.used + 2, 1, Ordering::Release)
        .unwrap();
    assert_eq!(
        r.used_pending(&mem).unwrap(),
        0,
        "a broken ring stays stopped"
    );
}

#[test]
fn without_event_idx_the_no_notify_flag_suppresses_kicks() {
    let (mem, mut r) = ring(8, false);
    let id = r.take_free().unwrap();
    r.push_avail(&mem, id).unwrap();
    assert!(r.publish(&mem).unwrap());
    mem.store_u16(r.layout.used, USED_F_NO_NOTIFY, Ordering::Relaxed)
        .unwrap();
    let id = r.take_free().unwrap();
    r.push_avail(&mem, id).unwrap();
    assert!(!r.publish(&mem).unwrap());
    assert!(!r.publish(&mem).unwrap(), "nothing new: no kick");
    assert_eq!((r.stats.kicks, r.stats.kicks_suppressed), (1, 1));
    r.set_interrupts(&mem, false).unwrap();
    assert_eq!(
        mem.load_u16(r.layout.avail, Ordering::Relaxed).unwrap(),
        AVAIL_F_NO_INTERRUPT
    );
    r.set_interrupts(&mem, true).unwrap();
    assert_eq!(mem.load_u16(r.layout.avail, Ordering::Relaxed).unwrap(), 0);
}

proptest! {
    /// `need_event` is "event in [old, new) modulo 2^16", for any batch shorter than 2^16.
    #[test]
    fn need_event_is_event_within_the_published_window(old in any::<u16>(), n in 0u16..=u16::MAX, back in any::<u16>()) {
        let new = old.wrapping_add(n);
        let event = new.wrapping_sub(back);
        let within = back >= 1 && back <= n;
        prop_assert_eq!(need_event(event, new, old), within);
    }

    /// Many rounds of fill / publish / use / reap across index wrap-around: every
    /// descriptor comes back exactly once, the avail entries name what was pushed, and a
    /// kick is asked for exactly when the backend's avail_event lies in the new window.
    #[test]
    fn rounds_across_wrap_around_return_every_descriptor_once(
        log_size in 1u32..6,
        start in any::<u16>(),
        rounds in proptest::collection::vec((1usize..40, any::<u16>()), 1..40),
    ) {
        let size = 1u16 << log_size;
        let (mem, mut r) = ring(size, true);
        let l = r.layout;
        // Start both indexes near wrap-around, as after a long run.
        r.next_avail = start; r.published = start; r.last_used = start;
        let mut used_idx = start;
        mem.store_u16(l.used + 2, start, Ordering::Release).unwrap();
        let mut device_seen = start;
        for (want, event_back) in rounds {
            let mut pushed = Vec::new();
            while pushed.len() < want {
                let Some(id) = r.take_free() else { break };
                r.push_avail(&mem, id).unwrap();
                pushed.push(id);
            }
            let old = r.published;
            let new = r.next_avail;
            let event = new.wrapping_sub(event_back);
            mem.store_u16(l.avail_event(), event, Ordering::Relaxed).unwrap();
            let kick = r.publish(&mem).unwrap();
            prop_assert_eq!(kick, old != new && need_event(event, new, old));
            prop_assert_eq!(mem.load_u16(l.avail + 2, Ordering::Acquire).unwrap(), new);
            // The device reads the avail entries it has not seen and uses them in order.
            let mut ids = Vec::new();
            while device_seen != new {
                ids.push((u32::from(mem.load_u16(l.avail_entry(device_seen), Ordering::Relaxed).unwrap()), 1));
                device_seen = device_seen.wrapping_add(1);
            }
            prop_assert_eq!(ids.iter().map(|(i, _)| u16::try_from(*i).unwrap()).collect::<Vec<_>>(), pushed.clone());
            device_use(&mem, &l, &mut used_idx, &ids);
            let pending = r.used_pending(&mem).unwrap();
            prop_assert_eq!(usize::from(pending), pushed.len());
            for expect in &pushed {
                let u = r.next_used(&mem).unwrap();
                prop_assert_eq!(u, Some(Used { id: *expect, len: 1 }));
                r.release(*expect);
            }
            prop_assert_eq!(r.free_count(), usize::from(size));
        }
        prop_assert_eq!(r.stats.total_faults(), 0);
    }
}

#[test]
fn arming_for_n_elements_puts_used_event_n_minus_one_ahead_and_disarming_behind() {
    let (mem, mut r) = ring(16, true);
    r.last_used = u16::MAX - 2;
    r.arm(&mem, Some(8)).unwrap();
    let event = mem
        .load_u16(r.layout.used_event(), Ordering::Relaxed)
        .unwrap();
    assert_eq!(event, (u16::MAX - 2).wrapping_add(7));
    // The backend calls when its used index moves past the event: after the 8th element.
    assert!(!need_event(event, r.last_used.wrapping_add(7), r.last_used));
    assert!(need_event(event, r.last_used.wrapping_add(8), r.last_used));
    r.arm(&mem, Some(1000)).unwrap();
    let event = mem
        .load_u16(r.layout.used_event(), Ordering::Relaxed)
        .unwrap();
    assert_eq!(event, r.last_used.wrapping_add(15), "at most a ring ahead");
    r.arm(&mem, None).unwrap();
    let event = mem
        .load_u16(r.layout.used_event(), Ordering::Relaxed)
        .unwrap();
    assert!(!need_event(
        event,
        r.last_used.wrapping_add(16),
        r.last_used
    ));
}
