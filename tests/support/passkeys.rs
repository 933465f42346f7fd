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

/// The relying party of the sample votes and certificates (the benchmark's and COST.md's).
pub const SAMPLE_ORIGIN: &str = "https://approvals.example.com";
pub const SAMPLE_RP: &str = "approvals.example.com";

fn sample_payload() -> serde_json::Map<String, Value> {
    serde_json::json!({"service": "api", "build": 4242, "region": "eu-west-1",
                       "commit": "9fceb02d0ae598e95dc970b74767f19372d61af8"})
    .as_object()
    .cloned()
    .unwrap_or_default()
}

fn sample_statement(approver: &str) -> Statement {
    Statement {
        tenant: "acme".into(),
        approval_id: "apr_01JEXAMPLEEXAMPLEEXAMPLE00".into(),
        action_type: "deploy".into(),
        payload_sha256: countersign::domain::passkey::payload_sha256(&sample_payload()),
        vote: "approve".into(),
        approver: approver.into(),
        by: None,
        policy_version: Some(12),
        // The shape of the service's nonce: key id, expiry, 12 random bytes, a 16-byte MAC.
        nonce: "k1.1765190000.aGVsbG8taGVsbG8t.MDEyMzQ1Njc4OWFiY2RlZg".into(),
    }
}

/// A passkey vote as the service stores it (signed in, its evidence), with its assertion, the
/// credential's key and the challenge it signed.
pub fn sample_vote() -> (
    countersign::domain::Decision,
    Assertion,
    p256::ecdsa::VerifyingKey,
    [u8; 32],
) {
    use countersign::domain::{Approver, Channel, Decision, Outcome, PasskeyEvidence, SignIn};
    let key = SoftAuthenticator::new(1, SAMPLE_RP, SAMPLE_ORIGIN);
    let statement = sample_statement("approver1@example.com");
    let challenge = statement.challenge();
    let assertion = key.assert(&challenge);
    let evidence = PasskeyEvidence {
        statement: statement.canonical(),
        credential_id: b64(&assertion.credential_id),
        authenticator_data: b64(&assertion.authenticator_data),
        client_data_json: b64(&assertion.client_data_json),
        signature: b64(&assertion.signature),
        public_key: key.jwk(),
        iss: "https://id.example.com".into(),
        sub: "00u1a2b3c4d5e6f7g8h9".into(),
        registered_at: 1_765_190_000,
    };
    let vote = Decision {
        outcome: Outcome::Approved,
        approver: Approver::parse("approver1@example.com").expect("approver"),
        decided_at: 1_765_190_100,
        channel: Channel::ReviewPage,
        comment: None,
        webhook_event_id: None,
        key_id: None,
        signed_in: Some(SignIn {
            issuer: "https://id.example.com".into(),
            sub: "00u1a2b3c4d5e6f7g8h9".into(),
            auth_time: Some(1_765_190_000),
        }),
        by: None,
        delegation_set_by: None,
        passkey: Some(Box::new(evidence)),
    };
    let verifying = key.jwk().verifying_key().expect("P-256");
    (vote, assertion, verifying, challenge)
}

/// A sealed 3-of-5 certificate (three of five listed approvers signed) and the JWKS of the
/// local key that stands in for Countersign's.
pub fn three_of_five() -> (Value, Vec<countersign::domain::passkey::Jwk>) {
    use countersign::domain::passkey::certificate::{
        CertificateVote, CertifiedAction, PolicyEvidence, RuleEvidence,
    };
    use countersign::domain::passkey::{Certificate, Jwk, payload_sha256};
    use p256::ecdsa::signature::Signer as _;
    let people: Vec<String> = (1..=5)
        .map(|i| format!("approver{i}@example.com"))
        .collect();
    let mut certificate = Certificate {
        v: 1,
        approval_id: "apr_01JEXAMPLEEXAMPLEEXAMPLE00".into(),
        tenant: "acme".into(),
        requested_by: Some("ci@acme".into()),
        action: CertifiedAction {
            kind: "deploy".into(),
            payload: sample_payload(),
        },
        payload_sha256: payload_sha256(&sample_payload()),
        policy: PolicyEvidence {
            version: Some(12),
            sha256: Some("ab".repeat(32)),
            rules: vec![RuleEvidence {
                name: "release".into(),
                group: Some("release-managers".into()),
                min_approvals: 3,
                approvers: people.clone(),
            }],
        },
        votes: Vec::new(),
        decided_at: "2026-12-08T10:00:00Z".into(),
        issued_at: "2026-12-08T10:00:01Z".into(),
        signature: String::new(),
    };
    for (i, person) in people.iter().enumerate().take(3) {
        let key = SoftAuthenticator::new(i as u8 + 1, SAMPLE_RP, SAMPLE_ORIGIN);
        let statement = sample_statement(person);
        let assertion = key.assert(&statement.challenge());
        certificate.votes.push(CertificateVote {
            statement: statement.canonical(),
            credential_id: b64(&assertion.credential_id),
            authenticator_data: b64(&assertion.authenticator_data),
            client_data_json: b64(&assertion.client_data_json),
            signature: b64(&assertion.signature),
            public_key_jwk: key.jwk(),
            identity: person.clone(),
            iss: "https://id.example.com".into(),
            sub: format!("sub-{person}"),
            registered_at: "2026-12-01T09:00:00Z".into(),
        });
    }
    let countersign = p256::ecdsa::SigningKey::from_slice(&[9u8; 32]).expect("a valid scalar");
    let (header, input) = certificate.to_sign("k1");
    let signature: p256::ecdsa::Signature = countersign.sign(input.as_bytes());
    let sealed = certificate.sealed(&header, &signature.to_bytes());
    let mut jwk = Jwk::of(countersign.verifying_key());
    jwk.kid = Some("k1".into());
    (sealed, vec![jwk])
}
