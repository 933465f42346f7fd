//! What a GitHub-opened approval gates (docs/GITHUB.md), and what GitHub is
//! told when it ends — pure: the GitHub App's calls are in the `github` module.

use super::{Approval, Channel, EpochSeconds, Outcome, Status, rfc3339};
use super::{Approver, Decision};

/// The built-in action type of a deployment waiting on an environment.
pub const GITHUB_DEPLOYMENT: &str = "github_deployment";

/// The most deliveries an approval names (the one that opened it and those that joined it): a
/// matrix of jobs is one decision, and what grows on an item stays bounded.
pub const MAX_DELIVERIES: usize = 100;

/// A job waiting on an environment, as the event that opened the round told it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GithubGate {
    /// The App's installation the answer is sent as.
    pub installation_id: u64,
    /// `owner/name`.
    pub repository: String,
    pub repository_id: u64,
    pub run_id: u64,
    pub environment: String,
    /// The event's `deployment_callback_url`: where the answer goes (checked against the
    /// tenant's `api_url` when the event came and again when the answer is sent).
    pub callback_url: String,
    pub sender_login: String,
    pub sender_id: u64,
    /// The approver `users` maps the sender to: the requester, for separation of duties.
    pub requester: Option<Approver>,
    /// The senders of the deliveries that joined the round (their mapped approvers, or
    /// `github:<login>`): each asked too, so none of them approves it.
    pub joined_requesters: Vec<Approver>,
    /// The deliveries that opened the round (first) and joined it.
    pub deliveries: Vec<GithubDelivery>,
}

/// A delivery of GitHub's (`X-GitHub-Delivery`: the same on each redelivery) and when it came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GithubDelivery {
    pub id: String,
    pub at: EpochSeconds,
}

/// What GitHub is told: `state` and `comment` of the deployment protection rule's review.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GithubAnswer {
    pub approved: bool,
    pub comment: String,
}

impl GithubAnswer {
    pub fn state(&self) -> &'static str {
        if self.approved {
            "approved"
        } else {
            "rejected"
        }
    }
}

impl Approval {
    /// Whether GitHub opened it: a job waiting on an environment.
    pub fn is_github(&self) -> bool {
        self.github.is_some()
    }

    /// What GitHub is told once the approval has ended (read at `now`): approved → approved;
    /// rejected, expired or cancelled by a person → rejected, the comment naming the approval,
    /// the outcome and who voted. `None` while it is pending, for an approval GitHub did not
    /// open, and when the run's own end cancelled it (nothing is waiting any more).
    pub fn github_answer(&self, now: EpochSeconds) -> Option<GithubAnswer> {
        self.github.as_ref()?;
        let votes = self.vote_summary();
        let (approved, what) = match self.status_at(now) {
            Status::Pending => return None,
            Status::Approved => match self.approved_by_policy() {
                Some((policy, version)) => (
                    true,
                    format!("approved by approval policy {policy} (version {version})"),
                ),
                None => (true, format!("approved{votes}")),
            },
            Status::Rejected => {
                let why = self
                    .decision
                    .as_ref()
                    .map(|d| decided_by(d, &votes))
                    .unwrap_or_else(|| format!("rejected{votes}"));
                (false, why)
            }
            Status::Expired => (
                false,
                format!(
                    "expired at {} without a decision{votes}",
                    rfc3339(self.expires_at)
                ),
            ),
            Status::Cancelled => {
                let cancellation = self.cancellation.as_ref()?;
                if cancellation.channel == Some(Channel::Github) {
                    return None;
                }
                let reason = cancellation
                    .reason
                    .as_deref()
                    .map(|r| format!(": {}", one_line(r)))
                    .unwrap_or_default();
                (
                    false,
                    format!("cancelled by {}{reason}", cancellation.by.as_str()),
                )
            }
        };
        Some(GithubAnswer {
            approved,
            comment: cut(&format!("Countersign approval {}: {what}", self.id)),
        })
    }

    /// `" (approved by a, b; rejected by c)"`, or nothing without votes.
    fn vote_summary(&self) -> String {
        let named = |outcome: Outcome| {
            self.recorded_votes()
                .iter()
                .filter(|v| v.outcome == outcome)
                .map(|v| v.approver.as_str())
                .collect::<Vec<_>>()
        };
        let mut parts = Vec::new();
        for (outcome, verb) in [
            (Outcome::Approved, "approved"),
            (Outcome::Rejected, "rejected"),
        ] {
            let who = named(outcome);
            if !who.is_empty() {
                parts.push(format!("{verb} by {}", who.join(", ")));
            }
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!(" ({})", parts.join("; "))
        }
    }
}

/// A rejection, by whom, and why if they said.
fn decided_by(decision: &Decision, votes: &str) -> String {
    let comment = decision
        .comment
        .as_deref()
        .map(|c| format!(": {}", one_line(c)))
        .unwrap_or_default();
    match decision.channel {
        // Countersign's own refusal (an environment without configuration, a policy only the
        // requester could meet): its reason is the comment.
        Channel::Github => format!("refused{comment}"),
        _ => format!("rejected{votes}{comment}"),
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// GitHub shows a review's comment; keep it to a readable length.
fn cut(text: &str) -> String {
    const MAX_CHARS: usize = 1000;
    if text.chars().count() <= MAX_CHARS {
        text.to_owned()
    } else {
        let mut cut: String = text.chars().take(MAX_CHARS - 1).collect();
        cut.push('…');
        cut
    }
}
