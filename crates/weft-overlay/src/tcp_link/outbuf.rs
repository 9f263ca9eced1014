//! The transmit side's bounded output buffer: encoded frames wait here for room in the socket.
//!
//! A burst is encoded into the buffer (header, rewritten head, body: one copy, as the switch
//! would make into a guest's ring) and written with one `send`; what the socket does not take
//! stays, and the link thread writes it when the socket has room. The buffer never grows:
//! frames that do not fit are refused and counted.

use std::io::Write;
use std::net::TcpStream;
use std::sync::Arc;

use weft_switch::TxFrame;

use super::framing::{write_header, HEADER_LEN};
use super::stats::TcpLinkStats;

/// The write failed: the connection is broken (and has been shut down).
#[derive(Debug)]
pub(crate) struct Broken;

/// Bytes on their way to the peer.
pub(crate) struct OutBuf {
    stream: Option<Arc<TcpStream>>,
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl OutBuf {
    /// A buffer of `capacity` bytes, without a connection.
    pub(crate) fn new(capacity: usize) -> OutBuf {
        OutBuf {
            stream: None,
            buf: vec![0; capacity],
            start: 0,
            end: 0,
        }
    }

    /// Starts over on `stream` (or none): bytes of the old stream mean nothing on a new one.
    pub(crate) fn attach(&mut self, stream: Option<Arc<TcpStream>>) {
        self.stream = stream;
        self.start = 0;
        self.end = 0;
    }

    /// True when a connection is attached.
    pub(crate) fn is_connected(&self) -> bool {
        self.stream.is_some()
    }

    /// True when bytes wait for room in the socket.
    pub(crate) fn has_pending(&self) -> bool {
        self.start < self.end
    }

    /// The bytes waiting for room in the socket.
    pub(crate) fn pending(&self) -> &[u8] {
        self.buf.get(self.start..self.end).unwrap_or(&[])
    }

    /// Puts `bytes` (carried over from another process) first in line; false (nothing
    /// changed) when they do not fit.
    pub(crate) fn load(&mut self, bytes: &[u8]) -> bool {
        let Some(to) = self.buf.get_mut(..bytes.len()) else {
            return false;
        };
        to.copy_from_slice(bytes);
        self.start = 0;
        self.end = bytes.len();
        true
    }

    /// Appends one encoded frame; false (nothing written) when it does not fit.
    pub(crate) fn push(&mut self, link_id: u32, frame: &TxFrame<'_>) -> bool {
        let Ok(len) = u32::try_from(frame.len()) else {
            return false;
        };
        let need = HEADER_LEN + frame.len();
        if self.buf.len() - self.end < need {
            if self.buf.len() - (self.end - self.start) < need {
                return false;
            }
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let Some(out) = self.buf.get_mut(self.end..self.end + need) else {
            return false;
        };
        let (h, rest) = out.split_at_mut(HEADER_LEN);
        let mut header = [0u8; HEADER_LEN];
        write_header(&mut header, link_id, len, &frame.offload);
        h.copy_from_slice(&header);
        if frame.copy_to(rest).is_none() {
            return false;
        }
        self.end += need;
        true
    }

    /// Writes what the socket takes now. On a broken connection, shuts it down (the link
    /// thread then replaces it), drops the bytes and says so.
    pub(crate) fn flush(&mut self, stats: &TcpLinkStats) -> Result<(), Broken> {
        let Some(stream) = &self.stream else {
            self.start = 0;
            self.end = 0;
            return Ok(());
        };
        while self.start < self.end {
            match (&**stream).write(&self.buf[self.start..self.end]) {
                Ok(0) => return self.broken(stats),
                Ok(n) => self.start += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return self.broken(stats),
            }
        }
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        Ok(())
    }

    fn broken(&mut self, stats: &TcpLinkStats) -> Result<(), Broken> {
        stats.io_error();
        if let Some(s) = &self.stream {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        // Until the link thread attaches the next connection, frames count as sent while
        // disconnected.
        self.stream = None;
        self.start = 0;
        self.end = 0;
        Err(Broken)
    }
}
