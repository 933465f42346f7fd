//! What the local SES sent (`GET {AWS endpoint}/_countersign/emails`, infra/moto_fixes/ses.py),
//! and the configuration of a tenant whose approvers are emailed.

use serde_json::Value;

/// The sender of the tests' emailing tenant (tenant-a).
pub const EMAIL_FROM: &str = "approvals@countersign.test";

/// Its configuration set (bounces and complaints reach its event destinations on AWS).
pub const EMAIL_CONFIGURATION_SET: &str = "countersign-tests";

/// `EMAIL` and `EMAIL_SENDERS` for tenant-a, as start_jobs overrides.
pub fn email_overrides() -> [(&'static str, String); 2] {
    [
        (
            "EMAIL",
            format!(
                r#"{{"tenant-a": {{"from": "{EMAIL_FROM}", "configuration_set": "{EMAIL_CONFIGURATION_SET}"}}}}"#
            ),
        ),
        ("EMAIL_SENDERS", EMAIL_FROM.to_owned()),
    ]
}

/// The emails SES took for `to` about approval `id` (its review link names it), oldest first.
/// The tests share one local AWS, and its approvers' addresses.
pub async fn emails_about(id: &str, to: &str) -> Vec<Value> {
    let endpoint = super::aws_endpoint().expect("the local AWS (its control API)");
    let answer = reqwest::Client::new()
        .get(format!(
            "{endpoint}/_countersign/emails?to={}",
            percent_encoding::utf8_percent_encode(to, percent_encoding::NON_ALPHANUMERIC)
        ))
        .send()
        .await
        .expect("read the sent emails");
    let emails: Vec<Value> = answer.json().await.expect("the emails as JSON");
    emails
        .into_iter()
        .filter(|e| {
            e["text"]
                .as_str()
                .is_some_and(|t| t.contains(&format!("/approvals/{id}/review")))
        })
        .collect()
}
