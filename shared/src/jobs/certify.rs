//! The certificate of an approved passkey-only approval, issued by the dispatch function when
//! the stream shows it approved: made of the approval, signed by Countersign's KMS key, and
//! stored on the approval once, before its execute job is made (the job carries it). A batch
//! delivered again issues it again and keeps the one stored first.

use super::dispatch::DispatchError;
use crate::App;
use crate::domain::passkey::certificate::detached;
use crate::domain::passkey::certificate_of;
use crate::domain::{Approval, CertificateSeal, Status};

/// Whether `new` is approved, passkey-only, and not yet certified.
pub(super) fn needs_certificate(new: &Approval) -> bool {
    new.assurance.is_some() && new.status == Status::Approved && new.certificate.is_none()
}

/// `approval` with its certificate's seal (issued now, or the one stored before).
pub(super) async fn certify(app: &App, mut approval: Approval) -> Result<Approval, DispatchError> {
    let now = app.clock.now();
    let Some(certificate) = certificate_of(&approval, now) else {
        // A vote without its evidence: nothing a verifier could accept. Its execution is left
        // without a certificate (a target that checks refuses it) and the reason is logged.
        tracing::error!(approval = %approval.id, "a passkey-only approval approved by a vote without passkey evidence: no certificate");
        return Ok(approval);
    };
    let key = app
        .certificate_key()
        .ok_or_else(|| DispatchError::Certificate("no CERTIFICATE_KEY_ARN".to_owned()))?;
    let (header, input) = certificate.to_sign(key.kid());
    let signature = key
        .sign(input.as_bytes())
        .await
        .map_err(|e| DispatchError::Certificate(e.to_string()))?;
    let seal = CertificateSeal {
        issued_at: now,
        signature: detached(&header, &signature),
    };
    let stored = app
        .store
        .seal_certificate(&approval.tenant, &approval.id, &seal)
        .await?;
    approval.certificate = match stored {
        Some(stored) => stored.certificate,
        None => {
            return Err(DispatchError::Certificate(format!(
                "approval {} is gone",
                approval.id
            )));
        }
    };
    Ok(approval)
}
