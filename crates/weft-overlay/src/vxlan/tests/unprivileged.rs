//! A VXLAN port opened without `CAP_NET_RAW` (dropped from the test thread's effective set,
//! as an unprivileged weftd or a container without it would run): no raw socket, and every
//! datagram leaves through the UDP sockets bound to source ports, as the raw socket would
//! have sent it (VXLAN header + frame, replicated, runs segmented with offloads on).

use std::time::Duration;

use weft_packet::{MacAddr, OffloadInfo};
use weft_switch::{PortTx, TxFrame};

use super::sockets::{can_run, config, lo, port};
use crate::VxlanPort;

const CAP_NET_RAW: u32 = 13;

/// Clears `CAP_NET_RAW` from the calling thread's effective set (capabilities are per
/// thread: the rest of the test process keeps it).
fn drop_cap_net_raw() -> bool {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Default, Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut header = Header {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3: two data structs
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: capget with a valid version-3 header and room for its two data structs.
    let got = unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) };
    if got != 0 {
        return false;
    }
    data[0].effective &= !(1 << CAP_NET_RAW);
    // SAFETY: as above; pid 0 changes only this thread's sets.
    let set = unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) };
    set == 0
}

fn raw_socket_refused() -> bool {
    weft_sys::socket::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_UDP).is_err()
}

fn udp_frame(dst: [u8; 6], sport: u16, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], dst)
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .udp(sport, 80)
        .write(&mut out, payload)
        .unwrap();
    out
}

fn listener(last: u8, port: u16) -> std::net::UdpSocket {
    let s = std::net::UdpSocket::bind((lo(last), port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    s
}

/// Every datagram `s` receives within a moment: (source port, payload).
fn drain(s: &std::net::UdpSocket) -> Vec<(u16, Vec<u8>)> {
    let mut got = Vec::new();
    let mut buf = [0u8; 2048];
    while let Ok((n, from)) = s.recv_from(&mut buf) {
        assert_eq!(from.ip(), lo(1), "sent from the local endpoint's address");
        got.push((from.port(), buf[..n].to_vec()));
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
    }
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    got
}

fn vxlan(frame: &[u8]) -> Vec<u8> {
    [&[0x08, 0, 0, 0, 0, 0, 42, 0][..], frame].concat()
}

#[test]
fn without_cap_net_raw_a_port_sends_everything_through_its_bound_sockets() {
    if !can_run("without_cap_net_raw_a_port_sends_everything_through_its_bound_sockets") {
        return;
    }
    // A thread of its own: the capability goes with it.
    std::thread::spawn(|| {
        assert!(drop_cap_net_raw(), "capset");
        assert!(raw_socket_refused(), "CAP_NET_RAW is still in effect");
        let known = MacAddr([2, 0, 0, 0, 0, 3]);
        for (offload, (local_port, remote_port)) in [(false, (22, 23)), (true, (24, 25))] {
            let p = port(remote_port);
            let mut c = config(lo(1), port(local_port), p)
                .remote(lo(2))
                .remote(lo(3))
                .static_mac(known, lo(3));
            c.offload = offload;
            let opened = VxlanPort::open(&c).unwrap();
            let paths = opened.socket_paths();
            assert!(
                !paths.raw_send,
                "the port says it sends through bound sockets"
            );
            assert_eq!(paths.udp_gso, offload);
            assert!(paths.names().contains(&"bound_sockets"));
            let (_rx, mut tx, stats) = opened.split();
            assert!(tx.raw.is_none(), "no raw socket without CAP_NET_RAW");
            let bound: Vec<u16> = tx.gso.iter().map(|g| g.1).collect();
            assert!(!bound.is_empty());
            let caps = tx.caps();
            assert_eq!(caps.tso4, offload, "TSO only with offloads on");

            let (r2, r3) = (listener(2, p), listener(3, p));
            let bcast = udp_frame([0xff; 6], 1, b"to everyone");
            // Five equal frames to the known MAC: one segmented run with offloads on.
            let unicast: Vec<Vec<u8>> = (0..5)
                .map(|i| udp_frame(known.octets(), 7, &[i; 40]))
                .collect();
            let mut frames = vec![TxFrame::whole(&bcast, OffloadInfo::default())];
            frames.extend(
                unicast
                    .iter()
                    .map(|f| TxFrame::whole(f, OffloadInfo::default())),
            );
            assert_eq!(tx.transmit(&frames), 6);

            let (at2, at3) = (drain(&r2), drain(&r3));
            assert_eq!(
                at2.len(),
                1,
                "only the broadcast reaches 192.0.2.2's stand-in"
            );
            assert_eq!(at2[0].1, vxlan(&bcast));
            let mut want3 = vec![vxlan(&bcast)];
            want3.extend(unicast.iter().map(|f| vxlan(f)));
            let got3: Vec<Vec<u8>> = at3.iter().map(|(_, d)| d.clone()).collect();
            assert_eq!(got3, want3, "VXLAN header + frame, in burst order");
            for (from, _) in at2.iter().chain(&at3) {
                assert!(
                    bound.contains(from),
                    "source port {from} is a bound socket's"
                );
            }
            assert_eq!(
                at2[0].0, at3[0].0,
                "a frame's replicas share its source port"
            );
            assert!(
                at3[1..].iter().all(|(from, _)| *from == at3[1].0),
                "one flow, one source port"
            );
            let s = stats.snapshot();
            assert_eq!(
                (s.tx_frames, s.tx_datagrams, s.tx_errors),
                (6, 7, 0),
                "{s:?}"
            );
            assert_eq!(
                s.tx_small_gso_sends,
                u64::from(offload),
                "the run is segmented only with offloads on: {s:?}"
            );
        }
    })
    .join()
    .unwrap();
}
