//! `weftd`: the weft daemon (and `weftd demo`, a demonstration of the switch core).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The weft daemon: user-space virtual switches, driven through a control socket (see
/// the `weft` CLI).
#[derive(Parser, Debug)]
#[command(version, about, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: weftd::daemon::RunArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Push traffic through switch br0 with in-memory ports and print the counters (a
    /// demonstration of the switch core; needs no daemon and no devices).
    Demo(weftd::demo::DemoArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Demo(args)) => match weftd::demo::run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("weftd demo: {e:#}");
                ExitCode::FAILURE
            }
        },
        None => weftd::daemon::run(&cli.run),
    }
}
