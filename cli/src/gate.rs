//! `countersign request [--wait]`: ask for an approval and, as a pipeline gate, wait for its
//! outcome. A re-run with the same `--idempotency-key` and arguments is a replay of the create:
//! it attaches to the approval the first run made instead of asking again.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;

use crate::approval::{self, Approval, Verdict};
use crate::args::{Polling, RequestArgs};
use crate::client::{Api, Patience, with_retries};
use crate::progress::{Progress, stdout_line};
use crate::{CliError, Output, duration, input, render};

/// Without `--timeout`, transient failures in a row are retried for this long.
pub const RETRY_WINDOW: Duration = Duration::from_secs(300);

pub async fn request(api: &Api, out: Output, args: RequestArgs) -> Result<u8, CliError> {
    let started = Instant::now();
    let patience = Patience {
        deadline: args.timeout.map(|t| started + t),
        window: RETRY_WINDOW,
    };
    let key = args
        .idempotency_key
        .clone()
        .unwrap_or_else(|| format!("cli-{}", ulid::Ulid::new()));
    let body = create_body(&args)?;
    let mut progress = Progress::new();

    // Safe to repeat after a lost answer: the key makes a second create a replay of the first.
    let url = api.url(&["approvals"], &[]);
    let headers = [("idempotency-key", key.as_str())];
    let created = with_retries(
        patience,
        |limit| api.call(Method::POST, url.clone(), &headers, Some(&body), limit),
        |what, pause| progress.retry(what, pause),
    )
    .await?;
    let approval = approval::parse(&created.body)?;
    if created.replayed {
        progress.note(&format!(
            "attached to {} (created earlier with idempotency key {key})",
            approval.id
        ));
    } else {
        progress.note(&format!(
            "created {} (idempotency key {key}); approvers: {}",
            approval.id,
            approval.approvers.join(", ")
        ));
    }
    if !args.wait {
        out.approval(&created.body)?;
        return Ok(0);
    }

    let waited = wait(
        api,
        &approval.id,
        started,
        patience,
        args.polling,
        !args.no_execution,
        &mut progress,
    )
    .await;
    progress.end_line();
    let (body, approval, verdict) = waited?;
    if out.json {
        stdout_line(&body.to_string());
    } else {
        stdout_line(&render::approval(&approval));
    }
    Ok(verdict.exit_code())
}

/// The create body. Payload and context are spliced in as written (see [`input::json_object`]);
/// everything else is serialised here. `--min-approvals` is a policy of one rule over every
/// approver. No `--approver`: no `approvers`, for the deployment's approval policy to choose
/// (without one the API refuses it, saying so).
fn create_body(args: &RequestArgs) -> Result<String, CliError> {
    let payload = match &args.payload {
        Some(raw) => input::json_object("payload", raw)?,
        None => "{}".to_owned(),
    };
    let mut body = format!(
        r#"{{"action":{{"type":{},"payload":{payload}}}"#,
        json!(args.action_type)
    );
    if !args.approvers.is_empty() {
        body.push_str(&format!(r#","approvers":{}"#, json!(args.approvers)));
    }
    if let Some(raw) = &args.context {
        body.push_str(&format!(
            r#","context":{}"#,
            input::json_object("context", raw)?
        ));
    }
    if let Some(expires_in) = args.expires_in {
        body.push_str(&format!(
            r#","expires_in_seconds":{}"#,
            expires_in.as_secs()
        ));
    }
    if let Some(min) = args.min_approvals {
        let policy = json!({"rules": [
            {"name": "approvers", "approvers": args.approvers, "min_approvals": min}
        ]});
        body.push_str(&format!(r#","policy":{policy}"#));
    }
    body.push('}');
    Ok(body)
}

/// Waits for the approval's verdict: a plain read, then held reads (`GET /approvals/{id}?wait=…`: the server
/// answers as soon as the approval is decided, or its execution ended, or after up to 20 s), so
/// a gate makes about three requests a minute however long the approvers take. A server that
/// does not hold (an older version) answers at once: then the approval is polled every
/// `poll_interval`, twice as long after each poll that saw no change (up to
/// `max_poll_interval`). Transient failures are retried within `patience`; its deadline ends
/// the wait (the command `started` then).
async fn wait(
    api: &Api,
    id: &str,
    started: Instant,
    patience: Patience,
    polling: Polling,
    wait_for_execution: bool,
    progress: &mut Progress,
) -> Result<(serde_json::Value, Approval, Verdict), CliError> {
    let mut interval = polling.poll_interval;
    let mut last_state = String::new();
    // The first read is plain, so that the gate shows where the approval stands at once.
    let mut first = true;
    // An approval-only type's execution is its caller's: its gate waits for the decision.
    let mut executes = true;
    loop {
        let hold = held_read_seconds(patience.remaining()).filter(|_| !first);
        first = false;
        let mut query = Vec::new();
        if let Some(seconds) = hold {
            query.push(("wait", seconds.to_string()));
            if wait_for_execution && executes {
                query.push(("until", "executed".to_owned()));
            }
        }
        let query: Vec<(&str, &str)> = query.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let url = api.url(&["approvals", id], &query);
        let asked = Instant::now();
        let reply = match with_retries(
            patience,
            |limit| api.call(Method::GET, url.clone(), &[], None, limit),
            |what, pause| progress.retry(what, pause),
        )
        .await
        {
            Ok(reply) => reply,
            // `--timeout` ran out while a read was under way (a slow answer, a busy machine):
            // that is the gate's verdict, not a transport error.
            Err(CliError::Transport(_)) if patience.expired() => {
                return Err(CliError::TimedOut {
                    id: id.to_owned(),
                    waited: duration::human(started.elapsed()),
                    state: last_state,
                });
            }
            Err(error) => return Err(error),
        };
        let approval = approval::parse(&reply.body)?;
        executes = approval.action.executes != Some(false);
        let state = approval.state_line();
        progress.state(id, &state);
        if let Some(verdict) = approval.verdict(wait_for_execution) {
            return Ok((reply.body, approval, verdict));
        }
        if state != last_state {
            interval = polling.poll_interval;
            last_state = state;
        }
        // Held for most of what was asked: the server waited, ask again at once.
        let held = hold.is_some_and(|s| asked.elapsed() * 2 >= Duration::from_secs(s));
        let pause = match patience.remaining() {
            Some(left) if left.is_zero() => {
                return Err(CliError::TimedOut {
                    id: id.to_owned(),
                    waited: duration::human(started.elapsed()),
                    state: last_state,
                });
            }
            _ if held => Duration::ZERO,
            Some(left) => interval.min(left),
            None => interval,
        };
        tokio::time::sleep(pause).await;
        if !held {
            interval = (interval * 2).min(polling.max_poll_interval.max(polling.poll_interval));
        }
    }
}

/// How long to ask the server to hold a read: 20 s, or the whole seconds left before the
/// deadline; `None` (a plain read) with less than a second left.
fn held_read_seconds(left: Option<Duration>) -> Option<u64> {
    match left {
        None => Some(20),
        Some(left) => Some(left.as_secs().min(20)).filter(|s| *s >= 1),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::Cli;
    use crate::args::Command;

    fn body(args: &[&str]) -> serde_json::Value {
        let cli = Cli::try_parse_from([&["countersign", "request"], args].concat()).expect("args");
        let Command::Request(request) = cli.command else {
            panic!("not a request");
        };
        let text = create_body(&request).expect("body");
        serde_json::from_str(&text).expect("the body is JSON")
    }

    #[test]
    fn a_held_read_asks_for_20_s_or_what_is_left_of_the_deadline() {
        assert_eq!(held_read_seconds(None), Some(20));
        assert_eq!(held_read_seconds(Some(Duration::from_secs(300))), Some(20));
        assert_eq!(
            held_read_seconds(Some(Duration::from_millis(3_900))),
            Some(3)
        );
        assert_eq!(held_read_seconds(Some(Duration::from_millis(900))), None);
    }

    #[test]
    fn min_approvals_is_a_policy_of_one_rule_over_every_approver() {
        let value = body(&[
            "--type",
            "deploy",
            "--payload",
            r#"{"build": 1042}"#,
            "--approver",
            "alice@example.com",
            "--approver",
            "bob@example.com",
            "--min-approvals",
            "2",
            "--expires-in",
            "2h",
            "--context",
            r#"{"summary": "s"}"#,
        ]);
        assert_eq!(
            value,
            json!({
                "action": {"type": "deploy", "payload": {"build": 1042}},
                "approvers": ["alice@example.com", "bob@example.com"],
                "context": {"summary": "s"},
                "expires_in_seconds": 7200,
                "policy": {"rules": [{"name": "approvers",
                    "approvers": ["alice@example.com", "bob@example.com"], "min_approvals": 2}]}
            })
        );
    }

    #[test]
    fn without_options_the_body_is_the_minimum() {
        let value = body(&[
            "--type",
            "echo",
            "--approver",
            "alice@example.com,bob@example.com",
        ]);
        assert_eq!(
            value,
            json!({"action": {"type": "echo", "payload": {}},
                   "approvers": ["alice@example.com", "bob@example.com"]})
        );
    }

    #[test]
    fn without_approvers_the_policy_chooses_and_a_quorum_needs_them() {
        let value = body(&[
            "--type",
            "deploy",
            "--payload",
            r#"{"environment": "production"}"#,
        ]);
        assert_eq!(
            value,
            json!({"action": {"type": "deploy", "payload": {"environment": "production"}}})
        );
        let quorum_alone = Cli::try_parse_from([
            "countersign",
            "request",
            "--type",
            "deploy",
            "--min-approvals",
            "2",
        ]);
        assert!(quorum_alone.is_err());
    }
}
