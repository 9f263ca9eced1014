//! The `weft` binary: parse the command line, run it, exit with its code.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = weft_cli::cli::Cli::parse();
    ExitCode::from(weft_cli::main_with(&cli))
}
