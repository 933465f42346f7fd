//! A passkey vote on the review page (docs/VERIFY.md): the page asks the browser for an
//! assertion over the vote's statement (its challenge the statement's SHA-256), and the form
//! post is checked here — the nonce (this session, this approval, the action as the page read
//! it, 5 minutes), the credential (the voter's, registered now), then the assertion (signature,
//! origin, relying party, user verification) — before the vote's one conditional write.

use crate::App;
use crate::domain::passkey::{Assertion, Expected, Statement, b64, payload_sha256, unb64};
use crate::domain::{Approval, ApprovalId, Approver, Outcome, PasskeyEvidence, TenantId};
use crate::http::passkeys::relying_party;
use crate::session::{Session, SessionKeys};
use crate::store::StoreError;

/// What the page's passkey form carries: the statement's parts the server does not hold
/// without reading the approval again, bound by the nonce's MAC.
pub(super) struct PasskeyAsk {
    pub nonce: String,
    pub action_type: String,
    pub payload_sha256: String,
    pub policy_version: Option<u32>,
    /// The SHA-256 of the approve and of the reject statement, base64url.
    pub approve_challenge: String,
    pub reject_challenge: String,
    pub rp_id: String,
    /// The voter's registered credentials (none: they add one first).
    pub credentials: Vec<String>,
    pub passkeys_page: String,
}

/// What the nonce binds besides the session: the approval and the action the page showed.
fn binding(id: &ApprovalId, action_type: &str, digest: &str, version: Option<u32>) -> String {
    let version = version.map_or_else(String::new, |v| v.to_string());
    format!("{id}|{action_type}|{digest}|{version}")
}

fn keys(app: &App) -> Option<SessionKeys> {
    app.secrets()
        .decision_token_secret
        .as_ref()
        .map(SessionKeys::new)
}

fn vote_word(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Approved => "approve",
        Outcome::Rejected => "reject",
    }
}

/// The statement of `voter`'s vote in `place` (their own when `by` is `None`).
#[allow(clippy::too_many_arguments)]
fn statement(
    tenant: &TenantId,
    id: &ApprovalId,
    (action_type, digest, version): (&str, &str, Option<u32>),
    outcome: Outcome,
    place: &Approver,
    by: Option<&Approver>,
    nonce: &str,
) -> Statement {
    Statement {
        tenant: tenant.as_str().to_owned(),
        approval_id: id.as_str().to_owned(),
        action_type: action_type.to_owned(),
        payload_sha256: digest.to_owned(),
        vote: vote_word(outcome).to_owned(),
        approver: place.as_str().to_owned(),
        by: by.map(|b| b.as_str().to_owned()),
        policy_version: version,
        nonce: nonce.to_owned(),
    }
}

/// The page's ask for `session`'s person, voting in `place` (their own, or a delegator's).
/// `None`: this deployment has no relying party (no `PUBLIC_BASE_URL`) or no session keys.
pub(super) async fn ask(
    app: &App,
    approval: &Approval,
    session: &Session,
    place: Option<&Approver>,
) -> Result<Option<PasskeyAsk>, StoreError> {
    let (Some((rp_id, _)), Some(keys)) = (relying_party(app), keys(app)) else {
        return Ok(None);
    };
    let digest = payload_sha256(&approval.payload);
    let version = approval.policy_source.as_ref().map(|s| s.version);
    let action = (approval.action_type.as_str(), digest.as_str(), version);
    let now = app.clock.now();
    let nonce = keys.vote_nonce(
        session,
        &binding(&approval.id, &approval.action_type, &digest, version),
        now,
    );
    let (place, by) = match place {
        Some(place) => (place, Some(&session.identity)),
        None => (&session.identity, None),
    };
    let challenge = |outcome| {
        b64(&statement(
            &approval.tenant,
            &approval.id,
            action,
            outcome,
            place,
            by,
            &nonce,
        )
        .challenge())
    };
    let credentials = app
        .store
        .passkeys(&approval.tenant, &session.identity)
        .await?
        .into_iter()
        .map(|p| p.credential_id)
        .collect();
    Ok(Some(PasskeyAsk {
        approve_challenge: challenge(Outcome::Approved),
        reject_challenge: challenge(Outcome::Rejected),
        nonce,
        action_type: approval.action_type.clone(),
        payload_sha256: digest,
        policy_version: version,
        rp_id,
        credentials,
        passkeys_page: format!(
            "{}/auth/{}/passkeys",
            super::sign_in::base_path(app),
            approval.tenant
        ),
    }))
}

/// Why a passkey vote was not recorded (nothing was).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum PasskeyRefusal {
    /// The nonce is not this session's for this approval and action, or is older than 5 min.
    Nonce,
    /// The credential is not one of the voter's now (never registered, or removed).
    Credential,
    /// The assertion does not verify: why.
    Assertion(String),
}

/// The form's passkey fields.
pub(super) struct PasskeyFields<'a> {
    pub nonce: &'a str,
    pub action_type: &'a str,
    pub payload_sha256: &'a str,
    pub policy_version: Option<&'a str>,
    pub credential_id: &'a str,
    pub authenticator_data: &'a str,
    pub client_data_json: &'a str,
    pub signature: &'a str,
}

/// The evidence of a passkey vote whose every check holds: `session`'s person voting `outcome`
/// in `place` (as its delegate when `by`).
pub(super) async fn verified(
    app: &App,
    (tenant, id): (&TenantId, &ApprovalId),
    fields: &PasskeyFields<'_>,
    session: &Session,
    (outcome, place, by): (Outcome, &Approver, Option<&Approver>),
) -> Result<Result<Box<PasskeyEvidence>, PasskeyRefusal>, StoreError> {
    let (Some((rp_id, origin)), Some(keys)) = (relying_party(app), keys(app)) else {
        return Ok(Err(PasskeyRefusal::Assertion(
            "this deployment has no relying party (PUBLIC_BASE_URL)".to_owned(),
        )));
    };
    let version = match fields.policy_version {
        None | Some("") => None,
        Some(raw) => match raw.parse::<u32>() {
            Ok(v) => Some(v),
            Err(_) => return Ok(Err(PasskeyRefusal::Nonce)),
        },
    };
    let bound = binding(id, fields.action_type, fields.payload_sha256, version);
    if !keys.vote_nonce_holds(session, &bound, fields.nonce, app.clock.now()) {
        return Ok(Err(PasskeyRefusal::Nonce));
    }
    let voter = by.unwrap_or(place);
    let Some(credential) = app
        .store
        .passkeys(tenant, voter)
        .await?
        .into_iter()
        .find(|p| p.credential_id == fields.credential_id)
    else {
        return Ok(Err(PasskeyRefusal::Credential));
    };
    let malformed = || PasskeyRefusal::Assertion("the assertion is not base64url".to_owned());
    let decode = |text: &str| unb64(text).ok_or_else(malformed);
    let assertion = match (
        decode(fields.credential_id),
        decode(fields.authenticator_data),
        decode(fields.client_data_json),
        decode(fields.signature),
    ) {
        (Ok(credential_id), Ok(authenticator_data), Ok(client_data_json), Ok(signature)) => {
            Assertion {
                credential_id,
                authenticator_data,
                client_data_json,
                signature,
            }
        }
        _ => return Ok(Err(malformed())),
    };
    let statement = statement(
        tenant,
        id,
        (fields.action_type, fields.payload_sha256, version),
        outcome,
        place,
        by,
        fields.nonce,
    );
    let Some(key) = credential.public_key.verifying_key() else {
        return Ok(Err(PasskeyRefusal::Credential));
    };
    let checked = assertion.verify(
        &key,
        Expected {
            challenge: &statement.challenge(),
            origin: Some(&origin),
            rp_id: Some(&rp_id),
        },
    );
    if let Err(why) = checked {
        return Ok(Err(PasskeyRefusal::Assertion(why.to_string())));
    }
    Ok(Ok(Box::new(PasskeyEvidence {
        statement: statement.canonical(),
        credential_id: credential.credential_id,
        authenticator_data: b64(&assertion.authenticator_data),
        client_data_json: b64(&assertion.client_data_json),
        signature: b64(&assertion.signature),
        public_key: credential.public_key,
        iss: credential.iss,
        sub: credential.sub,
        registered_at: credential.registered_at,
    })))
}
