//! `countersign`, the client CLI: everything goes through the HTTP API (`COUNTERSIGN_URL`, with
//! `COUNTERSIGN_API_KEY`). `request --wait` is a CI gate whose exit code is the outcome.

pub mod approval;
pub mod args;
pub mod client;
mod commands;
mod delegate;
pub mod duration;
pub mod error;
mod gate;
mod input;
pub mod keys;
pub mod mcp;
pub mod passkeys;
pub mod policy;
pub mod progress;
pub mod render;

use std::process::ExitCode;

pub use args::Cli;
pub use error::CliError;

use crate::args::Command;
use crate::client::Api;
use crate::progress::{stderr_line, stdout_line};

/// The exit code of every error: usage, transport, an API refusal, a timeout.
pub const EXIT_ERROR: u8 = 4;

/// Runs a parsed command line to its exit code; errors are printed here (as JSON with `--json`).
pub fn run(cli: Cli) -> ExitCode {
    let json = cli.json;
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Transport(format!("cannot start: {e}")))
        .and_then(|runtime| runtime.block_on(dispatch(cli)));
    match result {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            if json {
                stderr_line(&error.to_json().to_string());
            } else {
                stderr_line(&error.to_text());
            }
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// What a command line clap refused ends with: help and version exit 0, a usage error 4 (not
/// clap's 2, which is the gate's "expired or cancelled").
pub fn refused(error: &clap::Error) -> ExitCode {
    let _ = error.print();
    if error.exit_code() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_ERROR)
    }
}

async fn dispatch(cli: Cli) -> Result<u8, CliError> {
    // Key administration goes to the keys table over AWS credentials, not through the API.
    // So do a tenant's approval policy and groups: no API key changes who must approve.
    let command = match cli.command {
        Command::Keys(command) => return keys::run(command, cli.json).await,
        Command::Policy(command) => return policy::run(command, cli.json).await,
        Command::Groups(command) => return policy::run_groups(command, cli.json).await,
        Command::Passkeys(command) => return passkeys::run(command, cli.json).await,
        // Offline: no API key, no AWS call (a JWKS URL is the one request it may make).
        Command::Verify(args) => return passkeys::verify(args, cli.url.as_deref(), cli.json).await,
        command => command,
    };
    let cli = Cli { command, ..cli };
    let api = connect(cli.url.as_deref(), cli.api_key.as_deref())?;
    let out = Output { json: cli.json };
    match cli.command {
        Command::Request(args) => gate::request(&api, out, args).await,
        Command::List(args) => commands::list(&api, out, args).await,
        Command::Show(args) => commands::show(&api, out, &args.id).await,
        Command::Vote(args) => commands::vote(&api, out, args).await,
        Command::Events(args) => commands::events(&api, out, args).await,
        Command::Cancel(args) => commands::cancel(&api, out, args).await,
        Command::Claim(args) => commands::claim(&api, out, args).await,
        Command::Report(args) => commands::report(&api, out, args).await,
        Command::Delegate(command) => delegate::run(&api, out, command).await,
        Command::Keys(_)
        | Command::Policy(_)
        | Command::Groups(_)
        | Command::Passkeys(_)
        | Command::Verify(_) => {
            unreachable!("handled above")
        }
        Command::Mcp => {
            let agent = mcp::AgentConfig::from_lookup(|name| std::env::var(name).ok())?;
            mcp::serve(api, agent).await
        }
    }
}

fn connect(url: Option<&str>, key: Option<&str>) -> Result<Api, CliError> {
    fn present(value: Option<&str>) -> Option<&str> {
        value.map(str::trim).filter(|v| !v.is_empty())
    }
    let url = present(url).ok_or_else(|| {
        CliError::Usage("no API URL: set COUNTERSIGN_URL (or pass --url)".to_owned())
    })?;
    let key = present(key).ok_or_else(|| {
        CliError::Usage("no API key: set COUNTERSIGN_API_KEY (or pass --api-key)".to_owned())
    })?;
    Api::new(url, key)
}

/// Where results go: standard output, as text or as JSON.
#[derive(Debug, Clone, Copy)]
struct Output {
    json: bool,
}

impl Output {
    /// An approval: its JSON as the API sent it, or its text.
    fn approval(self, body: &serde_json::Value) -> Result<(), CliError> {
        if self.json {
            stdout_line(&body.to_string());
        } else {
            stdout_line(&render::approval(&approval::parse(body)?));
        }
        Ok(())
    }
}
