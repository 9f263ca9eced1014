//! Malformed chains and headers made available through the mock: each one dropped and
//! counted by reason, or its queue faulted with the right reason, without a panic; the
//! port's other queue and a second port beside it keep working.

use virtio_bindings::bindings::virtio_net::{VIRTIO_NET_F_CSUM, VIRTIO_NET_F_HOST_TSO4};
use virtio_queue::desc::split::Descriptor as SplitDescriptor;
use virtio_queue::desc::RawDescriptor;
use virtio_queue::mock::DescriptorTable;
use vm_memory::GuestAddress;
use weft_packet::virtio_net::{flags, gso_type};
use weft_packet::VirtioNetHeaderError as H;

use super::tso::{tcp4_super_frame, tso4_header};
use super::{
    features, guest_memory, Driver, MockRig, HDR0, LOW_MEM, MOCK_INDIRECT, SIZE, UNMAPPED,
};
use crate::counters::{FrameDrop, QueueFault};
use crate::tests::testutil::{ether_frame, net_header as header, INDIRECT, NEXT, WRITE};

/// Which of the guest's queues a case breaks.
#[derive(Debug, Clone, Copy)]
enum Ring {
    /// Its transmit queue (the port's receive half reads it).
    FromGuest,
    /// Its receive queue (the port's transmit half writes it).
    ToGuest,
}

#[derive(Debug, Clone, Copy)]
enum Expect {
    /// The frame is dropped and counted; the chain goes back and the queue goes on.
    Drop(FrameDrop),
    /// The queue stops being served until the frontend resets it.
    Fault(QueueFault),
}

struct Case {
    name: &'static str,
    ring: Ring,
    /// Feature bits the guest did not negotiate.
    remove: &'static [u32],
    /// Makes the malformed chain available on the case's ring.
    build: fn(&mut Driver<'_>),
    expect: Expect,
}

fn desc(addr: u64, len: u32, flags: u16, next: u16) -> SplitDescriptor {
    SplitDescriptor::new(addr, len, flags, next)
}

/// A zero header and a 60-byte frame in the queue's buffer area; their address.
fn good_buffer(d: &mut Driver<'_>) -> u64 {
    d.write(&[&HDR0[..], &ether_frame(1, 2, 60, 0)].concat())
}

fn case(name: &'static str, ring: Ring, build: fn(&mut Driver<'_>), expect: Expect) -> Case {
    Case {
        name,
        ring,
        remove: &[],
        build,
        expect,
    }
}

fn cases() -> Vec<Case> {
    use Expect::{Drop, Fault};
    use Ring::{FromGuest, ToGuest};
    vec![
        case(
            "descriptor loop",
            FromGuest,
            |d| {
                let (a, o) = (good_buffer(d), d.next_desc());
                d.add_raw(&[desc(a, 8, NEXT, o + 1), desc(a + 8, 8, NEXT, o)]);
            },
            Fault(QueueFault::ChainTooLong),
        ),
        case(
            "descriptor naming itself next",
            FromGuest,
            |d| {
                let (a, o) = (good_buffer(d), d.next_desc());
                d.add_raw(&[desc(a, 72, NEXT, o)]);
            },
            Fault(QueueFault::ChainTooLong),
        ),
        case(
            "next index out of range",
            FromGuest,
            |d| {
                let a = good_buffer(d);
                d.add_raw(&[desc(a, 12, NEXT, SIZE + 3)]);
            },
            Fault(QueueFault::NextIndexOutOfRange),
        ),
        case(
            "head index out of range",
            FromGuest,
            |d| {
                let at = d.avail_idx();
                let avail = d.mock.avail();
                avail.ring().ref_at(usize::from(at)).unwrap().store(SIZE);
                avail.idx().store(at + 1);
            },
            Fault(QueueFault::HeadIndexOutOfRange),
        ),
        case(
            "buffer between the memory regions",
            FromGuest,
            |d| d.add_raw(&[desc(UNMAPPED, 72, 0, 0)]),
            Fault(QueueFault::AddressOutOfRange),
        ),
        case(
            "buffer running past the end of a region",
            FromGuest,
            |d| d.add_raw(&[desc(LOW_MEM - 16, 72, 0, 0)]),
            Fault(QueueFault::AddressOutOfRange),
        ),
        case(
            "buffer address + len wrapping past u64::MAX",
            FromGuest,
            |d| d.add_raw(&[desc(u64::MAX - 15, 72, 0, 0)]),
            Fault(QueueFault::AddressOutOfRange),
        ),
        case(
            "zero-length buffer",
            FromGuest,
            |d| {
                let a = good_buffer(d);
                d.add_chains(&[vec![(a, 12, 0), (a, 0, 0), (a + 12, 60, 0)]]);
            },
            Drop(FrameDrop::ZeroLengthDescriptor),
        ),
        case(
            "write-only buffer in a transmit chain",
            FromGuest,
            |d| {
                let a = good_buffer(d);
                d.add_chains(&[vec![(a, 12, 0), (a + 12, 60, WRITE)]]);
            },
            Fault(QueueFault::WrongDirection),
        ),
        case(
            "indirect table of 20 bytes",
            FromGuest,
            |d| {
                let head = d.add_mock_indirect(2);
                let mut table = d.desc(head);
                table.set_len(20);
                d.mock.desc_table().store(head, table.into()).unwrap();
            },
            Fault(QueueFault::BadIndirectTable),
        ),
        case(
            "indirect table naming another",
            FromGuest,
            |d| {
                let a = good_buffer(d);
                let inner = d.write(&[0; 16]);
                DescriptorTable::new(d.mem, GuestAddress(inner), 1)
                    .store(0, desc(a, 72, 0, 0).into())
                    .unwrap();
                d.add_mock_indirect(1);
                DescriptorTable::new(d.mem, GuestAddress(MOCK_INDIRECT), 1)
                    .store(0, desc(inner, 16, INDIRECT, 0).into())
                    .unwrap();
            },
            Fault(QueueFault::BadIndirectTable),
        ),
        case(
            "indirect table between the memory regions",
            FromGuest,
            |d| d.add_raw(&[desc(UNMAPPED, 32, INDIRECT, 0)]),
            Fault(QueueFault::DescriptorUnreadable),
        ),
        case(
            "available index more than a ring ahead",
            FromGuest,
            |d| d.mock.avail().idx().store(SIZE + 1),
            Fault(QueueFault::AvailIndexOutOfRange),
        ),
        case(
            "checksum field past the end of the frame",
            FromGuest,
            |d| {
                let h = header(flags::NEEDS_CSUM, 0, 0, 0, 50, 16);
                d.send(&h, &ether_frame(1, 2, 60, 0), &[]);
            },
            Drop(FrameDrop::BadHeader(H::CsumOutOfFrame {
                csum_start: 50,
                csum_offset: 16,
                frame_len: 60,
            })),
        ),
        case(
            "csum_start inside the Ethernet header",
            FromGuest,
            |d| {
                let h = header(flags::NEEDS_CSUM, 0, 0, 0, 4, 6);
                d.send(&h, &ether_frame(1, 2, 60, 0), &[]);
            },
            Drop(FrameDrop::BadHeader(H::CsumStartInEthernetHeader {
                csum_start: 4,
            })),
        ),
        case(
            "TCP segmentation with a UDP csum_offset",
            FromGuest,
            |d| {
                let h = header(flags::NEEDS_CSUM, gso_type::TCPV4, 54, 1448, 34, 6);
                d.send(&h, &ether_frame(1, 2, 2000, 0), &[]);
            },
            Drop(FrameDrop::BadHeader(H::BadGsoCsumOffset { csum_offset: 6 })),
        ),
        Case {
            remove: &[VIRTIO_NET_F_HOST_TSO4],
            ..case(
                "TCPv4 segmentation without HOST_TSO4",
                FromGuest,
                |d| {
                    d.send(&tso4_header(), &tcp4_super_frame(), &[12, 54, 32_768]);
                },
                Drop(FrameDrop::OffloadNotNegotiated),
            )
        },
        Case {
            remove: &[VIRTIO_NET_F_CSUM, VIRTIO_NET_F_HOST_TSO4],
            ..case(
                "a partial checksum without CSUM",
                FromGuest,
                |d| {
                    let h = header(flags::NEEDS_CSUM, 0, 0, 0, 34, 16);
                    d.send(&h, &ether_frame(1, 2, 100, 0), &[]);
                },
                Drop(FrameDrop::OffloadNotNegotiated),
            )
        },
        case(
            "read-only buffer in a receive chain",
            ToGuest,
            |d| {
                let a = d.alloc(8192);
                d.add_chains(&[vec![(a, 8192, 0)]]);
            },
            Fault(QueueFault::WrongDirection),
        ),
        case(
            "receive chain loop",
            ToGuest,
            |d| {
                // 24 bytes a turn: a table's worth of descriptors holds less than a frame.
                let (a, o) = (d.alloc(64), d.next_desc());
                d.add_raw(&[
                    desc(a, 16, WRITE | NEXT, o + 1),
                    desc(a + 16, 8, WRITE | NEXT, o),
                ]);
            },
            Fault(QueueFault::ChainTooLong),
        ),
        case(
            "receive buffer between the memory regions",
            ToGuest,
            |d| d.add_raw(&[desc(UNMAPPED, 8192, WRITE, 0)]),
            Fault(QueueFault::AddressOutOfRange),
        ),
        case(
            "receive buffer address + len wrapping past u64::MAX",
            ToGuest,
            |d| d.add_raw(&[desc(u64::MAX - 15, 8192, WRITE, 0)]),
            Fault(QueueFault::AddressOutOfRange),
        ),
        case(
            "receive chain's indirect table of 40 bytes",
            ToGuest,
            |d| {
                let head = d.add_mock_indirect(3);
                let mut table = d.desc(head);
                table.set_len(40);
                d.mock
                    .desc_table()
                    .store(head, RawDescriptor::from(table))
                    .unwrap();
            },
            Fault(QueueFault::BadIndirectTable),
        ),
    ]
}

#[test]
fn every_malformed_chain_or_header_from_a_mock_driver_is_dropped_or_faults_its_queue_alone() {
    for (i, case) in (0u8..).zip(cases()) {
        let name = case.name;
        let mem = guest_memory();
        let mut rig = MockRig::new(&mem, features(&[], case.remove));
        // A second port beside it, carrying traffic before and after.
        let other_mem = guest_memory();
        let mut other = MockRig::new(&other_mem, features(&[], &[]));
        other.assert_guest_to_switch_works(i, name);
        match case.ring {
            Ring::FromGuest => {
                (case.build)(&mut rig.txq);
                from_guest(&mut rig, case.expect, i, name);
            }
            Ring::ToGuest => {
                (case.build)(&mut rig.rxq);
                to_guest(&mut rig, case.expect, i, name);
            }
        }
        other.assert_guest_to_switch_works(i, name);
        other.assert_switch_to_guest_works(i, name);
        let s = other.stats_from_guest();
        assert_eq!((s.total_drops(), s.total_faults()), (0, 0), "{name}");
    }
}

/// The guest's transmit queue holds the malformed chain: the switch gets nothing of it.
fn from_guest(rig: &mut MockRig<'_>, expect: Expect, seed: u8, name: &str) {
    assert!(
        rig.receive().is_empty(),
        "{name}: nothing reaches the switch"
    );
    let s = rig.stats_from_guest();
    match expect {
        Expect::Drop(reason) => {
            assert_eq!(s.dropped(reason), 1, "{name}");
            assert_eq!((s.total_drops(), s.total_faults()), (1, 0), "{name}");
            assert_eq!(rig.fault_from_guest(), None, "{name}");
            // The chain goes back to the guest, and the queue goes on.
            let head = rig.txq.mock.avail().ring().ref_at(0).unwrap().load();
            assert_eq!(rig.txq.used(), vec![(u32::from(head), 0)], "{name}");
            rig.assert_guest_to_switch_works(seed, name);
        }
        Expect::Fault(fault) => {
            assert_eq!(rig.fault_from_guest(), Some(fault), "{name}");
            assert_eq!(s.faulted(fault), 1, "{name}");
            assert_eq!((s.total_drops(), s.total_faults()), (0, 1), "{name}");
            // Broken until reset: a good chain after it is not taken either (where the mock
            // can still add one), and nothing is given back.
            if rig.txq.avail_idx() < rig.txq.avail_room() {
                rig.txq.send(&HDR0, &ether_frame(1, 2, 60, seed), &[]);
            }
            assert!(rig.receive().is_empty(), "{name}: served while broken");
            assert!(rig.txq.used().is_empty(), "{name}");
        }
    }
    // The guest's receive queue is another queue.
    rig.assert_switch_to_guest_works(seed, name);
    assert_eq!(rig.fault_to_guest(), None, "{name}");
}

/// The guest's receive queue holds the malformed chain: a frame for the guest finds it.
fn to_guest(rig: &mut MockRig<'_>, expect: Expect, seed: u8, name: &str) {
    let Expect::Fault(fault) = expect else {
        panic!("{name}: every malformed receive chain here faults its queue");
    };
    let f = ether_frame(2, 1, 4000, seed);
    assert_eq!(rig.transmit(&[&f]), 0, "{name}");
    assert_eq!(rig.fault_to_guest(), Some(fault), "{name}");
    let s = rig.stats_to_guest();
    assert_eq!(s.faulted(fault), 1, "{name}");
    assert_eq!(
        (s.frames, s.total_drops(), s.total_faults()),
        (0, 0, 1),
        "{name}"
    );
    // Broken until reset: a good chain after it is not filled.
    rig.rxq.post(&[8192]);
    assert_eq!(rig.transmit(&[&f]), 0, "{name}: served while broken");
    assert!(rig.rxq.used().is_empty(), "{name}");
    // The guest's transmit queue is another queue.
    rig.assert_guest_to_switch_works(seed, name);
    assert_eq!(rig.fault_from_guest(), None, "{name}");
}
