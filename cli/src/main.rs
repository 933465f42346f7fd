//! `countersign`: the client CLI. Parsing and exit codes only; the commands live in the library.

use std::process::ExitCode;

use clap::Parser;
use countersign_cli::Cli;

fn main() -> ExitCode {
    match Cli::try_parse() {
        Ok(cli) => countersign_cli::run(cli),
        Err(error) => countersign_cli::refused(&error),
    }
}
