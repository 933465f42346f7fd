//! An approval as the deployment's policy made it at its create (pure): its approvers and
//! quorum, the version that chose them, or — with no person required — approved by the policy
//! in the create's own write.

use super::govern::Governance;
use crate::domain::{
    Approval, ApprovalId, Approver, Channel, Decision, EpochSeconds, ExecutionStatus, Outcome,
    Status,
};

/// The approver an auto-approval's decision names: the policy that decided, by its `@id`.
pub fn policy_approver(id: &str) -> Approver {
    // An `@id` an identity cannot spell (a format character, say) is named by the word alone;
    // the decision's actor still names it whole.
    Approver::parse(&format!("policy:{id}"))
        .or_else(|_| Approver::parse("policy"))
        .expect("\"policy\" is an identity")
}

impl Approval {
    /// This approval (made of the requester's create) as `governance` decides it at `now`.
    /// Its id is made again when its number of rules changes (the id hints at it).
    pub fn governed(mut self, governance: Governance, now: EpochSeconds) -> Self {
        match governance {
            Governance::Unpoliced => {}
            Governance::Logged { evaluated, .. } => self.policy_evaluated = Some(evaluated),
            Governance::Required {
                approvers,
                policy,
                source,
                assurance,
            } => {
                let group_rules = policy.rules.iter().any(|r| r.group.is_some());
                self.id =
                    ApprovalId::generate_governed(policy.rules.len(), self.executes, group_rules);
                self.approvers = approvers;
                self.policy = Some(policy);
                self.policy_source = Some(source);
                // The create's own ask only adds to the policy's.
                self.assurance = assurance.or(self.assurance);
            }
            Governance::Auto { source } => {
                let decider = source.policies.first().cloned().unwrap_or_default();
                self.id = ApprovalId::generate_hinting(0, self.executes);
                self.approvers = Vec::new();
                self.policy = None;
                // Nobody votes: there is no signature to ask for.
                self.assurance = None;
                self.status = Status::Approved;
                self.decision = Some(Decision {
                    outcome: Outcome::Approved,
                    approver: policy_approver(&decider),
                    decided_at: now,
                    channel: Channel::Policy,
                    comment: None,
                    webhook_event_id: None,
                    key_id: None,
                    signed_in: None,
                    by: None,
                    delegation_set_by: None,
                    passkey: None,
                });
                // Queued for the executor, or — approval-only — waiting for its caller's claim,
                // as any approving vote leaves it.
                if self.executes {
                    self.execution.status = ExecutionStatus::Queued;
                }
                self.execution.updated_at = now;
                self.stall = Default::default();
                self.policy_source = Some(source);
            }
        }
        self
    }

    /// The policy that approved it (its `@id`) and the version, when the policy did.
    pub fn approved_by_policy(&self) -> Option<(&str, u32)> {
        let decision = self.decision.as_ref()?;
        let source = self.policy_source.as_ref()?;
        (decision.channel == Channel::Policy).then(|| {
            (
                source.policies.first().map_or("", String::as_str),
                source.version,
            )
        })
    }
}
