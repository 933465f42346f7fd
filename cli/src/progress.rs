//! What a waiting command says while it waits, on standard error (standard output keeps the
//! result, for `--json`): on a terminal one line rewritten in place, elsewhere (CI logs) one
//! plain line per change.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use crate::duration;

pub struct Progress {
    terminal: bool,
    /// The rewritable line is on screen and not yet ended.
    open: bool,
    last: String,
    started: Instant,
}

impl Default for Progress {
    fn default() -> Self {
        Self::new()
    }
}

impl Progress {
    pub fn new() -> Self {
        Self {
            terminal: std::io::stderr().is_terminal(),
            open: false,
            last: String::new(),
            started: Instant::now(),
        }
    }

    /// A line that stays: what happened (created, attached, a retry).
    pub fn note(&mut self, text: &str) {
        self.end_line();
        stderr_line(&format!("countersign: {text}"));
    }

    /// A request failed in a way worth another try, after `pause`.
    pub fn retry(&mut self, what: &str, pause: Duration) {
        self.note(&format!("{what}; retrying in {}", duration::human(pause)));
    }

    /// Where `id` stands now; on a terminal redrawn every time (with the time waited), elsewhere
    /// printed when it changed.
    pub fn state(&mut self, id: &str, state: &str) {
        let changed = state != self.last;
        if changed {
            state.clone_into(&mut self.last);
        }
        if self.terminal {
            let waited = duration::human(self.started.elapsed());
            let line = fit(&format!("{id}  {state} · waited {waited}"));
            let mut err = std::io::stderr().lock();
            // Carriage return and erase-line: the line is drawn again in place.
            let _ = write!(err, "\r\x1b[2K{line}");
            let _ = err.flush();
            self.open = true;
        } else if changed {
            stderr_line(&format!("countersign: {id} {state}"));
        }
    }

    /// Ends the rewritten line, so that what follows starts on a line of its own.
    pub fn end_line(&mut self) {
        if self.open {
            stderr_line("");
            self.open = false;
        }
    }
}

/// Cut to the terminal's width (`COLUMNS`, else 80): a wrapped line cannot be redrawn in place.
fn fit(line: &str) -> String {
    let width = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse::<usize>().ok())
        .unwrap_or(80)
        .max(20);
    if line.chars().count() < width {
        return line.to_owned();
    }
    line.chars().take(width - 2).collect::<String>() + "…"
}

/// A line on standard error; a closed stream is not worth failing for.
pub fn stderr_line(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

/// A line on standard output; a closed pipe (`| head`) ends nothing but the output.
pub fn stdout_line(text: &str) {
    let _ = writeln!(std::io::stdout().lock(), "{text}");
}
