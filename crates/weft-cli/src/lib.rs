//! `weft`, the command-line client of weftd: a thin layer over the control protocol
//! (`weft-control`) in the style of `ip` and `ovs-vsctl`.
//!
//! [`cli`] holds the clap types, [`commands`] maps them to requests (without a socket, so
//! the mapping is tested directly) and runs them through a [`client::Client`]; [`output`]
//! prints answers as tables or JSON; [`rule_syntax`] is the ovs-ofctl-like flow rule text;
//! [`top`], [`capture`] and [`monitor`] are the commands that talk to weftd in a loop.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod capture;
pub mod cli;
pub mod cli_overlay;
pub mod cli_policy;
pub mod client;
pub mod commands;
pub mod error;
pub mod monitor;
pub mod output;
pub mod rule_syntax;
pub mod terminal;
pub mod top;
pub mod upgrade;

use std::io::{self, Write};

pub use error::{exit, CliError};

/// Runs `weft` with parsed arguments, printing results on stdout and errors on stderr;
/// returns the exit code.
pub fn main_with(cli: &cli::Cli) -> u8 {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    match commands::run(cli, &mut out) {
        Ok(()) => exit::OK,
        // `weft ... | head` closing the pipe early is not a failure worth a message.
        Err(CliError::Io { source, .. }) if source.kind() == io::ErrorKind::BrokenPipe => exit::OK,
        Err(e) => {
            let _ = io::stderr().write_all(e.render().as_bytes());
            e.exit_code()
        }
    }
}
