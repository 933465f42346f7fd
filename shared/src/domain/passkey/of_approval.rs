//! The certificate of an approved passkey-only approval, made of the approval alone: the same
//! bytes whenever it is made again (its issue time and Countersign's signature are stored on the
//! approval), so the API, the claim and the execute call carry one certificate.

use serde_json::Value;

use super::certificate::{
    Certificate, CertificateVote, CertifiedAction, PolicyEvidence, RuleEvidence,
};
use super::statement::payload_sha256;
use crate::domain::{Approval, EpochSeconds, Outcome, Status, rfc3339};

/// The certificate `approval` yields, issued at `issued_at`, unsigned; `None` unless it is
/// passkey-only, approved, and every vote carries its passkey evidence.
pub fn certificate_of(approval: &Approval, issued_at: EpochSeconds) -> Option<Certificate> {
    approval.assurance?;
    if approval.status != Status::Approved {
        return None;
    }
    let decision = approval.decision.as_ref()?;
    let rules = match &approval.policy {
        Some(policy) => policy
            .rules
            .iter()
            .map(|rule| RuleEvidence {
                name: rule.name.clone(),
                group: rule.group.as_ref().map(|g| g.as_str().to_owned()),
                min_approvals: rule.min_approvals,
                approvers: rule
                    .approvers
                    .iter()
                    .map(|a| a.as_str().to_owned())
                    .collect(),
            })
            .collect(),
        // One approval of any listed approver.
        None => vec![RuleEvidence {
            name: "approvers".to_owned(),
            group: None,
            min_approvals: 1,
            approvers: approval
                .approvers
                .iter()
                .map(|a| a.as_str().to_owned())
                .collect(),
        }],
    };
    let votes = approval
        .recorded_votes()
        .iter()
        .filter(|v| v.outcome == Outcome::Approved)
        .map(|vote| {
            let evidence = vote.passkey.as_ref()?;
            Some(CertificateVote {
                statement: evidence.statement.clone(),
                credential_id: evidence.credential_id.clone(),
                authenticator_data: evidence.authenticator_data.clone(),
                client_data_json: evidence.client_data_json.clone(),
                signature: evidence.signature.clone(),
                public_key_jwk: evidence.public_key.clone(),
                identity: vote
                    .by
                    .as_ref()
                    .unwrap_or(&vote.approver)
                    .as_str()
                    .to_owned(),
                iss: evidence.iss.clone(),
                sub: evidence.sub.clone(),
                registered_at: rfc3339(evidence.registered_at),
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Certificate {
        v: 1,
        approval_id: approval.id.as_str().to_owned(),
        tenant: approval.tenant.as_str().to_owned(),
        requested_by: approval
            .requested_by
            .as_ref()
            .map(|r| r.as_str().to_owned()),
        action: CertifiedAction {
            kind: approval.action_type.clone(),
            payload: approval.payload.clone(),
        },
        payload_sha256: payload_sha256(&approval.payload),
        policy: PolicyEvidence {
            version: approval.policy_source.as_ref().map(|s| s.version),
            sha256: approval.policy_source.as_ref().map(|s| s.sha256.clone()),
            rules,
        },
        votes,
        decided_at: rfc3339(decision.decided_at),
        issued_at: rfc3339(issued_at),
        signature: String::new(),
    })
}

/// The approval's certificate as served: `None` until it is issued.
pub fn sealed_certificate(approval: &Approval) -> Option<Value> {
    let seal = approval.certificate.as_ref()?;
    let certificate = certificate_of(approval, seal.issued_at)?;
    let mut value = serde_json::to_value(&certificate).ok()?;
    value.as_object_mut()?.insert(
        "signature".to_owned(),
        Value::String(seal.signature.clone()),
    );
    Some(value)
}
