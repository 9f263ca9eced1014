//! Every combination of offloads on two TAP ends (TSO and checksum offload on or off, mixed)
//! delivers correct data: the receiving kernel drops bad checksums, and the file checksum
//! catches anything else. Needs root (prints SKIP otherwise).

mod common;

use std::time::Duration;

use common::lab::{self, iperf3, tcp_bytes_received, tcp_transfer, test_data};
use common::LabBuilder;
use weft_switch::DropReason;
use weft_tap::Offloads;

const SETTINGS: [(&str, Offloads); 3] = [
    ("tso+csum", Offloads::ALL),
    ("csum", Offloads::CSUM_ONLY),
    ("none", Offloads::NONE),
];

#[test]
fn every_offload_combination_delivers_correct_data() {
    if !lab::can_run("every_offload_combination_delivers_correct_data") {
        return;
    }
    let _serial = lab::serial();
    let data = test_data(3 << 20, 11);
    let want = (data.len(), lab::fnv1a(&data));
    for (na, oa) in SETTINGS {
        for (nb, ob) in SETTINGS {
            let case = format!("a={na} b={nb}");
            let lab = LabBuilder::new()
                .tap(1, 1500, oa, 1)
                .tap(2, 1500, ob, 1)
                .start();
            let (a, b) = (&lab.ends[0], &lab.ends[1]);
            assert!(a.ns.ping(&b.ip, 1, 56), "{case}: ping");
            let timeout = Duration::from_secs(30);
            assert_eq!(
                tcp_transfer(&a.ns, &b.ns, &b.ip, &data, timeout),
                want,
                "{case}: a -> b"
            );
            assert_eq!(
                tcp_transfer(&b.ns, &a.ns, &a.ip, &data, timeout),
                want,
                "{case}: b -> a"
            );
            let report = iperf3(&b.ns, &b.ip, &a.ns, &["-t", "1"]);
            assert!(tcp_bytes_received(&report) > 1 << 20, "{case}: iperf3");

            // What crossed the switch matches what each end takes.
            assert_eq!(
                a.rx_gso() > 0,
                oa.tso,
                "{case}: a sends super-frames iff it has TSO"
            );
            assert_eq!(
                b.tx_gso() > 0,
                oa.tso && ob.tso,
                "{case}: b gets them iff both have TSO"
            );
            if !ob.csum {
                assert_eq!(b.tx_csum_partial(), 0, "{case}: b gets complete checksums");
            }
            if oa.csum && ob.csum {
                assert!(
                    b.tx_csum_partial() > 0,
                    "{case}: partial checksums pass as they are"
                );
            }
            for end in [a, b] {
                let c = end.counters.snapshot();
                assert_eq!(c.drops(DropReason::BadOffload), 0, "{case}: {c:?}");
                assert_eq!(c.drops(DropReason::FrameTooBig), 0, "{case}: {c:?}");
                assert_eq!(end.port_drops(), 0, "{case}");
            }
        }
    }
}
