//! What Slack posts to the interactivity URL: a form with one `payload` field holding JSON. Only
//! a `block_actions` click on one of the message's two buttons is ours; anything else is
//! acknowledged and ignored.

use serde_json::Value;

use super::message::{APPROVE_ACTION, REJECT_ACTION};
use crate::domain::Outcome;

/// A click on Approve or Reject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Click {
    /// The clicking user's Slack id (the team's: ids are unique per workspace).
    pub user: String,
    pub outcome: Outcome,
    /// The button's `value`, as sent: one that names no approval decides nothing.
    pub approval_id: String,
    /// Where an answer for the clicking user alone goes, if Slack gave one.
    pub response_url: Option<String>,
}

/// Reads a verified interaction body; `None` when it is not a click on our buttons.
pub fn parse_click(body: &[u8]) -> Option<Click> {
    let payload = url::form_urlencoded::parse(body)
        .find(|(name, _)| name == "payload")
        .map(|(_, value)| value.into_owned())?;
    let payload: Value = serde_json::from_str(&payload).ok()?;
    if payload["type"] != "block_actions" {
        return None;
    }
    let (outcome, approval_id) = payload["actions"].as_array()?.iter().find_map(|action| {
        let outcome = match action["action_id"].as_str()? {
            APPROVE_ACTION => Outcome::Approved,
            REJECT_ACTION => Outcome::Rejected,
            _ => return None,
        };
        Some((outcome, action["value"].as_str()?.to_owned()))
    })?;
    Some(Click {
        user: payload["user"]["id"].as_str()?.to_owned(),
        outcome,
        approval_id,
        response_url: payload["response_url"].as_str().map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn form(payload: &Value) -> Vec<u8> {
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair("payload", &payload.to_string())
            .finish()
            .into_bytes()
    }

    #[test]
    fn a_click_on_our_button_is_read() {
        let payload = json!({
            "type": "block_actions",
            "user": {"id": "U01ALICE", "username": "alice"},
            "response_url": "https://hooks.slack.com/actions/T1/2/x",
            "actions": [{"action_id": "countersign.reject", "value": "apr_1", "type": "button"}],
        });
        assert_eq!(
            parse_click(&form(&payload)),
            Some(Click {
                user: "U01ALICE".into(),
                outcome: Outcome::Rejected,
                approval_id: "apr_1".into(),
                response_url: Some("https://hooks.slack.com/actions/T1/2/x".into()),
            })
        );
    }

    #[test]
    fn anything_else_is_not_ours() {
        for payload in [
            json!({"type": "view_submission", "user": {"id": "U1"}}),
            json!({"type": "block_actions", "user": {"id": "U1"}, "actions": [{"action_id": "other", "value": "x"}]}),
            json!({"type": "block_actions", "actions": [{"action_id": "countersign.approve", "value": "x"}]}),
            json!([]),
        ] {
            assert_eq!(parse_click(&form(&payload)), None, "{payload}");
        }
        assert_eq!(parse_click(b"payload=%7Bnot-json"), None);
        assert_eq!(parse_click(b"token=x"), None);
        assert_eq!(parse_click(&[0xff, 0xfe]), None);
    }
}
