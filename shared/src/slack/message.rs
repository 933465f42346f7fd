//! The message that follows an approval in Slack: what it shows ([`MessageState`], built from
//! the approval as one committed change left it, carried by the job) and how that is drawn in
//! Block Kit (slack-morphism's models).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use slack_morphism::prelude::*;

use crate::domain::{
    Approval, ApprovalId, EpochSeconds, ExecutionStatus, Outcome, Status, TenantId, rfc3339,
};

/// The buttons' `action_id`s, and the message metadata's `event_type`.
pub const APPROVE_ACTION: &str = "countersign.approve";
pub const REJECT_ACTION: &str = "countersign.reject";
pub const EVENT_TYPE: &str = "countersign_approval";

/// Slack's limits on what a block holds (Block Kit reference): a header's text, a section's
/// text, a field.
const HEADER_CHARS: usize = 150;
const SECTION_CHARS: usize = 3_000;
const FIELD_CHARS: usize = 2_000;

/// The execution as the message shows it: its end, or `queued` until then — an attempt that
/// begins or waits for its retry changes nothing the approvers need to see, and each change
/// shown is a call to Slack.
/// An approval-only type's execution is its requester's to claim: the message says whether it
/// was, in words.
fn shown_execution(approval: &Approval) -> String {
    match (approval.executes, approval.execution.status) {
        (false, ExecutionStatus::NotStarted) => "awaiting its claim".to_owned(),
        (false, ExecutionStatus::Running) => "claimed".to_owned(),
        (_, ExecutionStatus::Running) => ExecutionStatus::Queued.as_str().to_owned(),
        (_, other) => other.as_str().to_owned(),
    }
}

/// Everything the message shows, as of one change of the approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageState {
    pub approval_id: ApprovalId,
    pub tenant: TenantId,
    /// `context.summary`, when it is a string.
    pub summary: Option<String>,
    pub action_type: String,
    /// The first 12 hex digits of the SHA-256 of the canonical payload.
    pub payload_digest: String,
    pub requested_by: Option<String>,
    /// Each rule's name, approvals so far and approvals needed; without a policy, one line
    /// naming the approvers, any one of whom decides.
    pub rules: Vec<RuleLine>,
    pub votes: Vec<VoteLine>,
    /// The approval's and the execution's status by their API values.
    pub status: String,
    pub execution: String,
    pub expires_at: EpochSeconds,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleLine {
    pub name: String,
    pub approvers: Vec<String>,
    pub approvals: u32,
    pub needed: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VoteLine {
    pub approver: String,
    pub approved: bool,
    pub channel: String,
}

impl MessageState {
    pub fn of(approval: &Approval) -> Self {
        let canonical = serde_json_canonicalizer::to_vec(&approval.payload).unwrap_or_default();
        let digest = hex::encode(Sha256::digest(&canonical));
        let rules = match &approval.policy {
            Some(policy) => policy
                .rules
                .iter()
                .zip(approval.approvals_per_rule())
                .map(|(rule, approvals)| RuleLine {
                    name: rule.name.clone(),
                    approvers: rule
                        .approvers
                        .iter()
                        .map(|a| a.as_str().to_owned())
                        .collect(),
                    approvals,
                    needed: rule.min_approvals,
                })
                .collect(),
            None => vec![RuleLine {
                name: "any one approver".to_owned(),
                approvers: approval
                    .approvers
                    .iter()
                    .map(|a| a.as_str().to_owned())
                    .collect(),
                approvals: u32::from(approval.status == Status::Approved),
                needed: 1,
            }],
        };
        Self {
            approval_id: approval.id.clone(),
            tenant: approval.tenant.clone(),
            // The job carries it on SQS: no more than the message can show.
            summary: approval
                .context
                .get("summary")
                .and_then(|s| s.as_str())
                // A blank summary would be an empty header, which Slack refuses: the action
                // type stands in for it.
                .filter(|s| !s.trim().is_empty())
                .map(|s| cut(s, SECTION_CHARS)),
            action_type: approval.action_type.clone(),
            payload_digest: digest[..12].to_owned(),
            requested_by: approval
                .requested_by
                .as_ref()
                .map(|r| r.as_str().to_owned()),
            rules,
            votes: approval
                .recorded_votes()
                .iter()
                .map(|v| VoteLine {
                    // A vote in someone's place names its delegate too.
                    approver: match &v.by {
                        Some(by) => format!("{} (by {})", v.approver.as_str(), by.as_str()),
                        None => v.approver.as_str().to_owned(),
                    },
                    approved: v.outcome == Outcome::Approved,
                    channel: v.channel.as_str().to_owned(),
                })
                .collect(),
            status: approval.status.as_str().to_owned(),
            execution: shown_execution(approval),
            expires_at: approval.expires_at,
        }
    }

    pub fn is_pending(&self) -> bool {
        self.status == Status::Pending.as_str()
    }

    /// The notification text (and what a client without Block Kit shows).
    pub fn text(&self) -> String {
        // Slack parses the notification text as mrkdwn: escaped like the blocks, a summary
        // neither pings the channel nor shows a forged link in the push notification.
        let what = escape(self.summary.as_deref().unwrap_or(&self.action_type));
        let text = match (self.is_pending(), self.status == Status::Approved.as_str()) {
            (true, _) => format!("Approval requested: {what}"),
            (false, true) => format!("Approved: {what} (execution {})", self.execution),
            (false, false) => format!("{}: {what}", capitalised(&self.status)),
        };
        cut(&text, SECTION_CHARS)
    }

    /// The message metadata that finds the message again (`conversations.history`).
    pub fn metadata(&self) -> SlackMessageMetadata {
        SlackMessageMetadata::new(EVENT_TYPE.to_owned()).with_event_payload(
            [
                (
                    "approval_id".to_owned(),
                    self.approval_id.as_str().to_owned(),
                ),
                ("tenant".to_owned(), self.tenant.as_str().to_owned()),
            ]
            .into(),
        )
    }

    /// The message's blocks: what is asked, the rules' progress, the votes, the status, and the
    /// two buttons while it is pending.
    pub fn blocks(&self) -> Vec<SlackBlock> {
        let title = match &self.summary {
            Some(summary) => summary.clone(),
            None => format!("Approval requested: {}", self.action_type),
        };
        let mut fields = vec![
            field("Action", &format!("`{}`", escape(&self.action_type))),
            field("Payload", &format!("`sha256:{}`", self.payload_digest)),
            field(
                "Requested by",
                &escape(self.requested_by.as_deref().unwrap_or("unknown")),
            ),
            field(
                "Expires",
                &format!(
                    "<!date^{}^{{date_short_pretty}} {{time}}|{}>",
                    self.expires_at,
                    rfc3339(self.expires_at)
                ),
            ),
        ];
        fields.truncate(10);
        let rules: Vec<String> = self
            .rules
            .iter()
            .map(|r| {
                format!(
                    "• *{}*: {} of {} ({})",
                    escape(&r.name),
                    r.approvals,
                    r.needed,
                    escape(&r.approvers.join(", "))
                )
            })
            .collect();
        let votes: Vec<String> = match self.votes.is_empty() {
            true => vec!["No votes yet.".to_owned()],
            false => self
                .votes
                .iter()
                .map(|v| {
                    let (mark, verb) = if v.approved {
                        (":white_check_mark:", "approved")
                    } else {
                        (":x:", "rejected")
                    };
                    format!(
                        "{mark} *{}* {verb} (via {})",
                        escape(&v.approver),
                        v.channel
                    )
                })
                .collect(),
        };
        let status = match self.status.as_str() {
            "approved" => format!("Status: *approved* · execution: *{}*", self.execution),
            status => format!("Status: *{status}*"),
        };
        let mut blocks: Vec<SlackBlock> = vec![
            SlackHeaderBlock::new(cut(&title, HEADER_CHARS).into()).into(),
            SlackSectionBlock::new().with_fields(fields).into(),
            section(&format!("*Rules*\n{}", rules.join("\n"))),
            section(&format!("*Votes*\n{}", votes.join("\n"))),
            section(&status),
        ];
        if self.is_pending() {
            let button = |label: &str, action: &str, style| {
                SlackActionBlockElement::Button(
                    SlackBlockButtonElement::new(label.into())
                        .with_action_id(action.into())
                        .with_value(self.approval_id.as_str().to_owned())
                        .with_style(style),
                )
            };
            blocks.push(
                SlackActionsBlock::new(vec![
                    button("Approve", APPROVE_ACTION, SlackBlockButtonStyle::Primary),
                    button("Reject", REJECT_ACTION, SlackBlockButtonStyle::Danger),
                ])
                .with_block_id("countersign.decide".into())
                .into(),
            );
        }
        blocks.push(
            SlackContextBlock::new(vec![SlackContextBlockElement::MarkDown(
                SlackBlockMarkDownText::new(format!("Countersign · `{}`", self.approval_id)),
            )])
            .into(),
        );
        blocks
    }
}

fn section(text: &str) -> SlackBlock {
    SlackSectionBlock::new()
        .with_text(SlackBlockText::MarkDown(SlackBlockMarkDownText::new(cut(
            text,
            SECTION_CHARS,
        ))))
        .into()
}

fn field(label: &str, value: &str) -> SlackBlockText {
    SlackBlockText::MarkDown(SlackBlockMarkDownText::new(cut(
        &format!("*{label}*\n{value}"),
        FIELD_CHARS,
    )))
}

/// mrkdwn's three control characters, escaped as Slack asks: a summary or a name can then
/// neither mention `@channel` nor forge a link.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// At most `max` characters, marked when cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut kept: String = text.chars().take(max - 1).collect();
    kept.push('…');
    kept
}

fn capitalised(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::domain::approval::tests::pending;
    use crate::domain::{Approver, Channel, Decision};

    fn rendered(state: &MessageState) -> Value {
        serde_json::to_value(state.blocks()).unwrap()
    }

    #[test]
    fn a_hostile_summary_has_no_mention_or_link_and_a_blank_one_falls_back() {
        let mut approval = pending(1_700_000_000);
        approval.context.insert(
            "summary".into(),
            json!("<https://evil.example|Approve here> <!here> <@U1>"),
        );
        let text = MessageState::of(&approval).text();
        assert!(!text.contains('<') && !text.contains('>'), "{text}");
        for blank in ["", "   ", "\n\t"] {
            approval.context.insert("summary".into(), json!(blank));
            let state = MessageState::of(&approval);
            let blocks = rendered(&state);
            let title = blocks[0]["text"]["text"].as_str().unwrap();
            assert_eq!(
                title,
                format!("Approval requested: {}", approval.action_type)
            );
            assert_eq!(state.text(), title);
        }
    }

    #[test]
    fn a_pending_approval_shows_what_is_asked_and_two_buttons() {
        let mut approval = pending(1_700_000_000);
        approval
            .context
            .insert("summary".into(), json!("Deploy <!channel> & more"));
        approval.payload.insert("build".into(), json!(7));
        approval.requested_by = Some(Approver::parse("ci").unwrap());
        let state = MessageState::of(&approval);
        assert_eq!(state.payload_digest.len(), 12);
        let blocks = rendered(&state);
        assert_eq!(blocks[0]["type"], "header");
        assert_eq!(blocks[0]["text"]["text"], "Deploy <!channel> & more");
        // The notification text is mrkdwn: escaped, no mention and no link.
        assert_eq!(
            state.text(),
            "Approval requested: Deploy &lt;!channel&gt; &amp; more"
        );
        let text = blocks.to_string();
        assert!(
            text.contains("sha256:") && text.contains("*Requested by*\\nci"),
            "{text}"
        );
        let actions = blocks
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["type"] == "actions")
            .expect("buttons");
        assert_eq!(actions["elements"][0]["action_id"], APPROVE_ACTION);
        assert_eq!(actions["elements"][1]["action_id"], REJECT_ACTION);
        assert_eq!(actions["elements"][0]["value"], approval.id.as_str());
        assert_eq!(actions["elements"][0]["style"], "primary");
        let metadata = serde_json::to_value(state.metadata()).unwrap();
        assert_eq!(metadata["event_type"], EVENT_TYPE);
        assert_eq!(
            metadata["event_payload"]["approval_id"],
            approval.id.as_str()
        );
    }

    #[test]
    fn a_decided_approval_shows_the_votes_and_no_buttons() {
        let mut approval = pending(1_700_000_000);
        approval
            .context
            .insert("summary".into(), json!("Say <@U1> hi"));
        let vote = Decision {
            outcome: Outcome::Approved,
            approver: Approver::parse("ali<ce>").unwrap(),
            decided_at: 5,
            channel: Channel::Slack,
            comment: None,
            webhook_event_id: None,
            key_id: None,
            signed_in: None,
            by: None,
            delegation_set_by: None,
            passkey: None,
        };
        approval.votes = vec![vote.clone()];
        approval.decision = Some(vote);
        approval.status = Status::Approved;
        let state = MessageState::of(&approval);
        let blocks = rendered(&state);
        assert!(
            blocks
                .as_array()
                .unwrap()
                .iter()
                .all(|b| b["type"] != "actions")
        );
        let text = blocks.to_string();
        assert!(
            text.contains(":white_check_mark: *ali&lt;ce&gt;* approved (via slack)"),
            "{text}"
        );
        assert!(text.contains("execution: *not_started*"), "{text}");
        // A vote in someone's place names both.
        approval.votes[0].by = Some(Approver::parse("b<o>b").unwrap());
        let text = rendered(&MessageState::of(&approval)).to_string();
        assert!(
            text.contains("*ali&lt;ce&gt; (by b&lt;o&gt;b)* approved"),
            "{text}"
        );
        assert_eq!(
            state.text(),
            "Approved: Say &lt;@U1&gt; hi (execution not_started)"
        );
        assert_ne!(state, MessageState::of(&pending(1_700_000_000)));
        // An approval-only type: whether its requester claimed it.
        approval.executes = false;
        assert!(
            MessageState::of(&approval)
                .text()
                .contains("(execution awaiting its claim)")
        );
        approval.execution.status = ExecutionStatus::Running;
        assert!(
            MessageState::of(&approval)
                .text()
                .contains("(execution claimed)")
        );
    }

    #[test]
    fn long_texts_are_cut_to_slacks_limits() {
        let mut approval = pending(1);
        approval
            .context
            .insert("summary".into(), json!("s".repeat(500)));
        approval.approvers = (0..400)
            .map(|i| Approver::parse(&format!("approver-{i:03}")).unwrap())
            .collect();
        let blocks = rendered(&MessageState::of(&approval));
        assert_eq!(
            blocks[0]["text"]["text"].as_str().unwrap().chars().count(),
            150
        );
        for block in blocks.as_array().unwrap() {
            if let Some(text) = block["text"]["text"].as_str() {
                assert!(text.chars().count() <= SECTION_CHARS);
            }
        }
    }
}
