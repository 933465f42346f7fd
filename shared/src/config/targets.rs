//! `ACTION_TARGETS`: where each action type's approved actions are executed, or that none is
//! (an approval-only type).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{ConfigError, http_url};
use crate::domain::parse_config_json;
use crate::domain::stall::Reminders;

/// Where an action type's approved actions are executed.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionTarget {
    /// The one URL the executor calls for this type (none for an approval-only type).
    #[serde(default)]
    pub url: String,
    /// `false`: an approval-only type. Countersign calls nothing; the caller claims the
    /// approved execution and performs the action itself (docs/AGENTS.md).
    #[serde(default = "ActionTarget::executes_by_default")]
    pub executes: bool,
    /// Whether the target dedupes by `Idempotency-Key`; a non-idempotent target is never called
    /// twice blindly. Left out, it is `false`: the safe assumption about a target nobody vouched
    /// for (no blind retries, no lease takeovers; an unknown outcome goes to an operator).
    #[serde(default)]
    pub idempotent: bool,
    /// Where to ask what became of a business key when a call's outcome is unknown
    /// (`{idempotency_key}` is replaced by the URL-encoded key).
    #[serde(default)]
    pub status_url: Option<String>,
    /// How long after a call whose outcome is unknown the status URL is asked, in seconds: a
    /// gateway can answer 504 (or a connection drop end the call) while the target still works
    /// on the request and has not recorded its key, so an earlier `not_found` proves nothing.
    #[serde(default = "ActionTarget::default_status_delay")]
    pub status_delay_seconds: i64,
    /// `"approval": {"reminders": {...}}`: what an approval of this type gets when its create
    /// says nothing of it.
    #[serde(default)]
    pub approval: Option<ApprovalDefaults>,
}

/// An action type's defaults for its approvals.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalDefaults {
    /// As a create's `reminders` (checked at start).
    #[serde(default)]
    pub reminders: Option<serde_json::Value>,
}

impl ActionTarget {
    pub const DEFAULT_STATUS_DELAY_SECONDS: i64 = 10;
    /// At most the 15 minutes an SQS message may be delayed by itself.
    pub const MAX_STATUS_DELAY_SECONDS: i64 = 900;

    fn default_status_delay() -> i64 {
        Self::DEFAULT_STATUS_DELAY_SECONDS
    }

    fn executes_by_default() -> bool {
        true
    }

    /// The reminders of an approval of this type whose create names none.
    pub fn default_reminders(&self) -> Option<Reminders> {
        let value = self.approval.as_ref()?.reminders.as_ref()?;
        Reminders::parse(value, "reminders").ok()
    }

    /// An approval-only type says nothing but `{"executes": false}`: anything about calling a
    /// target would be a promise nothing keeps.
    fn check_approval_only(&self) -> Result<(), String> {
        let calls = !self.url.is_empty()
            || self.idempotent
            || self.status_url.is_some()
            || self.status_delay_seconds != Self::DEFAULT_STATUS_DELAY_SECONDS;
        match calls {
            true => Err("an approval-only type (\"executes\": false) has no url, idempotent, status_url or status_delay_seconds".to_owned()),
            false => Ok(()),
        }
    }
}

/// The placeholder a status URL must hold.
pub const KEY_PLACEHOLDER: &str = "{idempotency_key}";

/// `ACTION_TARGETS`, checked: every URL an http(s) URL, every status URL holding the key's
/// placeholder, an approval-only type saying nothing else.
pub(super) fn parse_action_targets(
    raw: &str,
) -> Result<BTreeMap<String, ActionTarget>, ConfigError> {
    let action_targets: BTreeMap<String, ActionTarget> = parse_config_json(
        raw,
        "each action type maps to an object: url, status_url (strings), idempotent, executes \
         (booleans), timeout_seconds (a number)",
    )
    .map_err(|e| ConfigError::new("ACTION_TARGETS", e))?;
    for (kind, target) in &action_targets {
        if let Some(reminders) = target.approval.as_ref().and_then(|a| a.reminders.as_ref()) {
            Reminders::parse(reminders, "approval.reminders").map_err(|errors| {
                let problems: Vec<String> = errors
                    .iter()
                    .map(|e| format!("{}: {}", e.field, e.message))
                    .collect();
                ConfigError::new("ACTION_TARGETS", format!("{kind}: {}", problems.join("; ")))
            })?;
        }
        if !target.executes {
            target
                .check_approval_only()
                .map_err(|e| ConfigError::new("ACTION_TARGETS", format!("{kind}: {e}")))?;
            continue;
        }
        http_url(&target.url)
            .map_err(|e| ConfigError::new("ACTION_TARGETS", format!("{kind}: url: {e}")))?;
        if let Some(status_url) = &target.status_url {
            let problem =
                |e: String| ConfigError::new("ACTION_TARGETS", format!("{kind}: status_url: {e}"));
            if !status_url.contains(KEY_PLACEHOLDER) {
                return Err(problem(format!("must contain {KEY_PLACEHOLDER}")));
            }
            http_url(&status_url.replace(KEY_PLACEHOLDER, "k")).map_err(problem)?;
        }
        if !(1..=ActionTarget::MAX_STATUS_DELAY_SECONDS).contains(&target.status_delay_seconds) {
            return Err(ConfigError::new(
                "ACTION_TARGETS",
                format!(
                    "{kind}: status_delay_seconds must be from 1 to {}",
                    ActionTarget::MAX_STATUS_DELAY_SECONDS
                ),
            ));
        }
    }
    Ok(action_targets)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{KEYS, TARGETS, config};
    use super::*;

    #[test]
    fn an_approval_only_type_has_no_target_and_an_executed_one_must() {
        let parsed = parse_action_targets(r#"{"agent": {"executes": false}}"#).unwrap();
        assert!(!parsed["agent"].executes);
        for refused in [
            r#"{"agent": {"executes": false, "url": "http://t.example/x"}}"#,
            r#"{"agent": {"executes": false, "idempotent": true}}"#,
            r#"{"agent": {"executes": false, "status_delay_seconds": 3}}"#,
            r#"{"deploy": {}}"#,
            r#"{"deploy": {"executes": true}}"#,
        ] {
            let e = parse_action_targets(refused).unwrap_err();
            assert_eq!(e.variable, "ACTION_TARGETS", "{refused}");
        }
        let executed = parse_action_targets(r#"{"deploy": {"url": "http://t.example/x"}}"#);
        assert!(executed.unwrap()["deploy"].executes);
    }

    #[test]
    fn the_status_delay_defaults_to_ten_seconds_and_is_at_least_one() {
        let target = |delay: &str| {
            format!(
                r#"{{"pay": {{"url": "https://pay.example.com/charge", "status_url": "https://pay.example.com/s/{{idempotency_key}}"{delay}}}}}"#
            )
        };
        let default = config(&[KEYS, ("ACTION_TARGETS", &target(""))]).unwrap();
        assert_eq!(
            default.secrets.action_targets["pay"].status_delay_seconds,
            10
        );
        let set = target(r#", "status_delay_seconds": 3"#);
        let set = config(&[KEYS, ("ACTION_TARGETS", &set)]).unwrap();
        assert_eq!(set.secrets.action_targets["pay"].status_delay_seconds, 3);
        for bad in ["0", "-1", "901", "1.5", "\"10\""] {
            let raw = target(&format!(r#", "status_delay_seconds": {bad}"#));
            let err = config(&[KEYS, ("ACTION_TARGETS", &raw)]).unwrap_err();
            assert_eq!(err.variable, "ACTION_TARGETS", "{bad}");
        }
    }

    #[test]
    fn a_status_url_is_an_http_url_with_the_key_placeholder() {
        let target = |status: &str| {
            format!(
                r#"{{"pay": {{"url": "https://pay.example.com/charge", "status_url": "{status}"}}}}"#
            )
        };
        let ok = target("https://pay.example.com/status/{idempotency_key}");
        let parsed = config(&[KEYS, ("ACTION_TARGETS", &ok)]).unwrap();
        assert_eq!(
            parsed.secrets.action_targets["pay"].status_url.as_deref(),
            Some("https://pay.example.com/status/{idempotency_key}")
        );
        assert_eq!(
            config(&[KEYS, TARGETS]).unwrap().secrets.action_targets["deploy"].status_url,
            None
        );
        for bad in [
            "https://pay.example.com/status",
            "ftp://pay.example.com/{idempotency_key}",
            "{idempotency_key}",
        ] {
            let err = config(&[KEYS, ("ACTION_TARGETS", &target(bad))]).unwrap_err();
            assert_eq!(err.variable, "ACTION_TARGETS", "{bad}");
            assert!(
                err.problem.starts_with("pay: status_url"),
                "{}",
                err.problem
            );
        }
    }
}
