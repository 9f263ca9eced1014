//! A small QMP client (QEMU's JSON machine protocol) on a unix socket, for the live
//! migration tests: the greeting and `qmp_capabilities`, commands and their answers (the
//! asynchronous events in between are kept aside), and the migration commands those tests
//! use.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// How long one command may take to be answered.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// A QMP connection in command mode.
pub struct Qmp {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    /// The events QEMU sent so far (`{"event": ..., "data": ...}`), oldest first.
    pub events: Vec<Value>,
}

impl Qmp {
    /// Connects to the QMP socket at `path` (retrying until QEMU listens or `timeout`
    /// passes), reads the greeting and enters command mode.
    pub fn connect(path: &Path, timeout: Duration) -> Result<Qmp, String> {
        let deadline = Instant::now() + timeout;
        let stream = loop {
            match UnixStream::connect(path) {
                Ok(s) => break s,
                Err(e) if Instant::now() > deadline => {
                    return Err(format!("QMP socket {}: {e}", path.display()))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        };
        stream
            .set_read_timeout(Some(ANSWER_TIMEOUT))
            .map_err(|e| e.to_string())?;
        let writer = stream.try_clone().map_err(|e| e.to_string())?;
        let mut qmp = Qmp {
            reader: BufReader::new(stream),
            writer,
            events: Vec::new(),
        };
        let greeting = qmp.read_message()?;
        if greeting.get("QMP").is_none() {
            return Err(format!("not a QMP greeting: {greeting}"));
        }
        qmp.execute("qmp_capabilities", json!({}))?;
        Ok(qmp)
    }

    fn read_message(&mut self) -> Result<Value, String> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => Err("QMP connection closed".into()),
            Ok(_) => serde_json::from_str(&line).map_err(|e| format!("{e}: {line}")),
            Err(e) => Err(format!("reading QMP: {e}")),
        }
    }

    /// Runs `command` with `arguments` (an object; `{}` for none): its `return` value, or
    /// the error QEMU answered (`Class: description`).
    pub fn execute(&mut self, command: &str, arguments: Value) -> Result<Value, String> {
        let mut request = json!({ "execute": command });
        if arguments.as_object().is_some_and(|a| !a.is_empty()) {
            request["arguments"] = arguments;
        }
        let mut text = request.to_string();
        text.push('\n');
        self.writer
            .write_all(text.as_bytes())
            .map_err(|e| format!("sending {command}: {e}"))?;
        loop {
            let message = self.read_message()?;
            if message.get("event").is_some() {
                self.events.push(message);
                continue;
            }
            if let Some(value) = message.get("return") {
                return Ok(value.clone());
            }
            if let Some(error) = message.get("error") {
                return Err(format!(
                    "{}: {}",
                    error["class"].as_str().unwrap_or("?"),
                    error["desc"].as_str().unwrap_or("?")
                ));
            }
            return Err(format!("unexpected QMP message: {message}"));
        }
    }

    /// `command`, which must succeed.
    pub fn must(&mut self, command: &str, arguments: Value) -> Value {
        self.execute(command, arguments)
            .unwrap_or_else(|e| panic!("QMP {command}: {e}"))
    }

    /// `query-status`'s run state (`running`, `inmigrate`, `postmigrate`, `paused`...).
    pub fn run_state(&mut self) -> String {
        self.must("query-status", json!({}))["status"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// `query-migrate`'s whole answer.
    pub fn query_migrate(&mut self) -> Value {
        self.must("query-migrate", json!({}))
    }

    /// `query-migrate`'s status (`none`, `setup`, `active`, `device`, `completed`,
    /// `failed`, `cancelling`, `cancelled`...).
    pub fn migration_status(&mut self) -> String {
        self.query_migrate()["status"]
            .as_str()
            .unwrap_or("none")
            .to_string()
    }

    /// Sets the migration's bandwidth limit (bytes per second) and its longest allowed
    /// downtime (ms).
    pub fn set_migration_limits(&mut self, max_bandwidth: u64, downtime_limit_ms: u64) {
        self.must(
            "migrate-set-parameters",
            json!({ "max-bandwidth": max_bandwidth, "downtime-limit": downtime_limit_ms }),
        );
    }

    /// Starts an outgoing migration to `uri` (`unix:PATH`). QEMU answers at once; the
    /// migration goes on in the background (see [`Qmp::wait_migration`]).
    pub fn migrate(&mut self, uri: &str) -> Result<Value, String> {
        self.execute("migrate", json!({ "uri": uri }))
    }

    /// Makes a QEMU started with `-incoming defer` listen on `uri`.
    pub fn migrate_incoming(&mut self, uri: &str) {
        self.must("migrate-incoming", json!({ "uri": uri }));
    }

    /// Polls `query-migrate` every 20 ms until its status is one of `until` or `timeout`
    /// passes; the last answer (whatever its status).
    pub fn wait_migration(&mut self, until: &[&str], timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let answer = self.query_migrate();
            let status = answer["status"].as_str().unwrap_or("none");
            if until.contains(&status) || Instant::now() > deadline {
                return answer;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
