//! What every channel that creates an approval does with the deployment's decision: a refusal
//! as its problem, and the warning of a tenant with no policy (docs/POLICY.md).

use crate::App;
use crate::domain::TenantId;
use crate::domain::approval_policy::GovernRefusal;

use super::ApiError;

/// An enforced policy's refusal as the API answers it (nothing was written).
pub(super) fn govern_refusal(refusal: GovernRefusal) -> ApiError {
    match refusal {
        GovernRefusal::Forbidden { policies } if policies.is_empty() => ApiError::PolicyForbidden {
            detail: "no approval policy permits this request (Cedar's default deny)".to_owned(),
            policies,
        },
        GovernRefusal::Forbidden { policies } => ApiError::PolicyForbidden {
            detail: format!("forbidden by approval policy {}", policies.join(", ")),
            policies,
        },
        GovernRefusal::Error { errors } => ApiError::PolicyError { errors },
        GovernRefusal::Unsatisfiable(errors) => ApiError::PolicyUnsatisfiable { errors },
        GovernRefusal::Invalid(errors) => ApiError::invalid(errors),
    }
}

/// A create of a tenant with no approval policy: its requesters choose their approvers, as
/// before v7 — said once per instance, in the log.
pub(super) fn unpoliced(app: &App, tenant: &TenantId) {
    if app.policies.first_without_policy(tenant) {
        tracing::warn!(
            tenant = tenant.as_str(),
            "tenant {} has no approval policy: requesters choose their approvers",
            tenant.as_str()
        );
    }
}
