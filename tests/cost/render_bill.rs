//! Rendering the whole bill: its summary table (at the top of `docs/COST.md`) and its lines,
//! each count taken from the template or the lives, so none can drift.

use std::fmt::Write as _;

use crate::bill::*;
use crate::deployment::MONTH_SECONDS;
use crate::prices::*;
use crate::render::{money, row, thousands};
use crate::storage::SHORT_DAYS;

/// A figure per approval (a millionth of a dollar shows).
fn micro(usd: f64) -> String {
    format!("${usd:.6}")
}

fn other_mode(mode: &str) -> &'static str {
    if mode == "Active" {
        "PassThrough"
    } else {
        "Active"
    }
}

/// The summary: per approval, and a month at each of [`VOLUMES`].
pub(crate) fn summary(w: &mut String, bill: &Bill<'_>) {
    let d = &bill.deployment;
    let mode = d.default_of("TracingMode").expect("a TracingMode default");
    let retention = d
        .default_of("RetentionDays")
        .expect("a RetentionDays default");
    let (tables, _) = d.count("AWS::DynamoDB::Table");
    writeln!(w, "## The whole bill\n").expect("write");
    writeln!(
        w,
        "What a default deployment of `infra/template.yaml` pays (every parameter at its default: \
         `TracingMode` {mode}, `RetentionDays` {retention}), every approval like (b), spread \
         evenly over a month of 30.4 days; list prices, no free tier taken. Per approval: what \
         grows with the approvals. Line by line under \"The whole bill, line by line\".\n"
    )
    .expect("write");
    let header: Vec<String> = VOLUMES
        .iter()
        .map(|v| format!("a month at {} approvals", thousands(*v)))
        .collect();
    writeln!(w, "| | per approval | {} |", header.join(" | ")).expect("write");
    writeln!(w, "|---|---|{}", "---|".repeat(VOLUMES.len())).expect("write");
    let months: Vec<[f64; 6]> = VOLUMES.iter().map(|v| bill.month(*v, &mode)).collect();
    let others: Vec<[f64; 6]> = VOLUMES
        .iter()
        .map(|v| bill.month(*v, other_mode(&mode)))
        .collect();
    let variable = [
        bill.life.per_million() / 1e6,
        bill.storage_per_approval(),
        bill.recovery_per_approval(),
    ];
    let per_approval = [
        micro(variable[0]),
        "—".to_owned(),
        micro(variable[1]),
        micro(variable[2]),
        // PassThrough records nothing; Active's share depends on the volume.
        if mode == "PassThrough" {
            micro(0.0)
        } else {
            "—".to_owned()
        },
    ];
    let recovered = d.recovered_tables().len();
    let labels = [
        "request path (API Gateway, Lambda, DynamoDB, SQS, logs ingested)".to_owned(),
        "fixed (secrets, alarms, dashboard, metrics, scheduled runs, the queue's polls)".to_owned(),
        format!(
            "storage, steady state (DynamoDB until an approval's items expire, logs {} days)",
            d.log_retention_days()
        ),
        format!("point-in-time recovery ({recovered} of the {tables} tables)"),
        format!("tracing, `TracingMode: {mode}` (the default)"),
    ];
    for (i, label) in labels.iter().enumerate() {
        row(
            w,
            label,
            std::iter::once(per_approval[i].clone()).chain(months.iter().map(|m| money(m[i]))),
        );
    }
    let total = format!("**{}** and the fixed", micro(variable.iter().sum()));
    row(
        w,
        "**total**",
        std::iter::once(total).chain(months.iter().map(|m| format!("**{}**", money(m[5])))),
    );
    let other = other_mode(&mode);
    row(
        w,
        &format!("tracing, `TracingMode: {other}` instead"),
        std::iter::once("—".to_owned()).chain(others.iter().map(|m| money(m[4]))),
    );
    row(
        w,
        &format!("**total with `TracingMode: {other}`**"),
        std::iter::once(String::new()).chain(others.iter().map(|m| format!("**{}**", money(m[5])))),
    );
    let held: f64 = bill.held_read(20.0).iter().map(|(_, usd)| usd).sum();
    writeln!(
        w,
        "\nWaiting clients are on top: a held read (`GET /approvals/{{id}}?wait=20`) keeps the \
         read function running its whole hold, {} per million such reads; a minute of waiting \
         (three of them), {} per thousand minutes.\n",
        money(held * 1e6),
        money(3.0 * held * 1e3)
    )
    .expect("write");
}

/// The bill's lines: what each figure of the summary is made of.
pub(crate) fn detail(w: &mut String, bill: &Bill<'_>) {
    let d = &bill.deployment;
    let at = |f: &dyn Fn(f64) -> String| {
        VOLUMES
            .iter()
            .map(|v| format!("{} at {}", f(*v), thousands(*v)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    writeln!(w, "## The whole bill, line by line\n").expect("write");
    let (secrets, created) = d.count("AWS::SecretsManager::Secret");
    let conditional: Vec<String> = d
        .resources("AWS::SecretsManager::Secret")
        .into_iter()
        .filter(|(_, _, created)| !created)
        .map(|(id, _, _)| format!("`{id}`"))
        .collect();
    let readers = |v: f64| {
        let readers = bill.secret_readers(v);
        let instances: f64 = readers.iter().map(|(_, n, _)| n).sum();
        format!("{instances:.0} instances")
    };
    let fixed = |name: &str, v: f64| {
        let lines = bill.fixed(v);
        money(
            lines
                .iter()
                .find(|(n, _)| *n == name)
                .expect("a fixed line")
                .1,
        )
    };
    let (alarms, _) = d.count("AWS::CloudWatch::Alarm");
    let alarm_metrics = d.alarm_metrics();
    let (dashboards, _) = d.count("AWS::CloudWatch::Dashboard");
    let (functions, _) = d.count("AWS::Serverless::Function");
    let scheduled = d.scheduled();
    let series = bill.metric_series();
    let per_action_type = bill
        .lives
        .iter()
        .flat_map(|(_, l)| l.metric_series.iter())
        .filter(|s| s.contains("ActionType="))
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    let idle = bill.idle;
    for line in [
        format!(
            "**Request path**: (b)'s {} per million approvals (\"Per approval\"), each approval played alone: at volume a stream batch or a queue receive carries several approvals' records, so fewer invocations; and (b) sends notifications and callbacks, which a default deployment (no `NotifierUrl`, no `EventSubscriptions`) does not. An upper bound.",
            money(bill.life.per_million())
        ),
        format!(
            "**Secrets**: the template's {secrets} secrets, {created} of them in a default deployment ({} only with their parameter set), {} a month. Their reads: each warm instance of a function that reads secrets calls `BatchGetSecretValue` at its start and every `SECRETS_REFRESH_SECONDS` ({SECRETS_REFRESH_SECONDS:.0} s, {} times a month), counted one instance per function that runs and one more per instance busy on average ({}), each secret retrieved priced as a call (if AWS bills the batch as one call, less), and not the early reads after a failed signature (at most every 30 s): {}.",
            match conditional.split_last() {
                Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
                _ => conditional.join(""),
            },
            fixed("secrets", 1e6),
            thousands(MONTH_SECONDS / SECRETS_REFRESH_SECONDS),
            at(&|v| readers(v)),
            at(&|v| fixed("secrets' reads", v)),
        ),
        format!(
            "**Alarms**: the template's {alarms} alarms, {} alarm metrics billed at standard resolution, {} at high resolution ({} on metric math or anomaly detection): {}.",
            alarm_metrics.standard,
            alarm_metrics.high_resolution,
            alarm_metrics.math,
            fixed("alarms", 1e6)
        ),
        format!(
            "**Dashboard**: {dashboards}, {} a month (an account's first 3 are free: taken here by others).",
            fixed("dashboard", 1e6)
        ),
        format!(
            "**Custom metrics**: the four lives' EMF documents write to {series} CloudWatch metrics (a namespace, a name and its dimensions' values each; `METRICS_TENANT_DIMENSION` false, one action type, `deploy`), {} a month: each further action type adds {per_action_type}. A metric is billed by the hour it receives data: the refusals' and failures' metrics (a `Reason` each) add theirs only in the hours they occur.",
            fixed("custom metrics", 1e6)
        ),
        format!(
            "**Scheduled runs**: {} of the template's {functions} functions run on a schedule ({}), {} runs a month each; an idle run of both reads the due index and finds nothing ({:.1} read units, {:.0} ms billed by the model): {}.",
            scheduled.len(),
            scheduled
                .iter()
                .map(|(id, _)| format!("`{}`", function_of(id)))
                .collect::<Vec<_>>()
                .join(", "),
            thousands(scheduled[0].1),
            idle.read_units,
            idle.billed_ms.values().sum::<f64>(),
            fixed("scheduled runs", 1e6)
        ),
        format!(
            "**The jobs queue's empty polls**: the executor's event source mapping long-polls it with {QUEUE_POLLERS:.0} pollers, a receive every {LONG_POLL_SECONDS:.0} s each when it is empty: {} requests, {} a month.",
            thousands(QUEUE_POLLERS * MONTH_SECONDS / LONG_POLL_SECONDS),
            fixed("the jobs queue's empty polls", 1e6)
        ),
    ] {
        writeln!(w, "- {line}").expect("write");
    }

    let retention = d
        .default_of("RetentionDays")
        .expect("a RetentionDays default");
    writeln!(
        w,
        "\n**Storage and point-in-time recovery**, in steady state: each month's approvals stay \
         until their items' TTL passes (`retain_until`, from `RetentionDays` = {retention} days \
         after an approval's end), each item for the days its own TTL gives, so the tables hold (approvals a month) × (bytes an approval) × (days \
         kept) / 30.4 — reached once the first approvals expire, less before. Per table, (b)'s items as DynamoDB bills \
         them stored (each item and index entry, 100 bytes of overhead each); point-in-time \
         recovery is billed on the table's own items and its local indexes, not its global ones:\n"
    )
    .expect("write");
    let recovered = d.recovered_tables();
    let header: Vec<String> = VOLUMES
        .iter()
        .map(|v| format!("GB stored at {}", thousands(*v)))
        .collect();
    writeln!(
        w,
        "| table | bytes, as billed | kept (days) | point-in-time recovery | {} |",
        header.join(" | ")
    )
    .expect("write");
    writeln!(w, "|---|---|---|---|{}", "---|".repeat(VOLUMES.len())).expect("write");
    for (table, kept) in bill.life.kept.iter().filter(|(_, k)| k.items > 0) {
        let kept_days = if kept.for_good > 0 {
            format!("{:.0}; {} bytes for good", kept.days, kept.for_good)
        } else {
            format!("{:.0}", kept.days)
        };
        row(
            w,
            &format!("`{table}`"),
            [
                kept.bytes.to_string(),
                kept_days,
                if recovered.contains(&kept.logical_id) {
                    format!("yes, on {} bytes", kept.recovered_bytes)
                } else {
                    "no".to_owned()
                },
            ]
            .into_iter()
            .chain(
                VOLUMES
                    .iter()
                    .map(|v| format!("{:.1}", kept.byte_days * v / 30.4 / 1e9)),
            ),
        );
    }
    let logs = d.log_retention_days();
    let short_lived: f64 = bill.life.kept.values().map(|k| k.short_lived).sum();
    let largest = VOLUMES.iter().copied().fold(0.0, f64::max);
    let short_usd = short_lived * largest / 30.4 / 1e9 * STORAGE_GB_MONTH;
    assert!(
        short_usd < 0.10,
        "what a TTL deletes within days is worth counting now"
    );
    writeln!(
        w,
        "\nStorage: {}; point-in-time recovery: {}. The logs' storage (their ingested bytes kept \
         {logs:.0} days, uncompressed: an upper bound): {} of it. Left out: what a TTL deletes \
         within {SHORT_DAYS:.0} days (the idempotency record: a day), under $0.10 a month at {}; \
         approvals still pending or executing (never deleted); the API keys' table (not per \
         approval).\n",
        at(&|v| money(bill.storage_per_approval() * v)),
        at(&|v| money(bill.recovery_per_approval() * v)),
        at(&|v| money(bill.log_gb_months() * LOGS_STORED_GB_MONTH * v)),
        thousands(largest),
    )
    .expect("write");

    let invocations: usize = bill.life.invocations.values().sum();
    let scheduled_traces: f64 = scheduled.iter().map(|(_, n)| n).sum();
    let own = |v: f64| (bill.traces(v) - scheduled_traces) * XRAY_TRACE / v * 1e6;
    writeln!(
        w,
        "**Tracing**: `TracingMode: PassThrough` records a trace only when a request's upstream \
         header asks for one (sampled): HTTP APIs send none, so a default deployment records \
         none unless its callers do — $0.00. `TracingMode: Active` samples by X-Ray's default \
         rule, {RESERVOIR_PER_SECOND:.0} request a second and {:.0}% of the rest, each function \
         on its own, each of (b)'s {invocations} invocations its own trace (a stream or a queue \
         starts a new one: an upper bound), and every scheduled run ({} traces a month, {}): {} \
         traces a month; {}. Per million approvals: {} — the approvals' own traces {} (an \
         earlier review's $41.62 per million at 1,000,000 took a 30-day month). Sampling makes \
         it dearer per approval the lower the volume. Retrieving or scanning traces is billed \
         only when someone reads them: not counted. The whole bill before (`Active`): {}; after \
         (`PassThrough`): {}.\n",
        FIXED_RATE * 100.0,
        thousands(scheduled_traces),
        money(scheduled_traces * XRAY_TRACE),
        at(&|v| thousands(bill.traces(v))),
        at(&|v| money(bill.tracing(v, "Active"))),
        at(&|v| money(bill.tracing(v, "Active") / v * 1e6)),
        at(&|v| money(own(v))),
        at(&|v| money(bill.month(v, "Active")[5])),
        at(&|v| money(bill.month(v, "PassThrough")[5])),
    )
    .expect("write");

    let parts = bill.held_read(20.0);
    let total: f64 = parts.iter().map(|(_, usd)| usd).sum();
    let listed: Vec<String> = parts
        .iter()
        .map(|(what, usd)| format!("{what} {}", money(usd * 1e6)))
        .collect();
    writeln!(
        w,
        "**Held reads**: a read held 20 s keeps the read function ({} MB, arm64) running the \
         whole hold, reads the approval {} times (strongly consistent, {} each) and takes \
         and gives back a seat; per million: {} — **{}**, of which Lambda's duration alone is what \
         an earlier note put at about $67. A minute of waiting is three such reads: {} a \
         minute, {} per thousand minutes.\n",
        crate::model::memory_mb("read"),
        reads_in_hold(20.0),
        match bill.life.kept["approvals"].item_bytes.div_ceil(4096) {
            1 => "1 read unit".to_owned(),
            units => format!("{units} read units"),
        },
        listed.join(", "),
        money(total * 1e6),
        micro(3.0 * total),
        money(3.0 * total * 1e3),
    )
    .expect("write");
}
