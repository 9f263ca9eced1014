//! `weft monitor upcalls`: `upcall_subscribe`, `upcall_read` in a loop, `upcall_unsubscribe`;
//! one JSON line per upcall on stdout, losses on stderr. Also what a controller written
//! against this crate calls to read upcalls ([`UpcallStream`]).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Serialize;
use weft_control::response::UpcallInfo;
use weft_control::{Request, Response};

use crate::cli::MonitorUpcallsArgs;
use crate::client::Daemon;
use crate::error::CliError;

/// Longest wait per `upcall_read`: short enough that Ctrl-C is seen promptly, well within
/// the 30 s after which weftd ends an unread subscription.
pub const READ_WAIT: Duration = Duration::from_millis(500);
/// Most upcalls asked for per read.
const READ_BATCH: u32 = 256;

/// A subscription being read.
pub struct UpcallStream {
    id: u64,
    lost: u64,
}

impl UpcallStream {
    /// Subscribes to `switch`'s upcalls (every switch's with `None`), holding at most
    /// `queue` unread at weftd (its default with `None`).
    pub fn subscribe(
        daemon: &mut dyn Daemon,
        switch: Option<String>,
        queue: Option<u32>,
    ) -> Result<UpcallStream, CliError> {
        match daemon.call(Request::UpcallSubscribe { switch, queue })? {
            Response::UpcallSubscribed { id } => Ok(UpcallStream { id, lost: 0 }),
            other => Err(crate::commands::unexpected("upcall_subscribe", &other)),
        }
    }

    /// The upcalls that came, waiting up to `wait` for the first; and how many more were
    /// lost since the last read (weftd's queue for this subscription was full).
    pub fn read(
        &mut self,
        daemon: &mut dyn Daemon,
        wait: Duration,
    ) -> Result<(Vec<UpcallInfo>, u64), CliError> {
        let request = Request::UpcallRead {
            id: self.id,
            max: Some(READ_BATCH),
            wait_ms: u32::try_from(wait.as_millis()).unwrap_or(u32::MAX),
        };
        match daemon.call_waiting(request, wait)? {
            Response::Upcalls { upcalls, lost } => {
                let new = lost.saturating_sub(self.lost);
                self.lost = lost;
                Ok((upcalls, new))
            }
            other => Err(crate::commands::unexpected("upcall_read", &other)),
        }
    }

    /// Upcalls lost so far.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Ends the subscription.
    pub fn unsubscribe(self, daemon: &mut dyn Daemon) -> Result<(), CliError> {
        daemon.call(Request::UpcallUnsubscribe { id: self.id })?;
        Ok(())
    }
}

/// What a monitor saw.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MonitorSummary {
    /// Upcalls printed.
    pub upcalls: u64,
    /// Upcalls weftd lost for this subscriber.
    pub lost: u64,
}

/// Prints upcalls as JSON lines on `out` until `--count`, or `stop`; losses go to `notes`
/// (stderr) as they are noticed. The subscription is ended whatever happens.
pub fn monitor_upcalls(
    daemon: &mut dyn Daemon,
    args: &MonitorUpcallsArgs,
    out: &mut dyn Write,
    notes: &mut dyn Write,
    stop: &AtomicBool,
) -> Result<MonitorSummary, CliError> {
    let mut stream = UpcallStream::subscribe(daemon, args.switch.clone(), args.queue)?;
    let mut summary = MonitorSummary::default();
    let result: Result<(), CliError> = (|| loop {
        if stop.load(Ordering::Relaxed) || args.count.is_some_and(|c| summary.upcalls >= c) {
            return Ok(());
        }
        let (upcalls, lost) = stream.read(daemon, READ_WAIT)?;
        if lost > 0 {
            let _ = writeln!(
                notes,
                "weft: {lost} upcall(s) lost: this monitor's queue at weftd was full"
            );
        }
        let left = args.count.map_or(usize::MAX, |c| {
            usize::try_from(c - summary.upcalls).unwrap_or(usize::MAX)
        });
        for u in upcalls.iter().take(left) {
            let line = serde_json::to_string(u).map_err(|e| CliError::Protocol(e.to_string()))?;
            writeln!(out, "{line}").map_err(|e| CliError::io("writing the output", e))?;
            summary.upcalls += 1;
        }
        out.flush()
            .map_err(|e| CliError::io("writing the output", e))?;
    })();
    summary.lost = stream.lost();
    let ended = stream.unsubscribe(daemon);
    result?;
    ended?;
    Ok(summary)
}

/// Decodes a frame given on the command line: hex digits, two per byte, optionally
/// separated by `:`, `-` or spaces (as tcpdump -xx and Wireshark copy them).
pub fn parse_frame(text: &str) -> Result<String, String> {
    let digits: String = text
        .chars()
        .filter(|c| !matches!(c, ':' | '-' | ' ' | '\n' | '\t'))
        .collect();
    match weft_control::codec::hex_decode(&digits) {
        Some(bytes) if bytes.len() >= 14 => Ok(digits.to_ascii_lowercase()),
        Some(bytes) => Err(format!(
            "a frame of {} bytes is shorter than an Ethernet header (14 bytes)",
            bytes.len()
        )),
        None => Err("not a frame in hex: give two hex digits per byte".into()),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use weft_control::response::UpcallReason;

    use super::*;

    /// Answers requests from a script, recording them.
    struct Script {
        answers: VecDeque<Response>,
        seen: Vec<Request>,
    }

    impl Daemon for Script {
        fn call_waiting(&mut self, request: Request, _: Duration) -> Result<Response, CliError> {
            self.seen.push(request);
            Ok(self.answers.pop_front().unwrap_or(Response::Done))
        }
    }

    fn upcall(n: u8) -> UpcallInfo {
        UpcallInfo {
            switch: "br0".into(),
            port: format!("p{n}"),
            reason: UpcallReason::Action,
            cookie: None,
            priority: None,
            orig_len: 14,
            data: "ff".repeat(14),
        }
    }

    #[test]
    fn upcalls_print_as_json_lines_losses_go_to_stderr_and_the_subscription_ends() {
        let mut d = Script {
            answers: VecDeque::from([
                Response::UpcallSubscribed { id: 3 },
                Response::Upcalls {
                    upcalls: vec![upcall(1)],
                    lost: 0,
                },
                Response::Upcalls {
                    upcalls: vec![upcall(2), upcall(3)],
                    lost: 5,
                },
            ]),
            seen: Vec::new(),
        };
        let args = MonitorUpcallsArgs {
            switch: Some("br0".into()),
            count: Some(2),
            queue: None,
        };
        let (mut out, mut notes) = (Vec::new(), Vec::new());
        let s =
            monitor_upcalls(&mut d, &args, &mut out, &mut notes, &AtomicBool::new(false)).unwrap();
        assert_eq!(
            s,
            MonitorSummary {
                upcalls: 2,
                lost: 5
            }
        );
        let out = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2, "stops at --count: {out}");
        assert!(lines[0].starts_with(r#"{"switch":"br0","port":"p1","reason":"action","#));
        assert!(String::from_utf8(notes)
            .unwrap()
            .contains("5 upcall(s) lost"));
        assert_eq!(d.seen.last(), Some(&Request::UpcallUnsubscribe { id: 3 }));
    }

    #[test]
    fn frames_on_the_command_line_are_hex_with_optional_separators() {
        let f = "ff:ff:ff:ff:ff:ff 02-00-00-00-00-01 0806";
        assert_eq!(parse_frame(f).unwrap(), "ffffffffffff0200000000010806");
        assert!(parse_frame("ffff").unwrap_err().contains("shorter"));
        assert!(parse_frame("fffg").unwrap_err().contains("hex"));
        assert!(parse_frame("fff").unwrap_err().contains("hex"));
    }
}
