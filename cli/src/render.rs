//! Text for people: an approval in full, a listing's rows, an event's line.

use serde_json::Value;

use crate::approval::{Approval, said};

/// Data longer than this is cut in an event's line (`--json` shows it whole).
const MAX_DATA_CHARS: usize = 160;

/// An approval in full, one field a line.
pub fn approval(a: &Approval) -> String {
    let mut lines = vec![format!("{}  {}", a.id, a.state_line())];
    let mut field = |name: &str, value: String| lines.push(format!("  {name:<11}{value}"));
    if let Some(summary) = a.context["summary"]
        .as_str()
        .filter(|s| !s.trim().is_empty())
    {
        field("summary:", summary.to_owned());
    }
    let payload = if a.action.payload.is_null() {
        String::new()
    } else {
        format!(" {}", a.action.payload)
    };
    field("action:", format!("{}{payload}", a.action.kind));
    field(
        "requested:",
        format!(
            "by {} at {}, expires {}",
            a.requested_by.as_deref().unwrap_or("(unknown)"),
            a.created_at,
            a.expires_at
        ),
    );
    field("approvers:", a.approvers.join(", "));
    field("quorum:", a.quorum());
    for vote in &a.votes {
        field(
            "vote:",
            format!(
                "{}{} {} at {} ({}){}",
                vote.approver,
                vote.by
                    .as_deref()
                    .map_or_else(String::new, |by| format!(", in their place by {by},")),
                vote.vote,
                vote.at,
                vote.channel,
                said(vote.comment.as_deref())
            ),
        );
    }
    if let Some(decision) = &a.decision {
        field(
            "decision:",
            format!(
                "{} by {} at {} ({})",
                decision.outcome, decision.approver, decision.decided_at, decision.channel
            ),
        );
    }
    if let Some(c) = &a.cancellation {
        field(
            "cancelled:",
            format!("by {} at {}{}", c.by, c.at, said(c.reason.as_deref())),
        );
    }
    field("execution:", a.execution_line());
    lines.join("\n")
}

/// One row of a listing.
pub fn row(a: &Approval) -> String {
    format!(
        "{}  {:<9}  {:<12}  {}  {}",
        a.id,
        a.status,
        a.action.kind,
        a.created_at,
        a.approvers.join(", ")
    )
}

/// One event: when, what, who through which channel, and its data.
pub fn event(event: &Value) -> String {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let actor = &event["actor"];
    let who = [&actor["principal"], &actor["approver"]]
        .into_iter()
        .find_map(|v| v.as_str())
        .unwrap_or("countersign");
    let channel = actor["channel"]
        .as_str()
        .map_or_else(String::new, |c| format!(" ({c})"));
    let mut line = format!(
        "{}  {:<30}  {who}{channel}",
        text(&event["at"]),
        text(&event["type"])
    );
    let data = &event["data"];
    if data.as_object().is_some_and(|d| !d.is_empty()) {
        let mut shown = data.to_string();
        if shown.chars().count() > MAX_DATA_CHARS {
            shown = shown.chars().take(MAX_DATA_CHARS).collect::<String>() + "…";
        }
        line.push_str("  ");
        line.push_str(&shown);
    }
    line
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_event_line_names_who_and_cuts_long_data() {
        let line = event(&json!({
            "id": "evt_1", "type": "approval.vote_recorded", "at": "2026-01-01T00:00:00Z",
            "actor": {"approver": "alice@example.com", "channel": "api"},
            "data": {"vote": "approve", "comment": "x".repeat(500)}
        }));
        assert!(line.starts_with("2026-01-01T00:00:00Z  approval.vote_recorded"));
        assert!(line.contains("alice@example.com (api)"));
        assert!(line.ends_with('…'));
        let line =
            event(&json!({"type": "execution.succeeded", "at": "t", "actor": {}, "data": {}}));
        assert!(line.ends_with("countersign"), "{line}");
    }

    #[test]
    fn an_approval_says_what_it_gates() {
        let a: Approval = serde_json::from_value(json!({
            "id": "apr_1", "status": "pending", "requested_by": "github:octocat",
            "action": {"type": "github_deployment", "payload": {"run_id": 123}},
            "context": {"summary": "Deploy acme/api@1a2b3c4 to production, run 123"},
            "approvers": ["alice@example.com"], "execution": {"status": "not_started"}
        }))
        .expect("approval");
        let text = approval(&a);
        assert!(
            text.contains("summary:   Deploy acme/api@1a2b3c4 to production, run 123"),
            "{text}"
        );
    }

    #[test]
    fn an_approval_shows_each_part() {
        let a: Approval = serde_json::from_value(json!({
            "id": "apr_1", "status": "cancelled", "requested_by": "ci@acme",
            "action": {"type": "deploy", "payload": {"build": 1}},
            "approvers": ["alice@example.com"], "created_at": "c", "expires_at": "e",
            "votes": [], "cancellation": {"by": "ci@acme", "at": "t", "reason": "superseded"},
            "execution": {"status": "not_started", "attempts": 0}
        }))
        .expect("approval");
        let text = approval(&a);
        assert!(
            text.starts_with("apr_1  cancelled by ci@acme: superseded"),
            "{text}"
        );
        assert!(text.contains("action:    deploy {\"build\":1}"), "{text}");
        assert!(
            text.contains("cancelled: by ci@acme at t: superseded"),
            "{text}"
        );
        assert!(text.contains("execution: not started"), "{text}");
    }
}
