//! Carrying out a plan: connect, send, print.

use std::fs::File;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use clap::CommandFactory;
use serde::Serialize;
use weft_control::{Request, Response, PROTOCOL_VERSION};

use super::{plan, updated_settings, Plan, PortChanges};
use crate::capture::{capture, CaptureSummary};
use crate::cli::{CaptureArgs, Cli, GlobalArgs};
use crate::client::{default_socket_path, Client, Daemon, Endpoint};
use crate::error::CliError;
use crate::output::{human, json, kind_name};
use crate::top;

/// Runs the command, printing results on `out` (errors are returned, not printed).
pub fn run(cli: &Cli, out: &mut dyn Write) -> Result<(), CliError> {
    let json_output = cli.global.json;
    let text = match plan(&cli.command)? {
        Plan::Completions(shell) => {
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "weft", &mut buf);
            return write_out(out, &buf);
        }
        Plan::Version => version(&cli.global, json_output)?,
        Plan::Call(request) => {
            let response = connect(&cli.global)?.call(request.clone())?;
            if json_output {
                json(&response)
            } else {
                human(&request, &response)
            }
        }
        Plan::PortSet {
            switch,
            port,
            changes,
        } => {
            let mut client = connect(&cli.global)?;
            let response = port_set(&mut client, switch, port, &changes)?;
            if json_output {
                json(&response)
            } else {
                String::new()
            }
        }
        Plan::Route(cmd) => {
            let mut client = connect(&cli.global)?;
            super::route::run(&mut client, cmd, json_output)?
        }
        Plan::Top(args) => {
            let mut client = connect(&cli.global)?;
            let live = !json_output && io::stdout().is_terminal();
            if live {
                let stop = interrupt_flag()?;
                return top::run_live(&mut client, args, out, &stop);
            }
            let sample = top::sample_once(&mut client, args)?;
            if json_output {
                json(&sample)
            } else {
                top::render(&sample, args.interval)
            }
        }
        Plan::Capture(args) => return run_capture(&cli.global, args, out),
        Plan::MonitorUpcalls(args) => {
            let mut client = connect(&cli.global)?;
            let stop = interrupt_flag()?;
            let summary =
                crate::monitor::monitor_upcalls(&mut client, args, out, &mut io::stderr(), &stop)?;
            let _ = writeln!(
                io::stderr(),
                "weft: {} upcall(s) printed, {} lost",
                summary.upcalls,
                summary.lost
            );
            return Ok(());
        }
        Plan::Upgrade(args) => {
            let Endpoint::Unix(socket) = endpoint(&cli.global)? else {
                return Err(CliError::usage(
                    "weft upgrade runs on weftd's host, over its Unix control socket",
                    "run it there without --connect (with --socket if weftd's is elsewhere)",
                ));
            };
            let done = crate::upgrade::upgrade(&socket, args)?;
            if json_output {
                json(&done)
            } else {
                format!(
                    "weftd upgraded: pid {} -> pid {} ({}), ready after {} ms\n",
                    done.old_pid, done.new_pid, done.new_version, done.elapsed_ms
                )
            }
        }
    };
    write_out(out, text.as_bytes())
}

fn write_out(out: &mut dyn Write, bytes: &[u8]) -> Result<(), CliError> {
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .map_err(|e| CliError::io("writing the output", e))
}

/// Connects to the daemon the global options name.
pub fn connect(global: &GlobalArgs) -> Result<Client, CliError> {
    Client::connect(&endpoint(global)?, global.timeout)
}

fn endpoint(global: &GlobalArgs) -> Result<Endpoint, CliError> {
    if let Some(addr) = &global.connect {
        let Some(file) = &global.token_file else {
            return Err(CliError::usage(
                "--connect needs --token-file",
                "weftd's TCP listener only takes requests that carry its token",
            ));
        };
        let token = std::fs::read_to_string(file)
            .map_err(|e| CliError::io(format!("reading the token file {}", file.display()), e))?;
        return Ok(Endpoint::Tcp {
            addr: addr.clone(),
            token: token.trim().to_string(),
        });
    }
    Ok(Endpoint::Unix(
        global.socket.clone().unwrap_or_else(default_socket_path),
    ))
}

/// Reads the port's options, applies `changes`, sends `port_set`.
pub fn port_set(
    daemon: &mut dyn Daemon,
    switch: String,
    port: String,
    changes: &PortChanges,
) -> Result<Response, CliError> {
    let current = match daemon.call(Request::PortShow {
        switch: switch.clone(),
        name: port.clone(),
    })? {
        Response::Port { port, .. } => port.options,
        other => return Err(unexpected("port_show", &other)),
    };
    daemon.call(Request::PortSet {
        switch,
        name: port,
        options: updated_settings(current, changes)?,
    })
}

/// The error for an answer of the wrong kind.
pub fn unexpected(request: &str, response: &Response) -> CliError {
    CliError::Protocol(format!(
        "weftd answered '{}' to a {request} request",
        kind_name(response)
    ))
}

#[derive(Serialize)]
struct VersionReport {
    weft: &'static str,
    protocol_version: u32,
    weftd: Response,
}

fn version(global: &GlobalArgs, json_output: bool) -> Result<String, CliError> {
    let mine = env!("CARGO_PKG_VERSION");
    let hello = connect(global).and_then(|mut c| c.call(Request::Hello {}));
    let hello = match hello {
        Ok(h) => h,
        Err(e) => {
            // Say our own version even when the daemon cannot be asked.
            if !json_output {
                let _ = writeln!(io::stderr(), "weft {mine} (protocol {PROTOCOL_VERSION})");
            }
            return Err(e);
        }
    };
    if json_output {
        return Ok(json(&VersionReport {
            weft: mine,
            protocol_version: PROTOCOL_VERSION,
            weftd: hello,
        }));
    }
    Ok(format!(
        "weft {mine} (protocol {PROTOCOL_VERSION})\n{}",
        human(&Request::Hello {}, &hello)
    ))
}

/// A flag that SIGINT and SIGTERM raise, so loops can stop cleanly.
fn interrupt_flag() -> Result<Arc<AtomicBool>, CliError> {
    let flag = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&flag))
            .map_err(|e| CliError::io("installing the Ctrl-C handler", e))?;
    }
    Ok(flag)
}

fn run_capture(
    global: &GlobalArgs,
    args: &CaptureArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let to_stdout = args.file == Path::new("-");
    if to_stdout && global.json {
        return Err(CliError::usage(
            "--json and -w - both want stdout",
            "write the capture to a file, or drop --json",
        ));
    }
    let mut client = connect(global)?;
    let stop = interrupt_flag()?;
    let summary = if to_stdout {
        capture(&mut client, args, out, &stop)?
    } else {
        let file = File::create(&args.file)
            .map_err(|e| CliError::io(format!("creating {}", args.file.display()), e))?;
        let mut sink = BufWriter::new(file);
        capture(&mut client, args, &mut sink, &stop)?
    };
    if global.json {
        return write_out(out, json(&summary).as_bytes());
    }
    let line = summary_line(&summary, &args.file);
    if to_stdout {
        let _ = io::stderr().write_all(line.as_bytes());
        Ok(())
    } else {
        write_out(out, line.as_bytes())
    }
}

fn summary_line(s: &CaptureSummary, file: &Path) -> String {
    let mut line = format!(
        "{} packet{} captured to {}, {} lost",
        s.captured,
        if s.captured == 1 { "" } else { "s" },
        if file == Path::new("-") {
            "stdout".into()
        } else {
            file.display().to_string()
        },
        s.lost
    );
    if s.malformed > 0 {
        line.push_str(&format!(
            ", {} malformed packets from weftd skipped",
            s.malformed
        ));
    }
    line.push('\n');
    line
}
