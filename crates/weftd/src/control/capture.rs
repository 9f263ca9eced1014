//! `capture_start`, `capture_read`, `capture_stop`, and the long-poll shared with
//! `upcall_read`.
//!
//! A capture copies a port's frames into a bounded buffer (the switch does, once per
//! batch, counting what does not fit as lost); `capture_read` drains it. A capture belongs
//! to the connection that started it and ends with it, so a client that goes away leaves
//! nothing running. Removing the port or its switch ends the capture too: what was
//! captured can still be read, then reads answer `not_found`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use weft_control::response::CapturedPacket;
use weft_control::{CaptureDirection, ControlError, ErrorKind, Request, Response};
use weft_switch::capture::{CaptureBuffer, CaptureDirection as Way};
use weft_switch::PortId;

use super::{limit, Controller};

/// Captures running at once, at most.
pub const MAX_CAPTURES: usize = 8;
/// Memory a capture buffer may hold: its frame count is this over the snap length.
const BUFFER_BYTES: usize = 16 << 20;
/// Bytes of frames one `capture_read` returns, at most (hex doubles them on the wire).
const READ_BYTES: usize = 4 << 20;
/// The longest `wait_ms`.
pub(super) const MAX_WAIT_MS: u32 = 5000;

struct Capture {
    switch: String,
    port: String,
    port_id: PortId,
    snaplen: usize,
    buffer: Arc<CaptureBuffer>,
    /// Why the capture stopped by itself (its port went away).
    ended: Option<String>,
}

/// The running captures.
#[derive(Default)]
pub(super) struct Captures {
    last_id: u64,
    running: BTreeMap<u64, Capture>,
}

impl Captures {
    /// Ends the captures on a switch that goes away.
    pub(super) fn end_switch(&mut self, switch: &str) {
        for c in self.running.values_mut().filter(|c| c.switch == switch) {
            c.ended = Some(format!("switch {switch:?} was removed"));
        }
    }

    /// Ends the captures on a port that goes away.
    pub(super) fn end_port(&mut self, switch: &str, port: &str) {
        for c in self
            .running
            .values_mut()
            .filter(|c| c.switch == switch && c.port == port)
        {
            c.ended = Some(format!("port {port:?} was removed"));
        }
    }
}

/// What one connection holds: the captures it started, and whose permissions the files its
/// requests name are opened with.
#[derive(Debug, Default)]
pub struct Session {
    captures: Vec<u64>,
    /// The upcall subscriptions it made.
    pub(super) upcalls: Vec<u64>,
    files_as: super::FileReader,
}

impl Session {
    /// A connection whose named files are opened as `files_as`.
    pub fn new(files_as: super::FileReader) -> Session {
        Session {
            captures: Vec::new(),
            upcalls: Vec::new(),
            files_as,
        }
    }
}

fn no_capture(id: u64) -> ControlError {
    ControlError::not_found(format!("no capture {id}")).with_hint(
        "start one with capture_start; a capture ends with the connection that started it",
    )
}

fn way(d: CaptureDirection) -> Way {
    match d {
        CaptureDirection::In => Way::In,
        CaptureDirection::Out => Way::Out,
        CaptureDirection::Both => Way::Both,
    }
}

impl Controller {
    pub(super) fn capture_start(
        &mut self,
        switch: &str,
        port: &str,
        direction: CaptureDirection,
        snaplen: Option<u32>,
        session: &mut Session,
    ) -> Result<Response, ControlError> {
        let snaplen = snaplen.unwrap_or(65535);
        if !(14..=65535).contains(&snaplen) {
            return Err(ControlError::invalid(format!(
                "snaplen {snaplen} is out of range: use 14 to 65535 bytes"
            )));
        }
        let snaplen = usize::try_from(snaplen).unwrap_or(65535);
        let port_id = self.port_rt(switch, port)?.id;
        let workers = self.switch_rt(switch)?.workers.clone();
        if self.captures.running.len() >= MAX_CAPTURES {
            return Err(
                limit(format!("{MAX_CAPTURES} captures are running already"))
                    .with_hint("stop one (capture_stop), or close the connection that started it"),
            );
        }
        let frames = (BUFFER_BYTES / snaplen).clamp(64, 4096);
        let buffer = Arc::new(CaptureBuffer::new(frames, snaplen));
        let for_switch = Arc::clone(&buffer);
        // Every lane copies into the one buffer (one lock per batch).
        self.pool
            .on_lanes(&workers, switch, move |sw, _| {
                sw.start_capture(port_id, way(direction), Arc::clone(&for_switch))
            })?
            .into_iter()
            .collect::<Result<Vec<()>, _>>()
            .map_err(|e| super::internal(format!("starting the capture: {e}")))?;
        self.captures.last_id += 1;
        let id = self.captures.last_id;
        self.captures.running.insert(
            id,
            Capture {
                switch: switch.to_string(),
                port: port.to_string(),
                port_id,
                snaplen,
                buffer,
                ended: None,
            },
        );
        session.captures.push(id);
        Ok(Response::CaptureStarted { id })
    }

    pub(super) fn capture_read(
        &mut self,
        id: u64,
        max: Option<u32>,
    ) -> Result<Response, ControlError> {
        let capture = self
            .captures
            .running
            .get(&id)
            .ok_or_else(|| no_capture(id))?;
        let max = usize::try_from(max.unwrap_or(256)).unwrap_or(usize::MAX);
        if max == 0 {
            return Err(ControlError::invalid("max must be at least 1"));
        }
        let max = max.min((READ_BYTES / capture.snaplen).max(1));
        let mut packets = Vec::new();
        capture.buffer.drain(max, |f| {
            packets.push(CapturedPacket {
                time_ns: weft_runtime::wall_time_ns(f.time),
                direction: match f.direction {
                    Way::Out => CaptureDirection::Out,
                    Way::In | Way::Both => CaptureDirection::In,
                },
                orig_len: u32::try_from(f.orig_len).unwrap_or(u32::MAX),
                data: weft_control::codec::hex_encode(f.data),
            });
        });
        let lost = capture.buffer.lost();
        if packets.is_empty() {
            if let Some(why) = &capture.ended {
                let e = ControlError::not_found(format!("capture {id} has ended: {why}"));
                self.captures.running.remove(&id);
                return Err(e);
            }
        }
        Ok(Response::CapturePackets { packets, lost })
    }

    pub(super) fn capture_stop(
        &mut self,
        id: u64,
        session: &mut Session,
    ) -> Result<Response, ControlError> {
        let capture = self
            .captures
            .running
            .remove(&id)
            .ok_or_else(|| no_capture(id))?;
        session.captures.retain(|c| *c != id);
        if capture.ended.is_none() {
            if let Ok(rt) = self.switch_rt(&capture.switch) {
                let (port, buffer) = (capture.port_id, capture.buffer);
                self.pool
                    .on_lanes(&rt.workers, &capture.switch, move |sw, _| {
                        sw.stop_capture(port, &buffer)
                    })?;
            }
        }
        Ok(Response::Done)
    }

    /// Ends what a connection left running.
    pub fn end_session(&mut self, session: &mut Session) {
        for id in std::mem::take(&mut session.captures) {
            let _ = self.capture_stop(id, session);
        }
        self.end_upcall_session(session);
    }
}

/// Locks the controller. A panic in a handler does not make the daemon unusable: the
/// configuration only changes after validation, so what the lock guards stays coherent.
pub fn lock(controller: &Mutex<Controller>) -> std::sync::MutexGuard<'_, Controller> {
    controller.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Answers a request, waiting outside the lock when a `capture_read` or an `upcall_read`
/// asks to wait.
pub fn serve(
    controller: &Mutex<Controller>,
    request: Request,
    session: &mut Session,
) -> Result<Response, ControlError> {
    let wait_ms = match &request {
        Request::CaptureRead { wait_ms, .. } | Request::UpcallRead { wait_ms, .. } => *wait_ms,
        _ => {
            // Files the request names are read before the lock, which others wait for.
            let files = super::client_files::ClientFiles::prefetch(&request, &session.files_as);
            return lock(controller).handle_with_files(request, session, files);
        }
    };
    if wait_ms > MAX_WAIT_MS {
        return Err(ControlError::new(
            ErrorKind::Invalid,
            format!("wait_ms {wait_ms} is too long: wait at most {MAX_WAIT_MS} ms per read"),
        ));
    }
    let deadline = Instant::now() + Duration::from_millis(u64::from(wait_ms));
    loop {
        let answer = {
            let mut c = lock(controller);
            match &request {
                Request::UpcallRead { id, max, .. } => c.upcall_read(*id, *max),
                Request::CaptureRead { id, max, .. } => c.capture_read(*id, *max),
                _ => c.handle(request.clone(), session),
            }
        };
        let empty = match &answer {
            Ok(Response::CapturePackets { packets, .. }) => packets.is_empty(),
            Ok(Response::Upcalls { upcalls, .. }) => upcalls.is_empty(),
            _ => false,
        };
        let now = Instant::now();
        if !empty || now >= deadline {
            return answer;
        }
        std::thread::sleep((deadline - now).min(Duration::from_millis(20)));
    }
}
