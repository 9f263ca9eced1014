use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use pcap_file::pcap::PcapReader;
use weft_control::codec::hex_encode;
use weft_control::{ControlError, ErrorKind};

use super::*;
use crate::cli::PortRef;

fn frame(n: u8, len: usize) -> Vec<u8> {
    let mut f = vec![n; len];
    f[..6].copy_from_slice(&[0x52, 0x54, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[0x52, 0x54, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f
}

fn packet(n: u8, len: usize) -> CapturedPacket {
    CapturedPacket {
        time_ns: 1_700_000_000_123_456_789 + u64::from(n),
        direction: CaptureDirection::In,
        orig_len: u32::try_from(len).unwrap(),
        data: hex_encode(&frame(n, len)),
    }
}

fn read_back(bytes: &[u8]) -> Vec<(Duration, u32, Vec<u8>)> {
    let mut reader = PcapReader::new(bytes).unwrap();
    assert_eq!(reader.header().datalink, DataLink::ETHERNET);
    assert_eq!(reader.header().ts_resolution, TsResolution::NanoSecond);
    let mut out = Vec::new();
    while let Some(p) = reader.next_packet() {
        let p = p.unwrap();
        out.push((p.timestamp, p.orig_len, p.data.into_owned()));
    }
    out
}

#[test]
fn packets_written_read_back_identical() {
    let mut buf = Vec::new();
    let mut sink = PcapSink::new(&mut buf).unwrap();
    for n in 0..3 {
        sink.write(&packet(n, 60 + usize::from(n))).unwrap();
    }
    sink.flush().unwrap();
    drop(sink);
    let back = read_back(&buf);
    assert_eq!(back.len(), 3);
    for (n, (ts, orig, data)) in back.into_iter().enumerate() {
        let n = u8::try_from(n).unwrap();
        assert_eq!(
            ts,
            Duration::from_nanos(1_700_000_000_123_456_789 + u64::from(n))
        );
        assert_eq!(orig, 60 + u32::from(n));
        assert_eq!(data, frame(n, 60 + usize::from(n)));
    }
}

#[test]
fn snapped_packets_keep_their_original_length() {
    let mut buf = Vec::new();
    let mut sink = PcapSink::new(&mut buf).unwrap();
    let mut p = packet(1, 64);
    p.orig_len = 9000;
    sink.write(&p).unwrap();
    drop(sink);
    let back = read_back(&buf);
    assert_eq!(back[0].1, 9000);
    assert_eq!(back[0].2.len(), 64);
}

#[test]
fn bad_hex_and_impossible_lengths_are_handled() {
    let mut buf = Vec::new();
    let mut sink = PcapSink::new(&mut buf).unwrap();
    let mut bad = packet(1, 60);
    bad.data.push('z');
    assert!(matches!(sink.write(&bad), Err(SinkError::Malformed(_))));
    // orig_len shorter than the data is raised to the data's length.
    let mut short = packet(2, 60);
    short.orig_len = 10;
    sink.write(&short).unwrap();
    // A timestamp past 2106 does not fit pcap's 32-bit seconds.
    let mut late = packet(3, 60);
    late.time_ns = u64::MAX;
    assert!(matches!(sink.write(&late), Err(SinkError::Malformed(_))));
    drop(sink);
    let back = read_back(&buf);
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].1, 60);
}

/// A daemon that hands out packets in batches, then nothing.
struct FakeCapture {
    batches: Vec<Vec<CapturedPacket>>,
    lost: u64,
    seen: Vec<Request>,
    fail_read: bool,
}

impl Daemon for FakeCapture {
    fn call_waiting(&mut self, request: Request, _: Duration) -> Result<Response, CliError> {
        self.seen.push(request.clone());
        match request {
            Request::CaptureStart { .. } => Ok(Response::CaptureStarted { id: 9 }),
            Request::CaptureRead { id: 9, .. } if self.fail_read => Err(CliError::Daemon(
                ControlError::new(ErrorKind::Internal, "boom"),
            )),
            Request::CaptureRead { id: 9, .. } => Ok(Response::CapturePackets {
                packets: if self.batches.is_empty() {
                    vec![]
                } else {
                    self.batches.remove(0)
                },
                lost: self.lost,
            }),
            Request::CaptureStop { id: 9 } => Ok(Response::Done),
            other => Err(CliError::Protocol(format!("unexpected {other:?}"))),
        }
    }
}

fn args(count: Option<u64>, duration: Option<Duration>) -> CaptureArgs {
    CaptureArgs {
        target: PortRef {
            switch: "br0".into(),
            port: "vm1".into(),
        },
        file: PathBuf::from("x.pcap"),
        count,
        direction: Direction::Both,
        snaplen: None,
        duration,
    }
}

#[test]
fn capture_stops_at_the_count_and_stops_the_capture() {
    let mut d = FakeCapture {
        batches: vec![
            vec![packet(0, 60), packet(1, 60)],
            vec![packet(2, 60), packet(3, 60), packet(4, 60)],
        ],
        lost: 7,
        seen: vec![],
        fail_read: false,
    };
    let mut buf = Vec::new();
    let summary = capture(
        &mut d,
        &args(Some(4), None),
        &mut buf,
        &AtomicBool::new(false),
    )
    .unwrap();
    assert_eq!(
        summary,
        CaptureSummary {
            captured: 4,
            lost: 7,
            malformed: 0
        }
    );
    assert_eq!(read_back(&buf).len(), 4);
    assert!(matches!(
        d.seen[1],
        Request::CaptureRead { max: Some(4), .. }
    ));
    assert!(matches!(
        d.seen[2],
        Request::CaptureRead { max: Some(2), .. }
    ));
    assert_eq!(d.seen.last(), Some(&Request::CaptureStop { id: 9 }));
}

#[test]
fn capture_stops_after_the_duration() {
    let mut d = FakeCapture {
        batches: vec![vec![packet(0, 60)]],
        lost: 0,
        seen: vec![],
        fail_read: false,
    };
    let mut buf = Vec::new();
    let a = args(None, Some(Duration::from_millis(30)));
    let summary = capture(&mut d, &a, &mut buf, &AtomicBool::new(false)).unwrap();
    assert_eq!(summary.captured, 1);
    assert_eq!(d.seen.last(), Some(&Request::CaptureStop { id: 9 }));
}

#[test]
fn an_interrupt_stops_the_capture_cleanly() {
    let mut d = FakeCapture {
        batches: vec![],
        lost: 0,
        seen: vec![],
        fail_read: false,
    };
    let mut buf = Vec::new();
    let summary = capture(&mut d, &args(None, None), &mut buf, &AtomicBool::new(true)).unwrap();
    assert_eq!(summary.captured, 0);
    assert_eq!(
        d.seen,
        vec![
            start_request(&args(None, None)),
            Request::CaptureStop { id: 9 }
        ]
    );
    assert!(read_back(&buf).is_empty());
}

#[test]
fn a_failed_read_still_stops_the_capture() {
    let mut d = FakeCapture {
        batches: vec![],
        lost: 0,
        seen: vec![],
        fail_read: true,
    };
    let mut buf = Vec::new();
    let e = capture(
        &mut d,
        &args(Some(1), None),
        &mut buf,
        &AtomicBool::new(false),
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "boom");
    assert_eq!(d.seen.last(), Some(&Request::CaptureStop { id: 9 }));
}
