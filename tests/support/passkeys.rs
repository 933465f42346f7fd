//! Passkeys through the app's own pages, as a browser with an authenticator uses them: the
//! passkeys page's registration and the review page's passkey form, signed by a software
//! authenticator (real P-256 signatures, real WebAuthn bytes).

use countersign::domain::passkey::soft::SoftAuthenticator;
use countersign::domain::passkey::{Assertion, Statement, b64};
use serde_json::Value;

use crate::sign_in::{SignInStack, hidden};
use crate::{Reply, TENANT_A};

/// The value of the first attribute `name` on a page, unescaped.
pub fn attribute(html: &str, name: &str) -> Option<String> {
    let value = html.split(&format!("{name}=\"")).nth(1)?;
    Some(
        value[..value.find('"')?]
            .replace("&quot;", "\"")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&#39;", "'")
            .replace("&amp;", "&"),
    )
}

/// A software authenticator for this stack's relying party (`localhost`), from `seed`.
pub fn authenticator(s: &SignInStack, seed: u8) -> SoftAuthenticator {
    SoftAuthenticator::new(seed, "localhost", &s.origin())
}

pub fn passkeys_path() -> String {
    format!("/auth/{TENANT_A}/passkeys")
}

/// The passkeys page's registration form as `session` sees it now: its sealed state, CSRF
/// token and the options' challenge (`None`: the page offers no registration).
pub async fn registration(s: &SignInStack, session: &str) -> Option<(String, String, String)> {
    let page = s.get(&passkeys_path(), Some(session)).await;
    assert_eq!(page.status, 200, "{}", page.text());
    let html = page.text();
    let options: Value = serde_json::from_str(&attribute(&html, "data-options")?).ok()?;
    let challenge = options["publicKey"]["challenge"].as_str()?.to_owned();
    Some((hidden(&html, "state")?, hidden(&html, "csrf")?, challenge))
}

/// Registers `key` for `session`'s person through the page: its answer (303 when added).
pub async fn register(s: &SignInStack, session: &str, key: &SoftAuthenticator) -> Reply {
    let (state, csrf, challenge) = registration(s, session)
        .await
        .expect("the page offers registration");
    post_registration(s, session, key, (&state, &csrf, &challenge)).await
}

pub async fn post_registration(
    s: &SignInStack,
    session: &str,
    key: &SoftAuthenticator,
    (state, csrf, challenge): (&str, &str, &str),
) -> Reply {
    let credential = key.register(challenge).to_string();
    let fields = [
        ("csrf", csrf),
        ("op", "add"),
        ("state", state),
        ("credential", credential.as_str()),
    ];
    s.post_form(&passkeys_path(), &fields, Some(session), Some(&s.origin()))
        .await
}

/// Removes credential `id` (base64url) through the page.
pub async fn remove(s: &SignInStack, session: &str, id: &str) -> Reply {
    let page = s.get(&passkeys_path(), Some(session)).await;
    let csrf = hidden(&page.text(), "csrf").expect("the page's CSRF token");
    let fields = [
        ("csrf", csrf.as_str()),
        ("op", "remove"),
        ("credential_id", id),
    ];
    s.post_form(&passkeys_path(), &fields, Some(session), Some(&s.origin()))
        .await
}

/// The review page's passkey form as `session` sees it: every hidden field, by name.
#[derive(Debug, Clone)]
pub struct PasskeyForm {
    pub token: String,
    pub csrf: String,
    pub place: Option<String>,
    pub nonce: String,
    pub action_type: String,
    pub payload_sha256: String,
    pub policy_version: String,
}

impl PasskeyForm {
    /// The statement of `vote` (`approve`/`reject`) by `approver` on `id` this form asks for.
    pub fn statement(&self, id: &str, vote: &str, approver: &str, by: Option<&str>) -> Statement {
        Statement {
            tenant: TENANT_A.to_owned(),
            approval_id: id.to_owned(),
            action_type: self.action_type.clone(),
            payload_sha256: self.payload_sha256.clone(),
            vote: vote.to_owned(),
            approver: approver.to_owned(),
            by: by.map(str::to_owned),
            policy_version: self.policy_version.parse().ok(),
            nonce: self.nonce.clone(),
        }
    }
}

/// Reads the passkey form of approval `id`'s review page (`None`: the page has none).
pub async fn passkey_form(s: &SignInStack, review: &str, session: &str) -> Option<PasskeyForm> {
    let page = s.get(review, Some(session)).await;
    assert_eq!(page.status, 200, "{}", page.text());
    let html = page.text();
    html.contains("data-passkey=\"vote\"").then_some(())?;
    Some(PasskeyForm {
        token: hidden(&html, "token")?,
        csrf: hidden(&html, "csrf")?,
        place: hidden(&html, "place"),
        nonce: hidden(&html, "nonce")?,
        action_type: hidden(&html, "action_type")?,
        payload_sha256: hidden(&html, "payload_sha256")?,
        policy_version: hidden(&html, "policy_version").unwrap_or_default(),
    })
}

/// Posts `form` with `vote` and `assertion`, as the page's script does.
pub async fn post_vote(
    s: &SignInStack,
    id: &str,
    form: &PasskeyForm,
    vote: &str,
    assertion: &Assertion,
    session: &str,
) -> Reply {
    let (credential, data, client, signature) = (
        b64(&assertion.credential_id),
        b64(&assertion.authenticator_data),
        b64(&assertion.client_data_json),
        b64(&assertion.signature),
    );
    let mut fields = vec![
        ("token", form.token.as_str()),
        ("csrf", form.csrf.as_str()),
        ("nonce", form.nonce.as_str()),
        ("action_type", form.action_type.as_str()),
        ("payload_sha256", form.payload_sha256.as_str()),
        ("policy_version", form.policy_version.as_str()),
        ("decision", vote),
        ("credential_id", credential.as_str()),
        ("authenticator_data", data.as_str()),
        ("client_data_json", client.as_str()),
        ("signature", signature.as_str()),
    ];
    if let Some(place) = &form.place {
        fields.push(("place", place.as_str()));
    }
    s.post_form(
        &format!("/approvals/{id}/decision"),
        &fields,
        Some(session),
        Some(&s.origin()),
    )
    .await
}

/// `approver` signs `vote` on `id` with `key` on the review page at `review`: the answer.
pub async fn sign_vote(
    s: &SignInStack,
    (id, review): (&str, &str),
    approver: &str,
    vote: &str,
    key: &SoftAuthenticator,
    session: &str,
) -> Reply {
    let form = passkey_form(s, review, session)
        .await
        .expect("the page asks for a passkey");
    let statement = form.statement(id, vote, approver, None);
    let assertion = key.assert(&statement.challenge());
    post_vote(s, id, &form, vote, &assertion, session).await
}
