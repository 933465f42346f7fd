//! What a GitHub deployment's answer says and where it goes: read once from its approval.

use serde::{Deserialize, Serialize};

use crate::domain::{Approval, TenantId};
use crate::store::RoundKey;

/// What a GitHub deployment's answer says and where it goes (from the approval's gate): the
/// same on every attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GithubCall {
    pub installation_id: u64,
    /// `owner/name`.
    pub repository: String,
    pub repository_id: u64,
    pub run_id: u64,
    pub environment: String,
    pub callback_url: String,
    pub approved: bool,
    pub comment: String,
}

impl GithubCall {
    /// The answer of an approval GitHub opened, once it has ended (`None` otherwise, and when
    /// the run's own end cancelled it).
    pub fn of(approval: &Approval) -> Option<Self> {
        let gate = approval.github.as_ref()?;
        let answer = approval.github_answer(approval.created_at)?;
        Some(Self {
            installation_id: gate.installation_id,
            repository: gate.repository.clone(),
            repository_id: gate.repository_id,
            run_id: gate.run_id,
            environment: gate.environment.clone(),
            callback_url: gate.callback_url.clone(),
            approved: answer.approved,
            comment: answer.comment,
        })
    }

    /// The round it answers.
    pub fn round(&self, tenant: &TenantId) -> RoundKey {
        RoundKey {
            tenant: tenant.clone(),
            repository_id: self.repository_id,
            run_id: self.run_id,
            environment: self.environment.clone(),
        }
    }
}
