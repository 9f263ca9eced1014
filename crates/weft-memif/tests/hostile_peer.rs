//! Hostile peers against a weft memif port: a raw peer (its own socket code and memfd
//! regions) sends what no well-behaved memif sends, or writes what it should not into the
//! rings. Each scenario asserts that the port survives, that the reason is counted, that a
//! well-behaved peer is served afterwards, and that no descriptor leaked.
// Region sizes and offsets here are small (a few hundred KiB).
#![allow(clippy::cast_possible_truncation)]

mod common;

use std::os::fd::AsFd;
use std::time::Duration;

use common::*;
use weft_memif::handshake::Refusal;
use weft_memif::layout::{Desc, DESC_FLAG_NEXT};
use weft_memif::wire::{AddRegion, AddRing, Direction, Hello, Message, Name, VERSION};
use weft_memif::{MemifConfig, MemifPort, Role};

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

const C2S: Direction = Direction::ClientToServer;
const S2C: Direction = Direction::ServerToClient;

/// Runs `f` against a fresh server port, then checks a good peer is served, the port
/// closes, and every descriptor opened meanwhile is closed again.
fn scenario(tag: &str, config: MemifConfig, f: impl FnOnce(&mut Server)) -> weft_memif::MemifStats {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let before = open_fds();
    let stats = {
        let mut server = Server::start(tag, config);
        f(&mut server);
        server.assert_serves_a_good_peer();
        server.port.stats()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while open_fds() != before && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(open_fds(), before, "descriptors leaked in {tag}");
    stats
}

/// A short handshake timeout (the stalling scenarios wait it out), long enough for a
/// well-behaved peer on a loaded machine.
fn quick() -> MemifConfig {
    MemifConfig {
        handshake_timeout: Duration::from_secs(1),
        ..MemifConfig::default()
    }
}

/// A raw peer that sends `steps` after HELLO and expects a DISCONNECT naming `why`.
fn refused_after(s: &Server, steps: impl FnOnce(&RawPeer, &RawMemory), why: &str) {
    let mem = RawMemory::new();
    let p = RawPeer::connect(&s.path());
    p.expect("HELLO");
    steps(&p, &mem);
    let reason = p.expect_disconnect();
    assert!(
        reason.contains(why),
        "disconnect said {reason:?}, expected {why:?}"
    );
    assert!(p.closed());
}

fn identify(p: &RawPeer) {
    p.send(&init_msg(0, b""), &[]);
    p.expect("ACK");
}

#[test]
fn a_message_of_the_wrong_size_is_refused() {
    let st = scenario("size", quick(), |s| {
        refused_after(s, |p, _| p.send_bytes(&[2u8; 64], &[]), "128");
    });
    assert_eq!(st.refused(Refusal::Protocol), 1);
}

#[test]
fn an_unknown_message_type_is_refused() {
    let st = scenario("type", quick(), |s| {
        let mut b = [0u8; 128];
        b[0] = 42;
        refused_after(s, |p, _| p.send_bytes(&b, &[]), "unknown message type");
    });
    assert_eq!(st.refused(Refusal::Protocol), 1);
}

#[test]
fn a_region_before_init_is_refused() {
    let st = scenario("order", quick(), |s| {
        refused_after(
            s,
            |p, m| p.send(&m.add_region(), &[m.file.as_fd()]),
            "unexpected ADD_REGION",
        );
    });
    assert_eq!(st.refused(Refusal::Protocol), 1);
}

#[test]
fn a_second_init_is_refused() {
    let st = scenario("dupinit", quick(), |s| {
        refused_after(
            s,
            |p, _| {
                identify(p);
                p.send(&init_msg(0, b""), &[])
            },
            "duplicate INIT",
        );
    });
    assert_eq!(st.refused(Refusal::Protocol), 1);
}

#[test]
fn a_duplicate_region_is_refused() {
    let st = scenario("dupregion", quick(), |s| {
        refused_after(
            s,
            |p, m| {
                identify(p);
                p.send(&m.add_region(), &[m.file.as_fd()]);
                p.expect("ACK");
                p.send(&m.add_region(), &[m.file.as_fd()]);
            },
            "invalid region index",
        );
    });
    assert_eq!(st.refused(Refusal::Memory), 1);
}

#[test]
fn a_region_larger_than_the_limit_is_refused() {
    let config = MemifConfig {
        max_region_bytes: 1 << 20,
        log2_ring_size: 4,
        ..quick()
    };
    let st = scenario("bigregion", config, |s| {
        refused_after(
            s,
            |p, m| {
                identify(p);
                p.send(
                    &Message::AddRegion(AddRegion {
                        index: 0,
                        size: 1 << 30,
                    }),
                    &[m.file.as_fd()],
                );
            },
            "region 0 of",
        );
    });
    assert_eq!(st.refused(Refusal::Memory), 1);
}

#[test]
fn a_region_file_shorter_than_its_size_is_refused_at_connect() {
    let st = scenario("shortfile", quick(), |s| {
        let mem = RawMemory::new();
        mem.file.set_len(4096).unwrap();
        let p = s.raw_setup(&mem);
        p.send(&Message::Connect(Name::new(b"x")), &[]);
        assert!(p.expect_disconnect().contains("memory refused"));
    });
    assert_eq!(st.refused(Refusal::Memory), 1);
}

#[test]
fn a_region_that_is_not_shared_memory_is_refused_at_connect() {
    let st = scenario("pipe", quick(), |s| {
        let mem = RawMemory::new();
        let (r, _w) = nix::unistd::pipe().unwrap();
        let p = RawPeer::connect(&s.path());
        p.expect("HELLO");
        identify(&p);
        p.send(&mem.add_region(), &[r.as_fd()]);
        p.expect("ACK");
        p.send(&mem.add_ring(C2S), &[mem.irq[0].as_fd()]);
        p.expect("ACK");
        p.send(&mem.add_ring(S2C), &[mem.irq[1].as_fd()]);
        p.expect("ACK");
        p.send(&Message::Connect(Name::new(b"x")), &[]);
        assert!(p.expect_disconnect().contains("memory refused"));
    });
    assert_eq!(st.refused(Refusal::Memory), 1);
}

#[test]
fn a_ring_beyond_its_region_is_refused() {
    let st = scenario("ringout", quick(), |s| {
        refused_after(
            s,
            |p, m| {
                identify(p);
                p.send(&m.add_region(), &[m.file.as_fd()]);
                p.expect("ACK");
                let Message::AddRing(mut r) = m.add_ring(C2S) else {
                    unreachable!()
                };
                r.offset = (m.layout.region_size() - 64) as u32 & !15;
                p.send(&Message::AddRing(r), &[m.irq[0].as_fd()]);
            },
            "outside its region",
        );
    });
    assert_eq!(st.refused(Refusal::Ring), 1);
}

#[test]
fn an_oversized_ring_is_refused() {
    let st = scenario("ringsize", quick(), |s| {
        refused_after(
            s,
            |p, m| {
                identify(p);
                p.send(&m.add_region(), &[m.file.as_fd()]);
                p.expect("ACK");
                let Message::AddRing(mut r) = m.add_ring(C2S) else {
                    unreachable!()
                };
                r.log2_ring_size = 15;
                p.send(&Message::AddRing(r), &[m.irq[0].as_fd()]);
            },
            "ring size",
        );
    });
    assert_eq!(st.refused(Refusal::Ring), 1);
}

#[test]
fn a_ring_in_an_unknown_region_is_refused() {
    let st = scenario("ringregion", quick(), |s| {
        refused_after(
            s,
            |p, m| {
                identify(p);
                let r = AddRing {
                    direction: C2S,
                    index: 0,
                    region: 3,
                    offset: 0,
                    log2_ring_size: 4,
                    private_hdr_size: 0,
                };
                p.send(&Message::AddRing(r), &[m.irq[0].as_fd()]);
            },
            "unknown region",
        );
    });
    assert_eq!(st.refused(Refusal::Ring), 1);
}

#[test]
fn a_region_without_its_descriptor_is_refused() {
    let st = scenario("nofd", quick(), |s| {
        refused_after(
            s,
            |p, m| {
                identify(p);
                p.send(&m.add_region(), &[])
            },
            "without its file descriptor",
        );
    });
    assert_eq!(st.refused(Refusal::Fds), 1);
}

#[test]
fn descriptors_a_message_has_no_use_for_are_refused_and_closed() {
    let st = scenario("extrafd", quick(), |s| {
        refused_after(
            s,
            |p, m| {
                identify(p);
                p.send(
                    &m.add_region(),
                    &[m.file.as_fd(), m.irq[0].as_fd(), m.irq[1].as_fd()],
                );
            },
            "too many",
        );
    });
    assert_eq!(st.refused(Refusal::Fds), 1);
}

#[test]
fn a_ring_interrupt_that_is_no_eventfd_is_refused() {
    let st = scenario("irqpipe", quick(), |s| {
        let mem = RawMemory::new();
        let (r, _w) = nix::unistd::pipe().unwrap();
        let p = RawPeer::connect(&s.path());
        p.expect("HELLO");
        identify(&p);
        p.send(&mem.add_region(), &[mem.file.as_fd()]);
        p.expect("ACK");
        p.send(&mem.add_ring(C2S), &[r.as_fd()]);
        p.expect("ACK");
        p.send(&mem.add_ring(S2C), &[mem.irq[1].as_fd()]);
        p.expect("ACK");
        p.send(&Message::Connect(Name::new(b"x")), &[]);
        assert!(p.expect_disconnect().contains("not an eventfd"));
    });
    assert_eq!(st.refused(Refusal::Fds), 1);
}

#[test]
fn a_wrong_or_missing_secret_is_refused() {
    let config = MemifConfig {
        secret: Some(b"sesame".to_vec()),
        ..quick()
    };
    let st = scenario("secret", config, |s| {
        refused_after(
            s,
            |p, _| p.send(&init_msg(0, b"sesamf"), &[]),
            "incorrect secret",
        );
        refused_after(s, |p, _| p.send(&init_msg(0, b""), &[]), "secret required");
    });
    assert_eq!(st.refused(Refusal::Secret), 2);
}

#[test]
fn another_interface_id_or_version_is_refused() {
    let st = scenario("id", quick(), |s| {
        refused_after(s, |p, _| p.send(&init_msg(9, b""), &[]), "ID 9 not found");
        let Message::Init(mut i) = init_msg(0, b"") else {
            unreachable!()
        };
        i.version = 0x0100;
        refused_after(
            s,
            |p, _| p.send(&Message::Init(i), &[]),
            "incompatible memif version",
        );
    });
    assert_eq!(st.refused(Refusal::Incompatible), 2);
}

#[test]
fn a_second_peer_for_the_same_id_is_refused_while_the_first_is_served() {
    let st = scenario("second", quick(), |s| {
        let mem = RawMemory::new();
        let first = s.raw_connected(&mem);
        refused_after(
            s,
            |p, _| p.send(&init_msg(0, b""), &[]),
            "already connected",
        );
        // The first is still served.
        mem.put_frame(0, &[7u8; 60], 0);
        mem.set_head(C2S, 1);
        assert_eq!(s.poll(5), vec![vec![7u8; 60]]);
        assert!(s.port.is_connected());
        drop(first);
    });
    assert_eq!(st.refused(Refusal::Busy), 1);
}

#[test]
fn a_peer_stalling_mid_handshake_is_dropped_after_the_timeout() {
    let st = scenario("stall", quick(), |s| {
        let p = RawPeer::connect(&s.path());
        p.expect("HELLO");
        identify(&p);
        assert!(p.expect_disconnect().contains("timed out"));
    });
    assert_eq!(st.refused(Refusal::Timeout), 1);
}

#[test]
fn connect_without_a_ring_each_way_is_refused() {
    let st = scenario("norings", quick(), |s| {
        refused_after(
            s,
            |p, m| {
                identify(p);
                p.send(&m.add_region(), &[m.file.as_fd()]);
                p.expect("ACK");
                p.send(&m.add_ring(C2S), &[m.irq[0].as_fd()]);
                p.expect("ACK");
                p.send(&Message::Connect(Name::new(b"x")), &[]);
            },
            "without rings",
        );
    });
    assert_eq!(st.refused(Refusal::Ring), 1);
}

#[test]
fn a_ring_with_a_wrong_cookie_is_refused_at_connect() {
    let st = scenario("cookie", quick(), |s| {
        let mem = RawMemory::new();
        mem.write_at(mem.ring(S2C), &0u32.to_ne_bytes());
        let p = s.raw_setup(&mem);
        p.send(&Message::Connect(Name::new(b"x")), &[]);
        assert!(p.expect_disconnect().contains("cookie"));
    });
    assert_eq!(st.refused(Refusal::Ring), 1);
}

#[test]
fn descriptors_outside_the_region_or_over_the_buffer_size_drop_only_their_frames() {
    let st = scenario("baddesc", quick(), |s| {
        let mem = RawMemory::new();
        let p = s.raw_connected(&mem);
        let size = mem.layout.region_size() as u32;
        mem.desc(
            C2S,
            0,
            Desc {
                flags: 0,
                region: 0,
                length: 60,
                offset: size - 10,
            },
        );
        mem.desc(
            C2S,
            1,
            Desc {
                flags: 0,
                region: 5,
                length: 60,
                offset: 0,
            },
        );
        mem.desc(
            C2S,
            2,
            Desc {
                flags: 0,
                region: 0,
                length: 4096,
                offset: 0,
            },
        );
        mem.desc(
            C2S,
            3,
            Desc {
                flags: 0,
                region: 0,
                length: 0,
                offset: 0,
            },
        );
        mem.put_frame(4, &[9u8; 64], 0);
        mem.set_head(C2S, 5);
        assert_eq!(s.poll(5), vec![vec![9u8; 64]]);
        assert!(
            s.port.is_connected(),
            "bad descriptors drop frames, not the peer"
        );
        drop(p);
    });
    assert_eq!(st.rx_bad_descriptor, 4);
}

#[test]
fn a_chain_that_never_ends_is_dropped_and_counted() {
    let st = scenario("chain", quick(), |s| {
        let mem = RawMemory::new();
        let p = s.raw_connected(&mem);
        for slot in 0..16 {
            mem.put_frame(slot, &[1u8; 100], DESC_FLAG_NEXT);
        }
        mem.set_head(C2S, 16);
        assert!(s.poll(5).is_empty());
        // The ring goes on after it.
        mem.put_frame(16, &[2u8; 60], 0);
        mem.set_head(C2S, 17);
        assert_eq!(s.poll(5), vec![vec![2u8; 60]]);
        drop(p);
    });
    assert_eq!(st.rx_bad_chain, 1);
}

#[test]
fn a_chain_longer_than_the_mtu_is_dropped_as_too_long() {
    let st = scenario("toolong", quick(), |s| {
        let mem = RawMemory::new();
        let p = s.raw_connected(&mem);
        mem.put_frame(0, &[1u8; 1500], DESC_FLAG_NEXT);
        mem.put_frame(1, &[1u8; 1500], 0);
        mem.set_head(C2S, 2);
        assert!(s.poll(5).is_empty());
        drop(p);
    });
    assert_eq!(st.rx_too_long, 1);
}

#[test]
fn a_head_jumping_past_the_ring_drops_the_peer_with_a_reason() {
    let st = scenario("jump", quick(), |s| {
        let mem = RawMemory::new();
        let p = s.raw_connected(&mem);
        mem.set_head(C2S, 1000);
        s.poll(3);
        assert!(p.expect_disconnect().contains("head moved"));
        assert!(s.wait_disconnected());
        assert!(s
            .port
            .status()
            .last_disconnect
            .unwrap_or_default()
            .contains("head"));
    });
    assert_eq!(st.ring_faults, 1);
}

#[test]
fn a_peer_that_truncates_its_region_breaks_only_its_connection() {
    let st = scenario("truncate", quick(), |s| {
        let mem = RawMemory::new();
        let p = s.raw_connected(&mem);
        mem.put_frame(0, &[3u8; 60], 0);
        mem.set_head(C2S, 1);
        assert_eq!(s.poll(3).len(), 1);
        // Shrink the unsealed memfd under weft's mapping: the next access faults.
        mem.file.set_len(0).unwrap();
        s.poll(3);
        assert!(p.expect_disconnect().contains("truncated"));
        assert!(s.wait_disconnected());
    });
    assert_eq!(st.memory_truncated, 1);
}

#[test]
fn a_message_after_connect_other_than_disconnect_drops_the_peer() {
    let st = scenario("late", quick(), |s| {
        let mem = RawMemory::new();
        let p = s.raw_connected(&mem);
        p.send(&mem.add_region(), &[mem.file.as_fd()]);
        assert!(p.expect_disconnect().contains("unexpected ADD_REGION"));
    });
    assert_eq!(st.refused(Refusal::Protocol), 1);
}

/// A raw server against a weft client port.
fn hostile_server(
    tag: &str,
    serve: impl FnOnce(&RawPeer, &mut weft_memif::MemifPortRx),
    counted: impl FnOnce(&weft_memif::MemifStats),
) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let before = open_fds();
    {
        let dir = Dir::new(tag);
        let path = dir.0.join("s.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        drop(listener);
        let _ = std::fs::remove_file(&path);
        let l = seqpacket();
        nix::sys::socket::bind(
            std::os::fd::AsRawFd::as_raw_fd(&l),
            &nix::sys::socket::UnixAddr::new(&path).unwrap(),
        )
        .unwrap();
        nix::sys::socket::listen(&l, nix::sys::socket::Backlog::new(4).unwrap()).unwrap();
        let config = MemifConfig {
            role: Role::Client,
            handshake_timeout: Duration::from_secs(1),
            ..MemifConfig::default()
        };
        let mut port = MemifPort::open(dir.socket_dir(), "s.sock".as_ref(), config).unwrap();
        let (mut rx, _tx) = port.take_halves().unwrap();
        let fd = nix::sys::socket::accept(std::os::fd::AsRawFd::as_raw_fd(&l)).unwrap();
        // SAFETY: accept just returned it; nothing else owns it.
        let sock = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        serve(&RawPeer { sock }, &mut rx);
        counted(&port.stats());
        drop(port);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while open_fds() != before && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(open_fds(), before, "descriptors leaked in {tag}");
}

fn hello(min: u16, max: u16) -> Message {
    Message::Hello(Hello {
        name: Name::new(b"raw"),
        min_version: min,
        max_version: max,
        max_region: 0,
        max_s2c_ring: 0,
        max_c2s_ring: 0,
        max_log2_ring_size: 10,
    })
}

#[test]
fn a_client_port_refuses_a_server_without_version_two() {
    hostile_server(
        "cver",
        |p, _| {
            p.send(&hello(0x0300, 0x0300), &[]);
            assert!(p.expect_disconnect().contains("incompatible"));
        },
        |st| assert_eq!(st.refused(Refusal::Incompatible), 1),
    );
}

#[test]
fn a_client_port_refuses_descriptors_from_its_server() {
    hostile_server(
        "cfd",
        |p, _| {
            let e = eventfd();
            p.send(&hello(VERSION, VERSION), &[e.as_fd()]);
            assert!(p.expect_disconnect().contains("too many"));
        },
        |st| assert_eq!(st.refused(Refusal::Fds), 1),
    );
}

#[test]
fn a_client_port_drops_a_server_whose_tail_runs_past_the_offered_slots() {
    hostile_server(
        "ctail",
        |p, rx| {
            p.send(&hello(VERSION, VERSION), &[]);
            p.expect("INIT");
            p.send(&Message::Ack, &[]);
            let (Message::AddRegion(r), mut fds) = p.recv(Duration::from_secs(5)).unwrap() else {
                panic!()
            };
            let region = std::fs::File::from(fds.pop().unwrap());
            p.send(&Message::Ack, &[]);
            let mut s2c_offset = 0;
            for _ in 0..2 {
                let (Message::AddRing(ring), _) = p.recv(Duration::from_secs(5)).unwrap() else {
                    panic!()
                };
                if ring.direction == S2C {
                    s2c_offset = u64::from(ring.offset);
                }
                p.send(&Message::Ack, &[]);
            }
            p.expect("CONNECT");
            p.send(&Message::Connected(Name::new(b"raw")), &[]);
            std::thread::sleep(Duration::from_millis(100));
            // Past the head the client offered.
            use std::os::unix::fs::FileExt;
            region
                .write_all_at(&5000u16.to_ne_bytes(), s2c_offset + 64)
                .unwrap();
            assert_eq!(r.index, 0);
            use weft_switch::PortRx;
            for _ in 0..5 {
                let mut b = weft_switch::RxBatch::new(8);
                rx.receive(&mut b);
                rx.finish();
                std::thread::sleep(Duration::from_millis(5));
            }
            assert!(p.expect_disconnect().contains("tail moved"));
        },
        |st| assert_eq!(st.ring_faults, 1),
    );
}

#[test]
fn a_peer_flooding_the_socket_cannot_outlast_its_handshake_deadline() {
    let st = scenario("flood", quick(), |s| {
        let p = RawPeer::connect(&s.path());
        p.expect("HELLO");
        // ACKs are harmless one by one; thousands of them must not keep the handshake
        // (or the control thread) alive past its deadline.
        let deadline = std::time::Instant::now() + Duration::from_millis(600);
        while std::time::Instant::now() < deadline {
            p.send(&Message::Ack, &[]);
        }
        assert!(p.expect_disconnect().contains("timed out"));
    });
    assert_eq!(st.refused(Refusal::Timeout), 1);
}
