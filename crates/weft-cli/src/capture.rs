//! `weft capture`: `capture_start`, `capture_read` in a loop, `capture_stop`; packets go to a
//! pcap file (Ethernet, nanosecond timestamps) that tshark and Wireshark read.

use std::cell::RefCell;
use std::io::Write;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, PcapError, TsResolution};
use serde::Serialize;
use weft_control::codec::hex_decode;
use weft_control::response::CapturedPacket;
use weft_control::{CaptureDirection, Request, Response};

use crate::cli::{CaptureArgs, Direction};
use crate::client::Daemon;
use crate::error::CliError;

/// The pcap header's snap length: libpcap's largest, so that no frame weftd can carry (64 KiB
/// GSO frames included) has an original length the file's readers consider impossible.
pub const PCAP_SNAPLEN: u32 = 262_144;

/// Most packets asked for per `capture_read`.
const READ_BATCH: u64 = 256;

/// Longest wait per `capture_read`; short enough that Ctrl-C is seen promptly.
const READ_WAIT: Duration = Duration::from_millis(500);

/// What a capture did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CaptureSummary {
    /// Packets written to the file.
    pub captured: u64,
    /// Packets weftd lost because the capture's buffer was full.
    pub lost: u64,
    /// Packets weftd sent that could not be written (bad hex, impossible timestamp).
    pub malformed: u64,
}

/// A pcap file being written.
pub struct PcapSink<W: Write> {
    writer: PcapWriter<Shared<W>>,
    // The same writer, for flushing (PcapWriter does not lend it out).
    inner: Rc<RefCell<W>>,
}

/// A writer shared between the pcap writer and its owner.
struct Shared<W>(Rc<RefCell<W>>);

impl<W: Write> Write for Shared<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.borrow_mut().flush()
    }
}

/// Why a packet was not written.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The packet from weftd makes no sense; it is skipped.
    #[error("malformed packet: {0}")]
    Malformed(&'static str),
    /// The file cannot be written.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl From<PcapError> for SinkError {
    fn from(e: PcapError) -> Self {
        match e {
            PcapError::IoError(io) => SinkError::Io(io),
            PcapError::InvalidField(what) => SinkError::Malformed(what),
            _ => SinkError::Malformed("unwritable packet"),
        }
    }
}

impl<W: Write> PcapSink<W> {
    /// Writes the file header.
    pub fn new(writer: W) -> Result<Self, SinkError> {
        let header = PcapHeader {
            snaplen: PCAP_SNAPLEN,
            datalink: DataLink::ETHERNET,
            ts_resolution: TsResolution::NanoSecond,
            endianness: Endianness::Little,
            ..PcapHeader::default()
        };
        let inner = Rc::new(RefCell::new(writer));
        Ok(PcapSink {
            writer: PcapWriter::with_header(Shared(Rc::clone(&inner)), header)?,
            inner,
        })
    }

    /// Writes one packet as weftd reported it.
    pub fn write(&mut self, packet: &CapturedPacket) -> Result<(), SinkError> {
        let mut data = hex_decode(&packet.data).ok_or(SinkError::Malformed("data is not hex"))?;
        let cap = usize::try_from(PCAP_SNAPLEN).unwrap_or(usize::MAX);
        data.truncate(cap);
        let kept = u32::try_from(data.len()).unwrap_or(PCAP_SNAPLEN);
        // The original length is at least what was kept, and at most what readers accept.
        let orig_len = packet.orig_len.max(kept).min(PCAP_SNAPLEN);
        let pcap = PcapPacket::new(Duration::from_nanos(packet.time_ns), orig_len, &data);
        self.writer.write_packet(&pcap)?;
        Ok(())
    }

    /// Flushes what was written to the underlying writer.
    pub fn flush(&mut self) -> Result<(), SinkError> {
        self.inner.borrow_mut().flush()?;
        Ok(())
    }
}

fn direction(d: Direction) -> CaptureDirection {
    match d {
        Direction::In => CaptureDirection::In,
        Direction::Out => CaptureDirection::Out,
        Direction::Both => CaptureDirection::Both,
    }
}

/// The `capture_start` request for the arguments.
pub fn start_request(args: &CaptureArgs) -> Request {
    Request::CaptureStart {
        switch: args.target.switch.clone(),
        port: args.target.port.clone(),
        direction: direction(args.direction),
        snaplen: args.snaplen,
    }
}

/// Runs a capture into `sink` until the count, the duration or `stop`; once it started, it is
/// stopped at weftd whatever happens.
pub fn capture(
    daemon: &mut dyn Daemon,
    args: &CaptureArgs,
    sink: &mut dyn Write,
    stop: &AtomicBool,
) -> Result<CaptureSummary, CliError> {
    let mut pcap = PcapSink::new(sink).map_err(|e| sink_error(args, e))?;
    let started = Instant::now();
    let id = match daemon.call(start_request(args))? {
        Response::CaptureStarted { id } => id,
        other => return Err(crate::commands::unexpected("capture_start", &other)),
    };
    let mut summary = CaptureSummary::default();
    let result = read_loop(daemon, args, id, &mut pcap, stop, started, &mut summary);
    let stopped = daemon.call(Request::CaptureStop { id });
    result?;
    stopped?;
    Ok(summary)
}

fn sink_error(args: &CaptureArgs, e: SinkError) -> CliError {
    match e {
        SinkError::Io(io) => CliError::io(format!("writing {}", args.file.display()), io),
        SinkError::Malformed(m) => CliError::Protocol(m.into()),
    }
}

fn read_loop(
    daemon: &mut dyn Daemon,
    args: &CaptureArgs,
    id: u64,
    pcap: &mut PcapSink<&mut dyn Write>,
    stop: &AtomicBool,
    started: Instant,
    summary: &mut CaptureSummary,
) -> Result<(), CliError> {
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let remaining = match args.count {
            Some(c) if summary.captured >= c => return Ok(()),
            Some(c) => (c - summary.captured).min(READ_BATCH),
            None => READ_BATCH,
        };
        let wait = match args.duration {
            Some(d) => match d.checked_sub(started.elapsed()) {
                Some(left) if !left.is_zero() => left.min(READ_WAIT),
                _ => return Ok(()),
            },
            None => READ_WAIT,
        };
        let request = Request::CaptureRead {
            id,
            max: Some(u32::try_from(remaining).unwrap_or(u32::MAX)),
            wait_ms: u32::try_from(wait.as_millis()).unwrap_or(u32::MAX).max(1),
        };
        let (packets, lost) = match daemon.call_waiting(request, wait)? {
            Response::CapturePackets { packets, lost } => (packets, lost),
            other => return Err(crate::commands::unexpected("capture_read", &other)),
        };
        summary.lost = lost;
        let take = usize::try_from(remaining).unwrap_or(usize::MAX);
        for packet in packets.iter().take(take) {
            match pcap.write(packet) {
                Ok(()) => summary.captured += 1,
                Err(SinkError::Malformed(_)) => summary.malformed += 1,
                Err(e) => return Err(sink_error(args, e)),
            }
        }
        pcap.flush().map_err(|e| sink_error(args, e))?;
    }
}

#[cfg(test)]
mod tests;
