//! The smallest control client: sends request lines to weftd's socket and prints the
//! response lines. It shows the protocol (one JSON object per line, each way) and serves
//! the daemon's tests as a client they can run as another user.
//!
//! ```sh
//! cargo run -p weftd --example control_client -- /run/weft/weftd.sock \
//!     '{"version":1,"id":1,"request":{"op":"switch_list"}}'
//! ```
//!
//! Prints each response line; exits 0 when every request got an `ok`, 1 when one got an
//! `error` (or the daemon closed first), 2 when it could not connect.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(socket) = args.next() else {
        eprintln!("usage: control_client SOCKET REQUEST-JSON...");
        return ExitCode::from(2);
    };
    let stream = match UnixStream::connect(&socket) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("control_client: cannot connect to {socket}: {e}");
            return ExitCode::from(2);
        }
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(&stream);
    let mut writer = &stream;
    let mut all_ok = true;
    let requests: Vec<String> = args.collect();
    // With no request, just print what the daemon says on connect (a refusal, say).
    if requests.is_empty() {
        let mut line = String::new();
        let _ = reader.read_line(&mut line);
        print!("{line}");
        return ExitCode::SUCCESS;
    }
    for request in requests {
        if writeln!(writer, "{request}").is_err() {
            all_ok = false;
        }
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(n) if n > 0 => {
                print!("{line}");
                all_ok &= line.contains("\"ok\":");
            }
            _ => {
                eprintln!("control_client: no response");
                return ExitCode::FAILURE;
            }
        }
    }
    if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
