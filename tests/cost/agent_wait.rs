//! An agent's wait (issue 49): an MCP task polled every `pollIntervalMs` (5 s, what
//! `countersign mcp` asks: each `tasks/get` one plain `GET /approvals/{id}`) against the
//! blocking call's held reads (one 20 s hold after another), per minute of waiting and per
//! million waits — rendered as "An agent's wait: a task or a held read".

use std::fmt::Write as _;

use crate::bill::Bill;
use crate::render::money;

/// `countersign mcp`'s `pollIntervalMs`: a task's client polls every 5 s.
const POLL_SECONDS: f64 = 5.0;
/// A blocking call's held reads: 20 s each.
const HOLD_SECONDS: f64 = 20.0;
/// The waits priced per million: a vote in a few minutes, a person at lunch, a day's end.
const WAITS_MINUTES: [f64; 3] = [5.0, 60.0, 480.0];

pub(crate) fn render(w: &mut String, bill: &Bill<'_>) {
    let poll: f64 = bill.task_poll().iter().map(|(_, usd)| usd).sum();
    let hold: f64 = bill
        .held_read(HOLD_SECONDS)
        .iter()
        .map(|(_, usd)| usd)
        .sum();
    let task_minute = 60.0 / POLL_SECONDS * poll;
    let held_minute = 60.0 / HOLD_SECONDS * hold;
    writeln!(w, "## An agent's wait: a task or a held read\n").expect("write");
    writeln!(
        w,
        "An agent that asks `countersign mcp` for an approval waits for a person. With the MCP \
         tasks extension the call answers at once with a task, and the client polls `tasks/get` \
         every {POLL_SECONDS:.0} s (`pollIntervalMs`): each poll one plain \
         `GET /approvals/{{id}}` — an API Gateway request, a read invocation of a few \
         milliseconds, one strongly consistent read — {} per million polls. Without it, the \
         blocking call waits in held reads of {HOLD_SECONDS:.0} s, each billing the read \
         function its whole hold: {} per million. What the approval itself costs is the same \
         either way (above).\n",
        money(poll * 1e6),
        money(hold * 1e6),
    )
    .expect("write");
    writeln!(w, "| a wait of | as a task (polled every {POLL_SECONDS:.0} s) | in held reads ({HOLD_SECONDS:.0} s each) |").expect("write");
    writeln!(w, "|---|---|---|").expect("write");
    writeln!(
        w,
        "| one minute, per million minutes | {} | {} |",
        money(task_minute * 1e6),
        money(held_minute * 1e6)
    )
    .expect("write");
    for minutes in WAITS_MINUTES {
        writeln!(
            w,
            "| {minutes:.0} minutes, per million waits | {} | {} |",
            money(task_minute * minutes * 1e6),
            money(held_minute * minutes * 1e6)
        )
        .expect("write");
    }
    writeln!(
        w,
        "\nA task costs {:.0}% of a held read's wait, minute for minute, and holds no \
         connection: the agent's own client may go away and come back (a held read's client \
         gives up on a tool call after a minute or so, and starts the wait again).\n",
        task_minute / held_minute * 100.0
    )
    .expect("write");
}
