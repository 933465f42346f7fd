//! The jobs: what each one carries, and what the executor and the ledger read of it (its
//! identity, keys, ledger item and the trail event its end makes). How a job travels as an SQS
//! message body is `job_body.rs` (a notify job's older bodies, `notify_body.rs`); which change
//! makes which job, `dispatch_policy.rs`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::domain::trail::{EventType, TrailEvent, event_id};
use crate::domain::{ApprovalId, Approver, Completion, EpochSeconds, IdempotencyKey, TenantId};
use crate::slack::MessageState;
use crate::store::{Guarded, LedgerKey, size};

pub use super::email::EmailJob;
pub use super::github_call::GithubCall;
use super::job_body::ExecuteJobBody;
use super::notify_body::NotifyJobBody;
pub use super::resume::ResumeJob;

/// An SQS message body. Jobs carry what their downstream call needs (approvals never change
/// their action, context or decision once approved), so the executor reads nothing before
/// calling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Job {
    /// A notification: the approval's first (kind `notify`, as every version has read it), or a
    /// later one — a reminder, an escalation step, a delegate's copy — which travels as kind
    /// `notify_later` ([`Job::queue_kind`]): code from before v6 would read those as a first
    /// notification (a reminder sent as one, a delegate's copy using up the first's record), so
    /// it must refuse them instead, and does, not knowing the kind.
    #[serde(alias = "notify_later")]
    Notify(NotifyJob),
    Execute(ExecuteJob),
    Callback(CallbackJob),
    Slack(SlackJob),
    /// A reminder's or an escalation step's reply in the approval's Slack thread.
    SlackReply(SlackReplyJob),
    /// A GitHub deployment's rejection (rejected, expired, cancelled by a person); its approval
    /// is told as the execution of the approved one ([`ExecuteJob::github`]).
    Github(GithubJob),
    /// The answer to an AWS workflow waiting on the approval (`resume`).
    Resume(ResumeJob),
    /// One email to one approver, through SES (v7).
    Email(EmailJob),
}

/// A GitHub deployment's rejection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GithubJob {
    pub approval_id: ApprovalId,
    pub tenant: TenantId,
    pub call: GithubCall,
    /// The trail order of the event that ended the approval: the answer's event sorts after it.
    pub after: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    /// The approval's expiry: it bounds the retention of what the job writes (`None` in a job
    /// queued before jobs carried it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<EpochSeconds>,
}

/// The tenant's Slack message, drawn as one committed change left the approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlackJob {
    /// The change's stream position: a newer state has a greater one.
    pub version: String,
    /// When the approval was created: a lookup for its message starts there.
    pub created_at: EpochSeconds,
    pub message: MessageState,
    /// The approval's trace: the job's log lines carry it, as every line about the approval
    /// does (a job queued before it existed starts its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

/// An approval's notifications: one call per approver (each with its own `Idempotency-Key`),
/// made together, under one ledger item that keeps which approvers are done.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "NotifyJobBody")]
pub struct NotifyJob {
    pub approval_id: ApprovalId,
    pub tenant: TenantId,
    pub approvers: Vec<Approver>,
    /// A job queued before v5 notified one approver under a ledger item of its own, which it
    /// keeps (a deploy may find such a job in the queue).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub per_approver: bool,
    pub action: Value,
    pub context: Value,
    pub expires_at: EpochSeconds,
    /// The trail order of the approval's `approval.created` event: the notifications' events
    /// sort after it.
    #[serde(default)]
    pub after: String,
    /// The approval's trace ([`crate::observe::TraceContext::stored`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    /// Why, when it is not the approval's first notification: a reminder or an escalation
    /// step, and its number (`"reason": "reminder", "number": 2` in the job's body).
    #[serde(default, flatten, skip_serializing_if = "Option::is_none")]
    pub reason: Option<NotifyReason>,
    /// A delegate's copy of a listed approver's notification: the person whose place the
    /// delegate may fill (the job's one approver is the delegate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_of: Option<Approver>,
}

/// A notification after the first: reminder `number`, or escalation step `number`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum NotifyReason {
    Reminder { number: u32 },
    Escalation { number: u32 },
}

impl NotifyReason {
    /// What the notifier's body says (`reason`) and what the job's identity and keys name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reminder { .. } => "reminder",
            Self::Escalation { .. } => "escalation",
        }
    }

    pub fn number(self) -> u32 {
        match self {
            Self::Reminder { number } | Self::Escalation { number } => number,
        }
    }

    /// `reminder:2`: tells this notification's keys and events apart from the first's.
    pub(crate) fn tag(self) -> String {
        format!("{}:{}", self.as_str(), self.number())
    }
}

/// A reply in the thread of the approval's Slack message, mentioning whom a reminder or an
/// escalation step concerns (by their Slack user where `SLACK`'s `users` maps one). Slack takes
/// no key, so it is posted at most once: a reply whose outcome is unknown is not posted again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlackReplyJob {
    pub approval_id: ApprovalId,
    pub tenant: TenantId,
    pub thread: crate::domain::SlackMessage,
    pub reason: NotifyReason,
    pub approvers: Vec<Approver>,
    /// The trail order of the reminder's or step's event: the reply's sorts after it.
    pub after: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    /// The approval's expiry: it bounds the retention of what the job writes (`None` in a job
    /// queued before jobs carried it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<EpochSeconds>,
}

impl SlackReplyJob {
    /// What the reply says, `mention` naming each approver (their Slack user, if known).
    pub fn text(&self, mention: impl Fn(&Approver) -> String) -> String {
        let whom: Vec<String> = self.approvers.iter().map(mention).collect();
        match self.reason {
            NotifyReason::Reminder { number } => {
                format!("Reminder {number}: still waiting on {}.", whom.join(", "))
            }
            NotifyReason::Escalation { number } => format!(
                "Escalated (step {number}): {} can now decide.",
                whom.join(", ")
            ),
        }
    }
}

impl NotifyJob {
    /// What tells this job's keys, ledger item and events apart from the approval's first
    /// notification (`None` for that one): `reminder:2`, `notify-delegate:erin@…`, ….
    fn tag(&self) -> Option<String> {
        let reason = self.reason.map(NotifyReason::tag);
        // A delegate's copy is named by the delegate (the job's one approver): one copy per
        // delegate, whichever place it opens.
        let delegate = self
            .in_place_of
            .as_ref()
            .and(self.approvers.first())
            .map(Approver::identity);
        match (&reason, delegate) {
            (_, None) => reason,
            (None, Some(delegate)) => Some(format!("notify-delegate:{delegate}")),
            (Some(reason), Some(delegate)) => Some(format!("{reason}-delegate:{delegate}")),
        }
    }

    /// The `Idempotency-Key` of `approver`'s notification: the same on every attempt. An
    /// approver's name may hold any character but controls; a header value only visible ASCII
    /// (and surrounding spaces are trimmed): the rest is percent-encoded, so
    /// `alice@example.com` stays as it is.
    pub fn key_for(&self, approver: &Approver) -> String {
        let encode = |a: &Approver| {
            percent_encoding::utf8_percent_encode(a.as_str(), HEADER_UNSAFE).to_string()
        };
        let key = match self.reason {
            None => format!("{}:notify:{}", self.approval_id, encode(approver)),
            Some(reason) => format!("{}:{}:{}", self.approval_id, reason.tag(), encode(approver)),
        };
        match &self.in_place_of {
            None => key,
            // The delegate's own copy: the key names the delegate (as above) and says so.
            Some(_) => format!("{key}:delegate"),
        }
    }

    /// What tells one end of this job apart in the trail's order: its attempt — and, for a job
    /// queued before v5 (one per approver, each with its own attempts), its approver, so the
    /// ends of two approvers' jobs never share an item: 128 bits of a hash of the identity (32
    /// bits could meet between two approvers of one approval, and the second end written would
    /// replace the first's item).
    fn end_tag(&self, attempt: u32) -> String {
        match (self.per_approver, self.approvers.first()) {
            (true, Some(approver)) => {
                use sha2::Digest;
                let digest = sha2::Sha256::digest(approver.identity().as_bytes());
                format!("{attempt:03}-{}", hex::encode(&digest[..16]))
            }
            _ => format!("{attempt:03}"),
        }
    }

    /// The events of one end of the job: each approver's notification sent or failed
    /// (`outcomes`), in one item of the trail after the creation — `attempt` tells apart the
    /// ends of one job (each attempt ends once; a give-up counts as one more).
    pub fn events(
        &self,
        outcomes: &[(&Approver, Result<(), String>)],
        attempt: u32,
        now: EpochSeconds,
    ) -> Vec<TrailEvent> {
        outcomes
            .iter()
            .enumerate()
            .map(|(place, (approver, outcome))| {
                let (kind, data) = match outcome {
                    Ok(()) => (
                        EventType::NotificationSent,
                        json!({ "approver": approver }),
                    ),
                    // Refused by the notifier, or out of attempts: no review link reached the
                    // approver.
                    Err(error) => (
                        EventType::NotificationFailed,
                        json!({ "approver": approver, "error": size::cut(error, size::MAX_ERROR_CHARS) }),
                    ),
                };
                let mut event = TrailEvent::recorded_after(
                    &self.after,
                    kind,
                    (&self.tenant, &self.approval_id),
                    &match self.tag() {
                        None => approver.identity(),
                        Some(tag) => format!("{tag}/{}", approver.identity()),
                    },
                    now,
                    json!({ "channel": "notify" }),
                    data,
                );
                event.order = notification_order(&self.after, &self.end_tag(attempt), place);
                event
            })
            .collect()
    }
}

/// Where the notifications one end records sort: after the creation, by end (`end_tag`), then
/// approver.
fn notification_order(after: &str, end_tag: &str, place: usize) -> String {
    let (key, index) = crate::domain::trail::order_place(after);
    let key = crate::domain::trail::listed_key(key);
    format!("{key}~{index:02}n{end_tag}#{place:02}")
}

/// One event delivered to the tenant's subscription.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallbackJob {
    pub approval_id: ApprovalId,
    pub tenant: TenantId,
    pub event_id: String,
    pub event_type: String,
    /// The event's trail order: `callback.delivered` / `callback.failed` sort right after it.
    pub event_order: String,
    /// What is POSTed (signed as serialised): `{"type", "timestamp", "data": {"approval",
    /// "event"}}`, the same on every attempt.
    pub body: Value,
    /// The approval's trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    /// The approval's expiry: it bounds the retention of what the job writes (`None` in a job
    /// queued before jobs carried it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<EpochSeconds>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "ExecuteJobBody")]
pub struct ExecuteJob {
    pub approval_id: ApprovalId,
    pub tenant: TenantId,
    /// 0 for the approval's own execution, n for the nth operator retry.
    pub generation: u32,
    /// The create request's `Idempotency-Key`: with the tenant, the business key sent downstream.
    pub idempotency_key: IdempotencyKey,
    /// Whether the business key names the approval (see
    /// [`crate::domain::Approval::execute_key_names_approval`]); jobs queued before it existed do
    /// not.
    pub key_names_approval: bool,
    /// The configured action type, which names the target.
    pub action_type: String,
    pub payload: Map<String, Value>,
    pub context: Value,
    pub decision: Value,
    /// The approval's trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    /// A GitHub deployment: its execution is the answer to GitHub (`approved`), not a call to
    /// an action target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub github: Option<GithubCall>,
    /// The approval's expiry: it bounds the retention of what the job writes (`None` in a job
    /// queued before jobs carried it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<EpochSeconds>,
    /// A passkey-only approval's certificate (docs/VERIFY.md): the execute call's body carries
    /// it for the target to check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate: Option<Box<Value>>,
}

/// What a header value cannot carry as it is: controls, space (trimmed at the ends) and `%`
/// itself (every byte outside ASCII is encoded too).
const HEADER_UNSAFE: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS.add(b' ').add(b'%');

impl Job {
    /// The job's deduplication identity.
    pub fn id(&self) -> String {
        match self {
            Self::Notify(j) if j.per_approver => {
                format!("{}#notify#{}", j.approval_id, j.approvers[0].as_str())
            }
            Self::Notify(j) => match j.tag() {
                None => format!("{}#notify", j.approval_id),
                Some(tag) => format!("{}#{tag}", j.approval_id),
            },
            Self::Execute(j) => format!("{}#execute#{}", j.approval_id, j.generation),
            Self::Callback(j) => format!("{}#callback#{}", j.approval_id, j.event_id),
            Self::Slack(j) => format!("{}#slack#{}", j.message.approval_id, j.version),
            Self::SlackReply(j) => format!("{}#slack-{}", j.approval_id, j.reason.tag()),
            Self::Github(j) => format!("{}#github", j.approval_id),
            Self::Resume(j) if j.generation == 0 => format!("{}#resume", j.approval_id),
            Self::Resume(j) => format!("{}#resume#{}", j.approval_id, j.generation),
            Self::Email(j) => format!("{}#{}", j.approval_id(), j.tag()),
        }
    }

    /// A GitHub answer's call, if the job is one (the approved answer is an execute job).
    pub fn github_call(&self) -> Option<&GithubCall> {
        match self {
            Self::Execute(j) => j.github.as_ref(),
            Self::Github(j) => Some(&j.call),
            Self::Notify(_)
            | Self::Callback(_)
            | Self::Slack(_)
            | Self::SlackReply(_)
            | Self::Resume(_)
            | Self::Email(_) => None,
        }
    }

    /// The job as the execution ledger knows it: the item that guards it (one per notification,
    /// per callback, and per execution across its operator retries) and its generation.
    pub fn ledger(&self) -> LedgerKey {
        let guards = match self {
            Self::Notify(j) if j.per_approver => Guarded::Notification(j.approvers[0].clone()),
            Self::Notify(j) => match j.tag() {
                None => Guarded::Notifications,
                Some(tag) => Guarded::LaterNotifications(tag),
            },
            Self::Execute(_) => Guarded::Execution,
            Self::Callback(j) => Guarded::Callback(j.event_id.clone()),
            Self::Slack(_) => Guarded::SlackMessage,
            Self::SlackReply(j) => Guarded::LaterNotifications(format!("slack-{}", j.reason.tag())),
            Self::Github(_) => Guarded::GithubAnswer,
            Self::Resume(_) => Guarded::Resume,
            Self::Email(j) => Guarded::LaterNotifications(j.tag()),
        };
        LedgerKey {
            tenant: self.tenant().clone(),
            approval_id: self.approval_id().clone(),
            guards,
            generation: self.generation(),
            expires_at: self.expires_at(),
        }
    }

    /// The trail event an attempt's end makes (`completion`, as the ledger keeps it): a
    /// callback delivered or failed, a GitHub answer given or failed. An execution's events come
    /// from the approval's own change, on the stream, so an execute job's end makes none here;
    /// a notify job's are its approvers' ([`NotifyJob::events`]).
    pub fn ended_event(&self, completion: &Completion, now: EpochSeconds) -> Option<TrailEvent> {
        let completion = size::kept(completion);
        if let Self::Resume(j) = self {
            // What was sent is known to the attempt that sent it, which records its own end.
            return j.ended_event(&completion, None, true, now);
        }
        if let Self::Email(j) = self {
            return j.ended_event(&completion, now);
        }
        let (after, kind, discriminator, data) = match (self, &completion) {
            (Self::Callback(j), Completion::Succeeded) => (
                &j.event_order,
                EventType::CallbackDelivered,
                j.event_id.clone(),
                json!({ "event_id": j.event_id, "event_type": j.event_type}),
            ),
            (Self::Callback(j), Completion::Failed(error)) => (
                &j.event_order,
                EventType::CallbackFailed,
                j.event_id.clone(),
                json!({ "event_id": j.event_id, "event_type": j.event_type, "error": error }),
            ),
            (Self::Github(j), Completion::Succeeded) => (
                &j.after,
                EventType::GithubAnswered,
                String::new(),
                json!({ "state": state(&j.call), "environment": j.call.environment,
                        "comment": j.call.comment }),
            ),
            (Self::SlackReply(j), Completion::Succeeded) => (
                &j.after,
                EventType::NotificationSent,
                format!("slack/{}", j.reason.tag()),
                json!({ "approvers": j.approvers, "reason": j.reason.as_str(), "number": j.reason.number() }),
            ),
            (
                Self::SlackReply(j),
                Completion::Failed(error) | Completion::NeedsReconciliation(error),
            ) => (
                &j.after,
                EventType::NotificationFailed,
                format!("slack/{}", j.reason.tag()),
                json!({ "approvers": j.approvers, "reason": j.reason.as_str(), "number": j.reason.number(),
                        "error": error }),
            ),
            (Self::Github(j), Completion::Failed(error)) => (
                &j.after,
                EventType::GithubAnswerFailed,
                String::new(),
                json!({ "state": state(&j.call), "environment": j.call.environment,
                        "error": error }),
            ),
            _ => return None,
        };
        let actor = json!({ "channel": self.kind() });
        let mut event = TrailEvent::recorded_after(
            after,
            kind,
            (self.tenant(), self.approval_id()),
            &discriminator,
            now,
            actor,
            data,
        );
        if let Some(id) = self.outcome_id() {
            event.id = id;
        }
        Some(event)
    }

    /// The id a callback's outcome is stored under, delivered or failed alike: with one id, the
    /// conditional put that records either outcome makes the other impossible (a callback has
    /// no ledger item; its trail event is its record). `None` for the other jobs.
    pub fn outcome_id(&self) -> Option<String> {
        match self {
            Self::Callback(j) => Some(event_id(
                &j.tenant,
                &j.approval_id,
                EventType::CallbackDelivered,
                &j.event_id,
            )),
            Self::Notify(_)
            | Self::Execute(_)
            | Self::Slack(_)
            | Self::SlackReply(_)
            | Self::Github(_)
            | Self::Resume(_)
            | Self::Email(_) => None,
        }
    }

    /// The `Idempotency-Key` sent downstream: the same on every attempt of the job.
    pub fn business_key(&self) -> String {
        match self {
            // Each approver's call has its own ([`NotifyJob::key_for`]).
            Self::Notify(j) => match j.tag() {
                None => format!("{}:notify", j.approval_id),
                Some(tag) => format!("{}:{tag}", j.approval_id),
            },
            // With the approval id: a create key may be used again once its record expired,
            // for another approval, whose execution must never meet the first one's stored
            // result at a target that dedupes. (An approval from before keeps the key its
            // execution may already have sent.)
            Self::Execute(j) if j.key_names_approval => {
                format!(
                    "{}:{}:{}",
                    j.tenant,
                    j.idempotency_key.as_str(),
                    j.approval_id
                )
            }
            Self::Execute(j) => format!("{}:{}", j.tenant, j.idempotency_key.as_str()),
            // The receiver dedupes by `webhook-id`, the event id.
            Self::Callback(j) => j.event_id.clone(),
            // Slack takes no key: the message's ledger item keeps it to one.
            Self::Slack(j) => j.message.approval_id.to_string(),
            Self::SlackReply(j) => format!("{}:slack-{}", j.approval_id, j.reason.tag()),
            // GitHub takes none either: the round's fence keeps an answer to its own round.
            Self::Github(j) => format!("{}:github", j.approval_id),
            // AWS's answer calls take none: the token itself answers once.
            Self::Resume(j) => format!("{}:resume", j.approval_id),
            // SES takes none: the email's ledger item keeps it to one.
            Self::Email(j) => format!("{}:{}", j.approval_id(), j.tag()),
        }
    }

    /// The `kind` its message body carries: its [`Job::kind`], but `notify_later` for a
    /// notification after the first (see [`Job::Notify`]). Every shape a version adds has a
    /// kind older executors do not know, so a rollback leaves such a message in the queue (and
    /// on to the DLQ, to be redriven once rolled forward) rather than misread.
    pub fn queue_kind(&self) -> &'static str {
        match self {
            Self::Notify(j) if j.tag().is_some() && !j.per_approver => "notify_later",
            job => job.kind(),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Self::Notify(_) => "notify",
            Self::Execute(_) => "execute",
            Self::Callback(_) => "callback",
            Self::Slack(_) => "slack",
            Self::SlackReply(_) => "slack_reply",
            Self::Github(_) => "github",
            Self::Resume(_) => "resume",
            Self::Email(_) => "email",
        }
    }

    pub fn approval_id(&self) -> &ApprovalId {
        match self {
            Self::Notify(j) => &j.approval_id,
            Self::Execute(j) => &j.approval_id,
            Self::Callback(j) => &j.approval_id,
            Self::Slack(j) => &j.message.approval_id,
            Self::SlackReply(j) => &j.approval_id,
            Self::Github(j) => &j.approval_id,
            Self::Resume(j) => &j.approval_id,
            Self::Email(j) => j.approval_id(),
        }
    }

    pub fn tenant(&self) -> &TenantId {
        match self {
            Self::Notify(j) => &j.tenant,
            Self::Execute(j) => &j.tenant,
            Self::Callback(j) => &j.tenant,
            Self::Slack(j) => &j.message.tenant,
            Self::SlackReply(j) => &j.tenant,
            Self::Github(j) => &j.tenant,
            Self::Resume(j) => &j.tenant,
            Self::Email(j) => j.tenant(),
        }
    }

    /// The approval's trace, continued by the job's calls; a job without one (queued before
    /// traces were kept) starts its own.
    pub fn trace(&self) -> crate::observe::TraceContext {
        let stored = match self {
            Self::Notify(j) => j.trace.as_deref(),
            Self::Execute(j) => j.trace.as_deref(),
            Self::Callback(j) => j.trace.as_deref(),
            Self::Slack(j) => j.trace.as_deref(),
            Self::SlackReply(j) => j.trace.as_deref(),
            Self::Github(j) => j.trace.as_deref(),
            Self::Resume(j) => j.trace.as_deref(),
            Self::Email(j) => j.trace.as_deref(),
        };
        stored
            .and_then(crate::observe::TraceContext::from_stored)
            .unwrap_or_else(crate::observe::TraceContext::fresh)
    }

    /// The job with its trace set: a job queued without one starts a fresh trace here, which
    /// its log lines and its calls then share.
    pub fn traced(mut self) -> Self {
        let trace = Some(self.trace().stored());
        match &mut self {
            Self::Notify(j) if j.trace.is_none() => j.trace = trace,
            Self::Execute(j) if j.trace.is_none() => j.trace = trace,
            Self::Callback(j) if j.trace.is_none() => j.trace = trace,
            Self::Slack(j) if j.trace.is_none() => j.trace = trace,
            Self::SlackReply(j) if j.trace.is_none() => j.trace = trace,
            Self::Github(j) if j.trace.is_none() => j.trace = trace,
            Self::Resume(j) if j.trace.is_none() => j.trace = trace,
            Self::Email(j) if j.trace.is_none() => j.trace = trace,
            _ => {}
        }
        self
    }

    /// The approval's expiry, when the job carries it (every notification does).
    pub fn expires_at(&self) -> Option<EpochSeconds> {
        match self {
            Self::Notify(j) => Some(j.expires_at),
            Self::Execute(j) => j.expires_at,
            Self::Callback(j) => j.expires_at,
            Self::Slack(j) => Some(j.message.expires_at),
            Self::SlackReply(j) => j.expires_at,
            Self::Github(j) => j.expires_at,
            Self::Resume(j) => j.expires_at,
            Self::Email(j) => Some(j.message.expires_at),
        }
    }

    pub fn generation(&self) -> u32 {
        match self {
            Self::Notify(_)
            | Self::Callback(_)
            | Self::Slack(_)
            | Self::SlackReply(_)
            | Self::Github(_)
            | Self::Email(_) => 0,
            Self::Execute(j) => j.generation,
            Self::Resume(j) => j.generation,
        }
    }
}

fn state(call: &GithubCall) -> &'static str {
    if call.approved {
        "approved"
    } else {
        "rejected"
    }
}

#[cfg(test)]
#[path = "job_tests.rs"]
mod tests;
