//! Rendering: `docs/COST.md` from the lives' counts and the bill (`render_bill`).

use std::fmt::Write as _;

use crate::bill::Bill;
use crate::history::*;
use crate::model::*;
use crate::prices::*;
use crate::render_bill;
use crate::scenarios::log_level;
use crate::stall::Stalls;
use crate::storage::SHORT_DAYS;

/// The tables, as `infra/tables.json` names them.
pub(crate) const TABLES: [&str; 6] = [
    "approvals",
    "approval_index",
    "events",
    "execution_ledger",
    "idempotency_keys",
    "webhook_inbox",
];

/// Dollars and cents, thousands separated ($1,036.08).
pub(crate) fn money(usd: f64) -> String {
    let cents = format!("{usd:.2}");
    let (whole, fraction) = cents.split_once('.').expect("a decimal point");
    let (sign, digits) = whole.strip_prefix('-').map_or(("", whole), |d| ("-", d));
    format!(
        "{sign}${}.{fraction}",
        thousands(digits.parse().expect("digits"))
    )
}

/// 1,000,000 (for a count of approvals).
pub(crate) fn thousands(n: f64) -> String {
    let digits = format!("{n:.0}");
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub(crate) fn row(out: &mut String, what: &str, cells: impl Iterator<Item = String>) {
    let cells: Vec<String> = cells.collect();
    writeln!(out, "| {what} | {} |", cells.join(" | ")).expect("write");
}

pub(crate) fn render(lives: &[(&str, Life)], stalls: &Stalls, bill: &Bill<'_>) -> String {
    let mut out = String::new();
    let w = &mut out;
    writeln!(w, "# What an approval costs on AWS\n").expect("write");
    writeln!(
        w,
        "Written by `tests/cost.rs`, which `make test` runs: it plays four representative \
         approvals (and a reminder and an escalation step) on the local stack the way Lambda runs \
         them (each HTTP request one invocation, each stream batch one dispatch, each receive of up to ten jobs one executor run), meters \
         every DynamoDB and SQS request on the wire, and fails when this file differs from what \
         it computes. `COUNTERSIGN_WRITE_COST=1 cargo test -p countersign-tests --test cost` \
         rewrites it.\n"
    )
    .expect("write");
    let b = &lives[1].1;
    writeln!(
        w,
        "**per million approvals: {}** — scenario (b), two of three approvers, executed, with a \
         subscription to every event. The same gate on Step Functions Standard: {} state \
         transitions, **{} per million approvals** in transitions alone.\n",
        money(b.per_million()),
        STEP_FUNCTIONS_TRANSITIONS,
        money(STEP_FUNCTIONS_TRANSITIONS as f64 * STATE_TRANSITION * 1e6),
    )
    .expect("write");

    let target = if b.per_million() <= TARGET_PER_MILLION {
        "met".to_owned()
    } else {
        format!(
            "**not met**: {} over it (see \"Where (b)'s write units go\")",
            money(b.per_million() - TARGET_PER_MILLION)
        )
    };
    writeln!(
        w,
        "The target for (b) is {} per million approvals (the goal beyond it {}): {target}.\n",
        money(TARGET_PER_MILLION),
        money(GOAL_PER_MILLION)
    )
    .expect("write");
    render_bill::summary(w, bill);
    writeln!(w, "## Per approval\n").expect("write");
    let header: Vec<&str> = lives.iter().map(|(name, _)| *name).collect();
    writeln!(w, "| | {} |", header.join(" | ")).expect("write");
    writeln!(w, "|---|{}", "---|".repeat(lives.len())).expect("write");
    let each = |f: &dyn Fn(&Life) -> String| lives.iter().map(|(_, l)| f(l)).collect::<Vec<_>>();
    row(
        w,
        "API requests",
        each(&|l| l.api_requests.to_string()).into_iter(),
    );
    for function in ["create", "decide", "dispatch", "executor", "sweeper"] {
        row(
            w,
            &format!("Lambda `{function}`: invocations, billed ms (model)"),
            each(&|l| match l.invocations.get(function) {
                Some(n) => format!("{n}, {:.0}", l.billed_ms[function]),
                None => "—".into(),
            })
            .into_iter(),
        );
    }
    row(
        w,
        "DynamoDB requests: reads, writes",
        each(&|l| format!("{}, {}", l.reads, l.writes)).into_iter(),
    );
    row(
        w,
        "DynamoDB read request units",
        each(&|l| format!("{:.1}", l.read_units)).into_iter(),
    );
    row(
        w,
        "DynamoDB write request units",
        each(&|l| format!("{:.0}", l.write_units)).into_iter(),
    );
    for function in ["create", "decide", "dispatch", "executor", "sweeper"] {
        row(
            w,
            &format!("… of which by `{function}`"),
            each(&|l| {
                l.write_units_by
                    .get(function)
                    .map_or("—".into(), |u| format!("{u:.0}"))
            })
            .into_iter(),
        );
    }
    for table in TABLES {
        row(
            w,
            &format!("… of which to `{table}` (its indexes included)"),
            each(&|l| {
                l.write_units_to
                    .get(table)
                    .map_or("—".into(), |u| format!("{u:.0}"))
            })
            .into_iter(),
        );
    }
    row(
        w,
        "SQS requests (billed, 64 KiB chunks)",
        each(&|l| format!("{:.0}", l.sqs_billed)).into_iter(),
    );
    row(
        w,
        "calls to the action's target",
        each(&|l| l.target_calls.to_string()).into_iter(),
    );
    row(
        w,
        "notifications sent",
        each(&|l| l.notifications.to_string()).into_iter(),
    );
    row(
        w,
        "callbacks sent",
        each(&|l| l.callbacks.to_string()).into_iter(),
    );
    row(
        w,
        "EMF metrics written to the functions' logs: documents, bytes",
        each(&|l| format!("{}, {}", l.emf_documents, l.emf_bytes)).into_iter(),
    );
    row(
        w,
        &format!(
            "log lines written (JSON, `LogLevel` {}): lines, bytes",
            log_level()
        ),
        each(&|l| format!("{}, {}", l.log_lines, l.log_bytes)).into_iter(),
    );
    row(
        w,
        &format!(
            "kept after its end (what a TTL deletes within {SHORT_DAYS:.0} days left out): items, \
             bytes"
        ),
        each(&|l| {
            let (items, bytes) = l
                .kept
                .values()
                .fold((0, 0), |(i, b), k| (i + k.items, b + k.item_bytes));
            format!("{items}, {bytes}")
        })
        .into_iter(),
    );
    row(
        w,
        "stored, as billed (items, index entries, 100 bytes of overhead each): bytes; kept for good",
        each(&|l| {
            let bytes: usize = l.kept.values().map(|k| k.bytes).sum();
            let for_good: usize = l.kept.values().map(|k| k.for_good).sum();
            format!("{bytes}; {for_good}")
        })
        .into_iter(),
    );
    for (i, (part, _)) in lives[0].1.usd().iter().enumerate() {
        row(
            w,
            &format!("{part}, per million approvals"),
            each(&|l| money(l.usd()[i].1 * 1e6)).into_iter(),
        );
    }
    row(
        w,
        "**per million approvals**",
        each(&|l| format!("**{}**", money(l.per_million()))).into_iter(),
    );

    writeln!(w).expect("write");
    crate::stall::render(w, stalls, lives);
    crate::agent_wait::render(w, bill);
    crate::passkeys::render(w);
    writeln!(w, "## What was cut\n").expect("write");
    writeln!(w, "Scenario (b), step by step:\n").expect("write");
    writeln!(
        w,
        "| change | write units | per million approvals |\n|---|---|---|"
    )
    .expect("write");
    for (change, units, usd) in CUTS {
        writeln!(w, "| {change} | {units:.0} | {} |", money(*usd)).expect("write");
    }
    let units_to = |table: &str| b.write_units_to.get(table).copied().unwrap_or_default();
    writeln!(w, "\n## Where (b)'s write units go\n").expect("write");
    writeln!(
        w,
        "Of (b)'s {:.0} write units (DynamoDB writes are {} of its {}):\n",
        b.write_units,
        money(b.write_units * WRITE_UNIT * 1e6),
        money(b.per_million())
    )
    .expect("write");
    for line in [
        format!(
            "`approvals`, {:.0}: its create (in the idempotency record's transaction), each vote, the decision, and the execution's begin and end — its ledger is on the approval since v5, each one conditional update. An item over 1 KB (a quorum's, with its votes) costs two units a write; `by_status_keys` is written when the status moves, `due` when what is due does (the expiry, then the execution's end).",
            units_to("approvals")
        ),
        format!(
            "`events`, {:.0}: one item per change the stream delivers (its events together) and one per event the executor records — a callback's outcome each (eight callbacks in (b), each its own record, one unit), the notifications of one attempt together.",
            units_to("events")
        ),
        format!(
            "`approval_index`, {:.0}: one item per facet (the requester, each approver: 4 for three approvers), written at the create and moved once at the decision (a delete and a put).",
            units_to("approval_index")
        ),
        format!(
            "`execution_ledger`, {:.0}: the notifications' one item, begun and completed (the completion with its events, in a transaction): one call per approver and notification, kept by the ledger.",
            units_to("execution_ledger")
        ),
        format!(
            "`idempotency_keys`, {:.0}: the create's record, its saved response deflated, in the create's transaction.",
            units_to("idempotency_keys")
        ),
    ] {
        writeln!(w, "- {line}").expect("write");
    }

    writeln!(w).expect("write");
    render_bill::detail(w, bill);
    writeln!(w, "## Prices\n").expect("write");
    writeln!(
        w,
        "List prices in US East (N. Virginia), each as its page gave it on the day in its row; \
         free tiers left out.\n"
    )
    .expect("write");
    writeln!(w, "| | USD | per | source | read |\n|---|---|---|---|---|").expect("write");
    for p in PRICES {
        writeln!(
            w,
            "| {} | {} | {} | {} | {} |",
            p.what, p.usd, p.per, p.source, p.read
        )
        .expect("write");
    }
    let memory: Vec<String> = [
        "create",
        "read",
        "decide",
        "dispatch",
        "executor",
        "sweeper",
        "reconciler",
    ]
    .iter()
    .map(|f| format!("`{f}` {} MB", memory_mb(f)))
    .collect();
    writeln!(
        w,
        "\nLambda: arm64, memory as `infra/template.yaml` sets it ({}).\n",
        memory.join(", ")
    )
    .expect("write");

    writeln!(w, "## How it is counted\n").expect("write");
    for line in [
        "DynamoDB units follow its documented rules, from the items' sizes (attribute names and values, as DynamoDB sizes them, but a number's trailing zeros counted, so that a timestamp's size does not depend on the second it was taken): a write is one unit per KB of the larger of the item before and after it, at least one; a transactional write two; a write that changes what an index holds writes the index too (one write per KB of the entry, the larger of before and after; a moved key a delete and a put; at the standard rate, in a transaction too — AWS documents the doubling for the table's own write only); a write whose condition fails costs the units of the item it checked; a strongly consistent read one unit per 4 KB, an eventually consistent one half, a transactional one two; a query the sum of what it reads. The approvals table's writes are sized from its stream's before and after images of each write; the other tables' from snapshots around each invocation.",
        "SQS requests are billed per 64 KiB chunk of payload (measured on the request or answer body, a little larger than the payload); an executor invocation also pays its event source mapping's receive and delete. The mapping's empty long polls are fixed, not per approval (\"The whole bill, line by line\").",
        "Lambda's billed time is a model, because measured times depend on the machine: 5 ms per invocation, 10 ms per DynamoDB request (20 ms per transaction), 15 ms per SQS request, 100 ms per round of outbound HTTP calls, a function's requests one after another — but an executor's batch runs its jobs at once, so its invocation is billed its longest job (each job's requests metered apart), and a notify job calls its approvers together (one round). The test prints the measured handler times beside it.",
        "CloudWatch Logs: the bytes ingested of every EMF document and every log line the functions write (JSON, at the template's default `LogLevel`), each line's newline included and its timestamp and durations at their widest. Lambda's own lines: none per invocation. The template logs JSON with `SystemLogLevel: WARN`, so Lambda writes no START, END or REPORT line (they are INFO); a cold start's init lines are not per approval. Without it (the text format's default), those three lines are roughly 350 bytes an invocation, about $0.18 per million invocations.",
        "Stream reads by Lambda are free. TTL deletions are free.",
        "A table API key adds nothing per approval on a warm function: its item is cached for `KEY_CACHE_SECONDS` (default 60), so the scenarios above cost the same with table keys (`tests/api/round_trips.rs` counts the round trips). A cold key costs one strongly consistent `GetItem` of an item under 4 KB, 1 read unit ($0.125 per million), once per key, function environment and cache time; and `last_used_at` one write unit at most once an hour per key (at most 720 a month per key, under $0.0005).",
    ] {
        writeln!(w, "- {line}").expect("write");
    }
    out
}
