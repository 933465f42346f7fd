//! `countersign delegate set|show|end`: a person's delegation (docs/API.md "Delegation").

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use countersign::domain::delegation::Delegation;
use countersign::domain::rfc3339;
use reqwest::Method;
use serde_json::{Value, json};

use crate::args::{DelegateCommand, DelegateSetArgs};
use crate::client::{Api, Patience, with_retries};
use crate::progress::{Progress, stderr_line, stdout_line};
use crate::{CliError, Output};

/// Each request here is safe to repeat (a put of the same delegation, a read, an end), so a
/// transient failure is retried for this long.
const WINDOW: Duration = Duration::from_secs(20);

pub(crate) async fn run(api: &Api, out: Output, command: DelegateCommand) -> Result<u8, CliError> {
    let (method, person, body) = match command {
        DelegateCommand::Set(args) => {
            let body = set_body(&args, now())?;
            (Method::PUT, args.person, Some(body.to_string()))
        }
        DelegateCommand::Show(arg) => (Method::GET, arg.person, None),
        DelegateCommand::End(arg) => (Method::DELETE, arg.person, None),
    };
    let url = api.url(&["delegations", &person], &[]);
    let patience = Patience {
        deadline: None,
        window: WINDOW,
    };
    let mut progress = Progress::new();
    let reply = with_retries(
        patience,
        |limit| api.call(method.clone(), url.clone(), &[], body.as_deref(), limit),
        |what, pause| progress.retry(what, pause),
    )
    .await?;
    if reply.body.is_null() {
        stderr_line(&format!("{person}'s delegation is ended"));
    } else if out.json {
        stdout_line(&reply.body.to_string());
    } else {
        stdout_line(&render(&reply.body));
    }
    Ok(0)
}

/// Seconds since the epoch now (for `--for`).
fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The PUT's body; `--for` counts from `--from` when given as RFC 3339, or from `now`.
fn set_body(args: &DelegateSetArgs, now: i64) -> Result<Value, CliError> {
    let until = match (&args.until, args.for_) {
        (Some(until), _) => until.clone(),
        (None, Some(length)) => {
            let start = match &args.from {
                None => now,
                Some(from) => Delegation::parse_time(from)
                    .ok_or_else(|| CliError::Usage(format!("--from {from}: not RFC 3339")))?,
            };
            let seconds = i64::try_from(length.as_secs()).unwrap_or(i64::MAX);
            rfc3339(start.saturating_add(seconds))
        }
        (None, None) => return Err(CliError::Usage("give --until or --for".to_owned())),
    };
    let mut body = json!({"delegate": args.to, "until": until});
    if let Some(from) = &args.from {
        body["from"] = json!(from);
    }
    if let Some(reason) = &args.reason {
        body["reason"] = json!(reason);
    }
    Ok(body)
}

/// One line for people.
fn render(body: &Value) -> String {
    let text = |name: &str| body[name].as_str().unwrap_or("?").to_owned();
    let reason = body["reason"]
        .as_str()
        .map_or_else(String::new, |r| format!(" ({r})"));
    format!(
        "{} votes in {}'s place from {} until {}{reason}",
        text("delegate"),
        text("delegator"),
        text("from"),
        text("until")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(until: Option<&str>, for_: Option<u64>, from: Option<&str>) -> DelegateSetArgs {
        DelegateSetArgs {
            person: "alice@example.com".into(),
            to: "bob@example.com".into(),
            from: from.map(str::to_owned),
            until: until.map(str::to_owned),
            for_: for_.map(Duration::from_secs),
            reason: None,
        }
    }

    #[test]
    fn for_counts_from_from_or_now() {
        let body = set_body(&args(None, Some(86_400), None), 0).unwrap();
        assert_eq!(
            body,
            json!({"delegate": "bob@example.com", "until": "1970-01-02T00:00:00Z"})
        );
        let body = set_body(&args(None, Some(60), Some("1970-01-01T00:01:00Z")), 0).unwrap();
        assert_eq!(body["until"], "1970-01-01T00:02:00Z");
        assert_eq!(body["from"], "1970-01-01T00:01:00Z");
        let body = set_body(&args(Some("2030-01-01T00:00:00Z"), None, None), 0).unwrap();
        assert_eq!(body["until"], "2030-01-01T00:00:00Z", "as written");
        assert!(set_body(&args(None, Some(60), Some("soon")), 0).is_err());
    }
}
