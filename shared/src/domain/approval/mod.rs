//! The approval and its state machine: pending → approved | rejected, or expired by time.

use serde::Serialize;
use serde_json::{Map, Value};

mod view;

pub use view::ApprovalView;

use super::{ApprovalId, Approver, EpochSeconds, IdempotencyKey, KeyId, Policy, TenantId, rfc3339};

/// The status as stored. `Expired` is never stored: a pending approval past its expiry reads as
/// expired (see [`Approval::status_at`]), so expiry needs no writer and no timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pending,
    Approved,
    Rejected,
    Expired,
    /// Withdrawn by its requester or an operator before a decision: terminal, never executed.
    Cancelled,
}

impl Status {
    /// Every status, as stored.
    pub const ALL: [Status; 5] = [
        Self::Pending,
        Self::Approved,
        Self::Rejected,
        Self::Expired,
        Self::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Rejected => "rejected",
            Self::Expired => "expired",
            Self::Cancelled => "cancelled",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "pending" => Some(Self::Pending),
            "approved" => Some(Self::Approved),
            "rejected" => Some(Self::Rejected),
            "expired" => Some(Self::Expired),
            "cancelled" => Some(Self::Cancelled),
            _ => None,
        }
    }
}

/// A terminal decision's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Approved,
    Rejected,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approved => "approved",
            Self::Rejected => "rejected",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "approved" => Some(Self::Approved),
            "rejected" => Some(Self::Rejected),
            _ => None,
        }
    }

    pub fn status(self) -> Status {
        match self {
            Self::Approved => Status::Approved,
            Self::Rejected => Status::Rejected,
        }
    }
}

/// Through which channel a decision arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    Api,
    ReviewPage,
    Webhook,
    /// A button clicked in the tenant's Slack message.
    Slack,
    /// GitHub: an event of the tenant's GitHub App (an approval it opened, a round it joined,
    /// a run whose end cancelled it), or Countersign's own refusal of one.
    Github,
    /// The deployment's approval policy, which approved the approval at its create
    /// (`@require("none")`): no person.
    Policy,
}

impl Channel {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Api => "api",
            Self::ReviewPage => "review_page",
            Self::Webhook => "webhook",
            Self::Slack => "slack",
            Self::Github => "github",
            Self::Policy => "policy",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "api" => Some(Self::Api),
            "review_page" => Some(Self::ReviewPage),
            "webhook" => Some(Self::Webhook),
            "slack" => Some(Self::Slack),
            "github" => Some(Self::Github),
            "policy" => Some(Self::Policy),
            _ => None,
        }
    }
}

/// Who withdrew a pending approval, when, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cancellation {
    pub by: Approver,
    pub at: EpochSeconds,
    pub reason: Option<String>,
    /// `None`: a person, through the API. `Some(Github)`: the workflow run ended (nothing is
    /// waiting at GitHub any more, so nothing is told).
    pub channel: Option<Channel>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub outcome: Outcome,
    pub approver: Approver,
    pub decided_at: EpochSeconds,
    pub channel: Channel,
    pub comment: Option<String>,
    pub webhook_event_id: Option<String>,
    /// The table key that sent the vote (`None`: another channel, or an `API_KEYS` key).
    pub key_id: Option<KeyId>,
    /// Who the identity provider vouched for, when the vote was cast after sign-in.
    pub signed_in: Option<SignIn>,
    /// The delegate who cast it in `approver`'s place (`None`: the approver's own vote).
    pub by: Option<Approver>,
    /// Who set the delegation `by` voted under (the delegator, or an operator): the trail's
    /// actor names them beside the delegate. Not shown in the approval.
    pub delegation_set_by: Option<Approver>,
    /// The passkey signature a vote on a passkey-only approval carries (docs/VERIFY.md).
    pub passkey: Option<Box<PasskeyEvidence>>,
}

/// A vote's passkey assertion over its statement, as verified when it was cast: what the
/// certificate carries of it (binary fields base64url).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PasskeyEvidence {
    /// The statement's RFC 8785 form (its nonce included): SHA-256 of it is the challenge.
    pub statement: String,
    pub credential_id: String,
    pub authenticator_data: String,
    pub client_data_json: String,
    pub signature: String,
    pub public_key: crate::domain::passkey::Jwk,
    /// Who registered the credential, as their provider vouched for them then.
    pub iss: String,
    pub sub: String,
    pub registered_at: EpochSeconds,
}

/// A person as their OpenID Provider vouched for them at sign-in: the issuer, their subject
/// there (stable, unlike an email), and when they last authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignIn {
    pub issuer: String,
    pub sub: String,
    pub auth_time: Option<EpochSeconds>,
}

impl SignIn {
    /// What a vote's item may grow by. OpenID Connect allows a `sub` of 255 ASCII characters;
    /// providers' are far shorter (Okta, Google, Entra ID, Cognito: 20–45), and a vote after
    /// sign-in must not outgrow a webhook's (the approval's size budget counts the larger), so
    /// a longer one is refused at sign-in, as `OIDC` refuses a longer issuer at start.
    pub const MAX_SUB_BYTES: usize = 128;
    pub const MAX_ISSUER_BYTES: usize = 128;
}

/// Execution status is separate from approval status: approved means a human authorised the
/// action, not that it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionStatus {
    NotStarted,
    Queued,
    Running,
    Succeeded,
    Failed,
    NeedsReconciliation,
}

impl ExecutionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotStarted => "not_started",
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::NeedsReconciliation => "needs_reconciliation",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "not_started" => Some(Self::NotStarted),
            "queued" => Some(Self::Queued),
            "running" => Some(Self::Running),
            "succeeded" => Some(Self::Succeeded),
            "failed" => Some(Self::Failed),
            "needs_reconciliation" => Some(Self::NeedsReconciliation),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Execution {
    pub status: ExecutionStatus,
    pub attempts: u32,
    pub last_error: Option<String>,
    pub updated_at: EpochSeconds,
    /// How many times an operator has resumed the execution: each resume is a new execute job
    /// (identity `{approval_id}#execute#{generation}`).
    pub generation: u32,
    /// What an operator recorded when resolving a `needs_reconciliation` execution, or what
    /// the claimer of an approval-only action reported with its outcome.
    pub note: Option<String>,
    /// Approval-only action types: the `Idempotency-Key` of the one request that claimed the
    /// execution (its report must carry the same key).
    pub claimed_by: Option<String>,
    /// ... and the principal of the key that claimed it (the trail's actor). Not shown.
    pub claimant: Option<Approver>,
    /// When the claimer reported the outcome (the trail's sign that the claimer, not an
    /// operator or the reconciler, ended it). Not shown.
    pub reported_at: Option<EpochSeconds>,
    /// The identity of the operator request that made the latest resume (its `Idempotency-Key`,
    /// or a token of its own): a repeat of that request recognises its own change. Not shown.
    pub retry_key: Option<String>,
    /// Every operator request that resumed it, oldest first. Not shown.
    pub retry_keys: Vec<String>,
    /// What workers learnt after their attempt was taken over (their lease ended mid-call): the
    /// target's answer they could no longer record, kept for whoever reconciles the execution.
    pub late_reports: Vec<String>,
    /// How many times the reconciler re-queued this generation's execute job (one found stuck
    /// queued or running, its job lost). Not shown.
    pub requeues: u32,
    /// Every question put to the target's status URL about an unknown outcome, and its answer.
    pub status_checks: Vec<StatusCheck>,
}

/// One status query: when, what the target answered (`succeeded`, `failed`, `not_found`,
/// `pending`, or `unknown` when it could not tell) and the detail (its reason, or why not).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatusCheck {
    #[serde(serialize_with = "serialize_rfc3339")]
    pub at: EpochSeconds,
    pub answer: String,
    pub detail: Option<String>,
}

fn serialize_rfc3339<S: serde::Serializer>(at: &EpochSeconds, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&rfc3339(*at))
}

impl Execution {
    pub fn not_started(now: EpochSeconds) -> Self {
        Self {
            status: ExecutionStatus::NotStarted,
            attempts: 0,
            last_error: None,
            updated_at: now,
            generation: 0,
            note: None,
            claimed_by: None,
            claimant: None,
            reported_at: None,
            retry_key: None,
            retry_keys: Vec::new(),
            late_reports: Vec::new(),
            requeues: 0,
            status_checks: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Approval {
    pub tenant: TenantId,
    pub id: ApprovalId,
    /// The stored status; read it through [`Approval::status_at`].
    pub status: Status,
    /// The principal of the key that created it (`None`: created before principals existed).
    pub requested_by: Option<Approver>,
    /// The table key that created it (`None`: an `API_KEYS` key, or created before table keys).
    pub requested_by_key_id: Option<KeyId>,
    pub action_type: String,
    /// Whether Countersign executes the approved action (false: an approval-only type, whose
    /// caller claims the approved execution and performs the action itself). Fixed at create.
    pub executes: bool,
    pub payload: Map<String, Value>,
    pub approvers: Vec<Approver>,
    pub context: Map<String, Value>,
    pub idempotency_key: IdempotencyKey,
    /// Whether its execution's downstream key names the approval
    /// (`{tenant}:{create key}:{approval id}`): true for every approval made since that key
    /// was introduced. One made before keeps `{tenant}:{create key}` for good — its execution
    /// may already have called a target with that key, which must see it again on every
    /// attempt, retry and status query.
    pub execute_key_names_approval: bool,
    pub created_at: EpochSeconds,
    pub expires_at: EpochSeconds,
    /// `None`: one approving vote by any approver decides (v1).
    pub policy: Option<Policy>,
    /// Every vote recorded, in the order the store applied them (a vote after the outcome is
    /// not recorded). An approval decided before votes existed has none: its decision is its
    /// one vote.
    pub votes: Vec<Decision>,
    /// The outcome and the vote that decided it.
    pub decision: Option<Decision>,
    pub cancellation: Option<Cancellation>,
    pub execution: Execution,
    /// Where its Slack message is, once posted (tenants with Slack only).
    pub slack: Option<SlackMessage>,
    /// The trace its create request belonged to (`observe::TraceContext::stored`), continued
    /// by every call made for it.
    pub trace: Option<String>,
    /// The job waiting on an environment, for an approval a GitHub event opened.
    pub github: Option<super::GithubGate>,
    /// Its reminders and escalation steps, and how far they went.
    pub stall: super::stall::Stall,
    /// The AWS workflow waiting on it, told once it ends.
    pub resume: Option<super::resume::Resume>,
    /// The deployment's approval policy that decided its approvers (or approved it), by
    /// version; `None` when no policy was enforced on it.
    pub policy_source: Option<super::approval_policy::PolicySource>,
    /// Under a policy in `log_only`: what enforcement would have done (the trail's
    /// `policy.evaluated`).
    pub policy_evaluated: Option<Value>,
    /// `passkey`: every vote must be a passkey signature over the exact action.
    pub assurance: Option<super::approval_policy::Assurance>,
    /// The longest comment (UTF-8 bytes) a vote on it may carry, when its many approvers leave
    /// less than the usual room on its item (`None`: the usual limit).
    pub comment_cap: Option<u32>,
    /// A passkey-only approval's certificate, once issued: when, and Countersign's signature
    /// (the rest of it is this approval's, [`crate::domain::passkey::certificate_of`]).
    pub certificate: Option<CertificateSeal>,
}

/// Countersign's signature of an approval's certificate, as stored on the approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateSeal {
    pub issued_at: EpochSeconds,
    /// The detached compact JWS (`header..signature`).
    pub signature: String,
}

/// A message posted to Slack: its channel and timestamp (Slack's id of a message).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct SlackMessage {
    pub channel: String,
    pub ts: String,
}

impl Approval {
    /// The status a reader sees at `now`: pending turns into expired at `expires_at`.
    pub fn status_at(&self, now: EpochSeconds) -> Status {
        match self.status {
            Status::Pending if self.is_past_expiry(now) => Status::Expired,
            status => status,
        }
    }

    /// The same boundary as the store's `only_if_pending` condition (`expires_at > :now`).
    pub fn is_past_expiry(&self, now: EpochSeconds) -> bool {
        now >= self.expires_at
    }

    /// Who asked, for separation of duties: the principal that created it — or, for a GitHub
    /// deployment, the approver its sender is mapped to (`requested_by` then names the GitHub
    /// user).
    pub fn requester(&self) -> Option<&Approver> {
        self.github
            .as_ref()
            .and_then(|g| g.requester.as_ref())
            .or(self.requested_by.as_ref())
    }

    /// Whether `who` asked for it (by identity): its requester, or the sender of a GitHub
    /// delivery that joined its round.
    pub fn is_requester(&self, who: &Approver) -> bool {
        let identity = who.identity();
        self.requester().is_some_and(|r| r.identity() == identity)
            || self
                .github
                .as_ref()
                .is_some_and(|g| g.joined_requesters.iter().any(|r| r.identity() == identity))
    }

    /// Whether `approver` is listed, by identity (not by spelling).
    pub fn is_approver(&self, approver: &Approver) -> bool {
        self.listed_as(approver).is_some()
    }

    /// How the approval lists `approver` (the one listed with its identity).
    pub fn listed_as(&self, approver: &Approver) -> Option<&Approver> {
        let identity = approver.identity();
        self.approvers.iter().find(|a| a.identity() == identity)
    }

    /// The votes so far; an approval decided before votes were recorded shows its decision.
    pub fn recorded_votes(&self) -> &[Decision] {
        match (&self.votes[..], &self.decision) {
            ([], Some(decision)) => std::slice::from_ref(decision),
            (votes, _) => votes,
        }
    }

    /// The vote `approver` cast, if any (one person, one vote: compared by identity).
    pub fn vote_of(&self, approver: &Approver) -> Option<&Decision> {
        let identity = approver.identity();
        self.recorded_votes()
            .iter()
            .find(|v| v.approver.identity() == identity)
    }

    /// The one vote `voter` cast, for themselves or in someone's place (by identity).
    pub fn vote_cast_by(&self, voter: &Approver) -> Option<&Decision> {
        let identity = voter.identity();
        self.recorded_votes()
            .iter()
            .find(|v| v.by.as_ref().unwrap_or(&v.approver).identity() == identity)
    }

    /// The approval as a vote the store applied left it, from the approval as it was read just
    /// before: the vote recorded (`listed`: kept in the votes, which a single decision without
    /// a policy is not) and, when it `decides`, the outcome, the decision and the execution it
    /// queues (or leaves for its claim). What a vote's answer shows when its write (a
    /// transaction's) answers nothing of the item.
    pub fn with_vote(mut self, vote: &Decision, listed: bool, decides: bool) -> Self {
        if listed {
            self.votes.push(vote.clone());
        }
        if decides {
            self.status = vote.outcome.status();
            self.decision = Some(vote.clone());
            // An approving write queues the execution (an approval-only one waits for its
            // claim); a veto leaves it as it was.
            if vote.outcome == Outcome::Approved {
                if self.executes {
                    self.execution.status = ExecutionStatus::Queued;
                }
                self.execution.updated_at = vote.decided_at;
            }
        }
        self
    }

    /// A vote `person` took part in: in their own place, or cast by them in someone else's. The
    /// store adds both of a vote's people to `voters`, and a vote counts only while neither of
    /// its people is there: so a person who cast any vote, or whose place was filled, can take
    /// no part in another (whatever delegations say, cycles and chains included).
    pub fn involving(&self, person: &Approver) -> Option<&Decision> {
        self.vote_of(person).or_else(|| self.vote_cast_by(person))
    }

    /// Whether a vote by `voter` would complete this pending approval's quorum (never without a
    /// policy: there, the first write applies any approve, which completes it).
    pub fn completed_by(&self, voter: &Approver, outcome: Outcome) -> bool {
        self.policy.as_ref().is_some_and(|p| {
            p.effect(
                &self.approvals_per_rule(),
                voter,
                outcome == Outcome::Approved,
            ) == super::VoteEffect::Completes
        })
    }

    /// Each rule's approving votes so far (`[]` without a policy).
    pub fn approvals_per_rule(&self) -> Vec<u32> {
        let Some(policy) = &self.policy else {
            return Vec::new();
        };
        let approving: Vec<&Approver> = self
            .recorded_votes()
            .iter()
            .filter(|v| v.outcome == Outcome::Approved)
            .map(|v| &v.approver)
            .collect();
        policy
            .rules
            .iter()
            .map(|r| r.approvers.iter().filter(|a| approving.contains(a)).count() as u32)
            .collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn pending(expires_at: EpochSeconds) -> Approval {
        Approval {
            tenant: TenantId::parse("acme").unwrap(),
            id: ApprovalId::generate(),
            status: Status::Pending,
            requested_by: None,
            requested_by_key_id: None,
            action_type: "deploy".into(),
            executes: true,
            payload: Map::new(),
            approvers: vec![
                Approver::parse("alice").unwrap(),
                Approver::parse("bob").unwrap(),
            ],
            context: Map::new(),
            idempotency_key: IdempotencyKey::parse("k").unwrap(),
            execute_key_names_approval: true,
            created_at: 0,
            expires_at,
            policy: None,
            votes: Vec::new(),
            decision: None,
            cancellation: None,
            execution: Execution::not_started(0),
            slack: None,
            trace: None,
            github: None,
            stall: Default::default(),
            resume: None,
            policy_source: None,
            policy_evaluated: None,
            assurance: None,
            comment_cap: None,
            certificate: None,
        }
    }

    #[test]
    fn pending_reads_as_expired_from_its_expiry_on() {
        let approval = pending(100);
        assert_eq!(approval.status_at(99), Status::Pending);
        assert_eq!(approval.status_at(100), Status::Expired);
    }

    #[test]
    fn decided_approvals_never_expire() {
        let mut approval = pending(100);
        approval.status = Status::Approved;
        assert_eq!(approval.status_at(1_000), Status::Approved);
    }

    #[test]
    fn the_view_has_the_spec_shape() {
        let approval = pending(604_800);
        let json = serde_json::to_value(approval.view(0)).unwrap();
        assert_eq!(json["status"], "pending");
        assert_eq!(json["action"]["type"], "deploy");
        assert_eq!(json["created_at"], "1970-01-01T00:00:00Z");
        assert_eq!(json["expires_at"], "1970-01-08T00:00:00Z");
        assert_eq!(json["decision"], Value::Null);
        assert_eq!(json["execution"]["status"], "not_started");
        assert_eq!(json["execution"]["attempts"], 0);
    }
}
