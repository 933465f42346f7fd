//! The commands besides the gate: list, show, vote, events (and follow), cancel.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use url::Url;

use crate::approval::{self, Approval};
use crate::args::{
    CancelArgs, ClaimArgs, EventsArgs, ListArgs, ReportArgs, ReportOutcome, VoteArgs,
};
use crate::client::{Api, Patience, Reply, with_retries};
use crate::progress::{Progress, stderr_line, stdout_line};
use crate::{CliError, Output, gate, render};

/// A one-shot command retries transient failures for this long: every request here is safe to
/// repeat (a read, or a vote or cancel whose repeat answers the same, marked as replayed).
const ONE_SHOT_WINDOW: Duration = Duration::from_secs(20);
/// `events --follow` keeps reading this long after the approval ended for its last event to be
/// recorded (events are derived from committed changes, a moment later).
const FINAL_GRACE: Duration = Duration::from_secs(10);

async fn send(
    api: &Api,
    method: Method,
    url: &Url,
    body: Option<&str>,
    patience: Patience,
) -> Result<Reply, CliError> {
    send_with(api, method, url, &[], body, patience).await
}

async fn send_with(
    api: &Api,
    method: Method,
    url: &Url,
    headers: &[(&str, &str)],
    body: Option<&str>,
    patience: Patience,
) -> Result<Reply, CliError> {
    let mut progress = Progress::new();
    with_retries(
        patience,
        |limit| api.call(method.clone(), url.clone(), headers, body, limit),
        |what, pause| progress.retry(what, pause),
    )
    .await
}

fn one_shot() -> Patience {
    Patience {
        deadline: None,
        window: ONE_SHOT_WINDOW,
    }
}

pub async fn show(api: &Api, out: Output, id: &str) -> Result<u8, CliError> {
    let url = api.url(&["approvals", id], &[]);
    let reply = send(api, Method::GET, &url, None, one_shot()).await?;
    out.approval(&reply.body)?;
    Ok(0)
}

/// `me` (as `--approver` or `--requested-by`) is passed on as it is: the API reads it as the
/// key's own principal.
pub async fn list(api: &Api, out: Output, args: ListArgs) -> Result<u8, CliError> {
    let limit = args.limit.to_string();
    let mut query = vec![("limit", limit.as_str())];
    if let Some(status) = args.status {
        query.push(("status", status.as_str()));
    }
    for (name, value) in [
        ("approver", &args.approver),
        ("requested_by", &args.requested_by),
        ("cursor", &args.cursor),
    ] {
        if let Some(value) = value {
            query.push((name, value.as_str()));
        }
    }
    let url = api.url(&["approvals"], &query);
    let reply = send(api, Method::GET, &url, None, one_shot()).await?;
    if out.json {
        stdout_line(&reply.body.to_string());
        return Ok(0);
    }
    let approvals = reply.body["approvals"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if approvals.is_empty() {
        stderr_line("no approvals");
    }
    for body in &approvals {
        stdout_line(&render::row(&approval::parse(body)?));
    }
    if let Some(cursor) = reply.body["next_cursor"].as_str() {
        stderr_line(&format!("more: add --cursor {cursor}"));
    }
    Ok(0)
}

pub async fn vote(api: &Api, out: Output, args: VoteArgs) -> Result<u8, CliError> {
    let mut body = json!({"decision": args.decision.as_str()});
    if let Some(comment) = &args.comment {
        body["comment"] = json!(comment);
    }
    if let Some(approver) = &args.on_behalf_of {
        body["approver"] = json!(approver);
    }
    let url = api.url(&["approvals", &args.id, "decision"], &[]);
    let reply = send(api, Method::POST, &url, Some(&body.to_string()), one_shot()).await?;
    if !out.json {
        let again = if reply.replayed {
            " (the same vote was already recorded)"
        } else {
            ""
        };
        stderr_line(&format!("{} recorded{again}", args.decision.as_str()));
    }
    out.approval(&reply.body)?;
    Ok(0)
}

pub async fn cancel(api: &Api, out: Output, args: CancelArgs) -> Result<u8, CliError> {
    let body = args
        .reason
        .as_ref()
        .map(|r| json!({"reason": r}).to_string());
    let url = api.url(&["approvals", &args.id, "cancel"], &[]);
    let reply = send(api, Method::POST, &url, body.as_deref(), one_shot()).await?;
    if !out.json && reply.replayed {
        stderr_line("it was already cancelled");
    }
    out.approval(&reply.body)?;
    Ok(0)
}

/// Claims an approved approval-only execution with `--key` as its `Idempotency-Key`: a lost
/// answer is claimed again safely (the same key replays the claim).
pub async fn claim(api: &Api, out: Output, args: ClaimArgs) -> Result<u8, CliError> {
    let url = api.url(&["approvals", &args.id, "execution", "claim"], &[]);
    let headers = [("Idempotency-Key", args.key.as_str())];
    let reply = send_with(api, Method::POST, &url, &headers, None, one_shot()).await?;
    if !out.json && reply.replayed {
        stderr_line("already claimed with this key: the same claim");
    }
    out.approval(&reply.body)?;
    Ok(0)
}

/// Reports a claimed execution's outcome with the claim's `--key`.
pub async fn report(api: &Api, out: Output, args: ReportArgs) -> Result<u8, CliError> {
    let outcome = match args.outcome {
        ReportOutcome::Succeeded => "succeeded",
        ReportOutcome::Failed => "failed",
    };
    let mut body = json!({"outcome": outcome});
    if let Some(detail) = &args.detail {
        body["detail"] = json!(detail);
    }
    let body = body.to_string();
    let url = api.url(&["approvals", &args.id, "execution", "report"], &[]);
    let headers = [("Idempotency-Key", args.key.as_str())];
    let reply = send_with(api, Method::POST, &url, &headers, Some(&body), one_shot()).await?;
    if !out.json && reply.replayed {
        stderr_line("already reported: the same report");
    }
    out.approval(&reply.body)?;
    Ok(0)
}

/// Prints the trail (one JSON object a line with `--json`); with `--follow`, keeps reading and
/// prints each new event until the approval has reached its final state and its closing event
/// is in the trail.
pub async fn events(api: &Api, out: Output, args: EventsArgs) -> Result<u8, CliError> {
    let patience = Patience {
        deadline: None,
        window: if args.follow {
            gate::RETRY_WINDOW
        } else {
            ONE_SHOT_WINDOW
        },
    };
    let approval_url = api.url(&["approvals", &args.id], &[]);
    let mut seen = HashSet::new();
    let mut interval = args.polling.poll_interval;
    let mut ended_at: Option<Instant> = None;
    loop {
        // Read before the trail: once the approval reads final, the trail read after it holds
        // every event of the execution (recorded in the same write) — only the approval's own
        // closing event may still be on its way.
        let approval = if args.follow {
            let reply = send(api, Method::GET, &approval_url, None, patience).await?;
            Some(approval::parse(&reply.body)?)
        } else {
            None
        };
        let trail = read_trail(api, &args.id, patience).await?;
        let mut fresh = false;
        for event in &trail {
            let id = event["id"].as_str().unwrap_or_default().to_owned();
            if seen.insert(id) {
                fresh = true;
                if out.json {
                    stdout_line(&event.to_string());
                } else {
                    stdout_line(&render::event(event));
                }
            }
        }
        let Some(approval) = approval else {
            return Ok(0);
        };
        if approval.is_final() {
            let since = *ended_at.get_or_insert_with(Instant::now);
            if has_closing_event(&approval, &trail) || since.elapsed() >= FINAL_GRACE {
                return Ok(0);
            }
        }
        tokio::time::sleep(interval).await;
        interval = if fresh {
            args.polling.poll_interval
        } else {
            (interval * 2).min(
                args.polling
                    .max_poll_interval
                    .max(args.polling.poll_interval),
            )
        };
    }
}

/// The whole trail, page by page. Read from its start every time: the outcome of a notification
/// or a callback is filed right after the event that caused it, not at the end, so a follower
/// that only read on from the last page could miss it.
async fn read_trail(api: &Api, id: &str, patience: Patience) -> Result<Vec<Value>, CliError> {
    let mut events = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut query = vec![("limit", "100")];
        if let Some(cursor) = &cursor {
            query.push(("cursor", cursor.as_str()));
        }
        let url = api.url(&["approvals", id, "events"], &query);
        let reply = send(api, Method::GET, &url, None, patience).await?;
        if let Some(page) = reply.body["events"].as_array() {
            events.extend(page.iter().cloned());
        }
        match reply.body["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return Ok(events),
        }
    }
}

/// The event that records how `approval` ended is in the trail.
fn has_closing_event(approval: &Approval, trail: &[Value]) -> bool {
    let closing: &[&str] = match approval.status.as_str() {
        "rejected" => &["approval.rejected"],
        "cancelled" => &["approval.cancelled"],
        "expired" => &["approval.expired"],
        _ => &[
            "execution.succeeded",
            "execution.failed",
            "execution.needs_reconciliation",
            "execution.resolved",
        ],
    };
    trail
        .iter()
        .any(|e| e["type"].as_str().is_some_and(|t| closing.contains(&t)))
}
