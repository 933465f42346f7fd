//! What a reminder and an escalation step cost (issue 48): each played on a pending approval
//! and measured from the sweep that sends it on — the sweeper's run, the dispatch of its
//! write's change, the executor's notify job — and rendered as "Reminders and escalation".

use std::collections::BTreeSet;
use std::fmt::Write as _;

use countersign_tests::*;
use serde_json::{Value, json};

use crate::model::Life;
use crate::prices::CUSTOM_METRIC_MONTH;
use crate::render::{TABLES, money, row, thousands};
use crate::scenarios::{create, deploy_for, log_level, play, play_from, vote};

/// Long enough that nothing else falls due first: the approval expires in a day.
const DUE_AFTER: i64 = 3_600;

pub(crate) struct Stalls {
    /// One reminder to the two of (b)'s three approvers who have not voted.
    pub(crate) reminder: Life,
    /// One escalation step: a lead joins a stalled two of two.
    pub(crate) escalation: Life,
    /// A sweeper's run with nothing due: what every scheduled run pays anyway.
    pub(crate) idle_sweep: Life,
}

/// (b)'s deploy with `field` added.
fn deploy_with(approvers: &[&str], policy: Value, field: &str, value: Value) -> String {
    let mut body: Value =
        serde_json::from_str(&deploy_for(approvers, Some(policy))).expect("a JSON body");
    body[field] = value;
    body.to_string()
}

/// The notifier's calls with `reason`.
fn told(t: &TestApp, reason: &str) -> usize {
    let calls = t.downstream().calls_to("/notify");
    calls.iter().filter(|(_, b)| b["reason"] == reason).count()
}

/// Unsubscribed, as the brief of each is the notifier's: a subscription adds its callbacks.
pub(crate) async fn stalls() -> Stalls {
    let reminder = play_from(
        false,
        async |t, chain| {
            let quorum = json!({"rules": [{"name": "oncall", "approvers": [ALICE, BOB, CAROL], "min_approvals": 2}]});
            let reminders = json!({"after_seconds": DUE_AFTER, "every_seconds": DUE_AFTER, "max": 2});
            let body = deploy_with(&[ALICE, BOB, CAROL], quorum, "reminders", reminders);
            let id = create(t, chain, &body).await;
            vote(t, chain, &id, ALICE, "approve").await;
        },
        async |t, chain, ()| {
            t.clock.advance(DUE_AFTER);
            chain.sweep().await;
            chain.settle().await;
            assert_eq!(told(t, "reminder"), 2, "bob and carol are reminded");
        },
    )
    .await;
    let escalation = play_from(
        false,
        async |t, chain| {
            let pair =
                json!({"rules": [{"name": "pair", "approvers": [ALICE, BOB], "min_approvals": 2}]});
            let steps = json!([{"after_seconds": DUE_AFTER, "approvers": [CAROL]}]);
            let body = deploy_with(&[ALICE, BOB], pair, "escalation", steps);
            let id = create(t, chain, &body).await;
            vote(t, chain, &id, ALICE, "approve").await;
        },
        async |t, chain, ()| {
            t.clock.advance(DUE_AFTER);
            chain.sweep().await;
            chain.settle().await;
            assert_eq!(told(t, "escalation"), 1, "carol is told");
        },
    )
    .await;
    let idle_sweep = play(false, async |_, chain| chain.sweep().await).await;
    Stalls {
        reminder,
        escalation,
        idle_sweep,
    }
}

pub(crate) fn render(w: &mut String, stalls: &Stalls, lives: &[(&str, Life)]) {
    let both = [&stalls.reminder, &stalls.escalation];
    let each = |f: &dyn Fn(&Life) -> String| both.iter().map(|l| f(l)).collect::<Vec<_>>();
    writeln!(w, "## Reminders and escalation\n").expect("write");
    writeln!(
        w,
        "Each played on a pending approval and counted from the sweep that sends it on: the \
         sweeper's run that finds it due and writes it, the dispatch of that write's change, \
         the executor's notify job and its calls to the notifier. What made the approval \
         pending (its create, the vote before) is left out; the approval's own life is counted \
         above. A reminder: (b)'s two of three, alice has voted, reminder 1 goes to bob and \
         carol. An escalation step: a two of two, alice has voted, step 1 adds carol, who is \
         told. Neither is subscribed to events (a subscription adds a callback per event, as in \
         (b)) nor in Slack.\n"
    )
    .expect("write");
    writeln!(
        w,
        "| | one reminder (two approvers who have not voted) | one escalation step (one approver joins) |\n|---|---|---|"
    )
    .expect("write");
    for function in ["sweeper", "dispatch", "executor"] {
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
    let kinds: BTreeSet<&String> = both.iter().flat_map(|l| l.requests.keys()).collect();
    for kind in kinds {
        row(
            w,
            &format!("{kind} requests"),
            each(&|l| l.requests.get(kind).map_or("—".into(), usize::to_string)).into_iter(),
        );
    }
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
    for table in TABLES {
        if both.iter().all(|l| !l.write_units_to.contains_key(table)) {
            continue;
        }
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
        "SQS requests (billed, 64 KiB chunks, the executor's receive and delete included)",
        each(&|l| format!("{:.0}", l.sqs_billed)).into_iter(),
    );
    row(
        w,
        "notifications sent",
        each(&|l| l.notifications.to_string()).into_iter(),
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
    for (i, (part, _)) in stalls.reminder.usd().iter().enumerate() {
        row(
            w,
            &format!("{part}, per million"),
            each(&|l| money(l.usd()[i].1 * 1e6)).into_iter(),
        );
    }
    row(
        w,
        "**per million**",
        each(&|l| format!("**{}**", money(l.per_million()))).into_iter(),
    );
    let idle = stalls.idle_sweep.per_million();
    row(
        w,
        "per million, beyond the sweeper's idle run",
        each(&|l| money(l.per_million() - idle)).into_iter(),
    );

    let (reminder, step) = (
        stalls.reminder.per_million(),
        stalls.escalation.per_million(),
    );
    let approvals = 1e6;
    writeln!(
        w,
        "\nEach is counted alone in its sweeper's run, the run's invocation and its three queries \
         of the `due` index (the expiry, escalation and reminder partitions) included: an upper \
         bound. Those are what every scheduled run pays with nothing due ({} per million runs, in \
         \"Scheduled runs\" under \"The whole bill\"); at volume one run moves many approvals on, \
         one `BatchGetItem` reading them all and one conditional `UpdateItem` each, so a reminder \
         or a step costs between its last row and the one above it. Its notifications are one \
         job, under one ledger item, calling its approvers together. \
         A step also puts the approval's listing items again, one per facet (the requester's, \
         each approver's and the joined approver's new one): {:.0} write units to \
         `approval_index`, where the new facet alone would be one.\n",
        money(idle),
        stalls
            .escalation
            .write_units_to
            .get("approval_index")
            .copied()
            .unwrap_or_default()
    )
    .expect("write");
    writeln!(
        w,
        "A month of {} approvals each reminded twice: {} reminders, **{}**; with one escalation \
         step each as well, {} more, **{}** in all — on top of the approvals' own ({} for {} like \
         (b)).\n",
        thousands(approvals),
        thousands(2.0 * approvals),
        money(2.0 * reminder),
        money(step),
        money(2.0 * reminder + step),
        money(lives[1].1.per_million()),
        thousands(approvals),
    )
    .expect("write");
    let counted: BTreeSet<&String> = lives.iter().flat_map(|(_, l)| &l.metric_series).collect();
    let new: BTreeSet<&String> = both
        .iter()
        .flat_map(|l| &l.metric_series)
        .filter(|s| !counted.contains(s))
        .collect();
    let names: BTreeSet<&str> = new
        .iter()
        .filter_map(|s| s.split(' ').nth(1))
        .collect::<BTreeSet<_>>();
    let metrics = if names.is_empty() {
        "no CloudWatch metric that the four lives do not already write to".to_owned()
    } else {
        format!(
            "{} CloudWatch metrics the four lives do not write to ({}), {} a month while reminders \
             or steps are sent every hour",
            new.len(),
            names
                .into_iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", "),
            money(new.len() as f64 * CUSTOM_METRIC_MONTH)
        )
    };
    writeln!(
        w,
        "Not counted above: what a reminder or a step leaves in the tables (its trail event, its \
         notifications' ledger item and their event). Their EMF documents \
         write to {metrics}.\n"
    )
    .expect("write");
}
