//! A notify job as a message body holds it: as today's jobs write it (every approver in one), or
//! as jobs queued before v5 did (one per approver, `approver`), which a deploy may find queued.

use serde::Deserialize;
use serde_json::Value;

use super::job::{NotifyJob, NotifyReason};
use crate::domain::{ApprovalId, Approver, EpochSeconds, TenantId};

/// A notify job as a message body holds it: as [`NotifyJob`] writes it, or (queued before v5)
/// one job per approver (`approver`).
#[derive(Deserialize)]
pub(super) struct NotifyJobBody {
    approval_id: ApprovalId,
    tenant: TenantId,
    #[serde(default)]
    approvers: Option<Vec<Approver>>,
    #[serde(default)]
    approver: Option<Approver>,
    #[serde(default)]
    per_approver: bool,
    action: Value,
    context: Value,
    expires_at: EpochSeconds,
    #[serde(default)]
    after: String,
    #[serde(default)]
    trace: Option<String>,
    #[serde(default, flatten)]
    reason: Option<NotifyReason>,
    #[serde(default)]
    in_place_of: Option<Approver>,
}

impl TryFrom<NotifyJobBody> for NotifyJob {
    type Error = &'static str;

    fn try_from(body: NotifyJobBody) -> Result<Self, Self::Error> {
        let per_approver = body.per_approver || body.approver.is_some();
        let approvers = match (body.approvers, body.approver) {
            (Some(approvers), _) if !approvers.is_empty() => approvers,
            (_, Some(approver)) => vec![approver],
            _ => return Err("a notify job names its approvers"),
        };
        Ok(Self {
            approval_id: body.approval_id,
            tenant: body.tenant,
            approvers,
            per_approver,
            action: body.action,
            context: body.context,
            expires_at: body.expires_at,
            after: body.after,
            trace: body.trace,
            reason: body.reason,
            in_place_of: body.in_place_of,
        })
    }
}
