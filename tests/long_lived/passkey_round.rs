//! Passkey-only approvals on the long-lived runner, between its other rounds: every vote that
//! is not a passkey signature — a decider's key, a webhook delivered twice, a vote racing
//! them — is refused `passkey_required` and records nothing; each approval still reaches its
//! end (cancelled by its requester), nothing executes, and the runner goes on to the next
//! round. (Passkey votes themselves need a relying party by name: `tests/api/passkeys.rs` and
//! the browser test.)

use countersign::webhook::WebhookSecret;
use countersign_tests::local_runner::LocalRunner;
use countersign_tests::{ALICE, BOB, DECIDER_A, KEY_A, decided_event, signed_delivery};
use futures::StreamExt;
use serde_json::json;

use crate::client::{create, decide, get, send};

pub(crate) async fn passkey_round(runner: &LocalRunner, secret: &WebhookSecret) -> usize {
    const APPROVALS: usize = 12;
    let ended = futures::stream::iter(0..APPROVALS)
        .map(|i| async move {
            let body = json!({"action": {"type": "deploy", "payload": {"n": i}},
                              "approvers": [ALICE, BOB], "assurance": "passkey"})
            .to_string();
            let created = send(create(runner, KEY_A, &format!("ll-passkey-{i}"), &body)).await;
            assert_eq!(
                created.status,
                201,
                "{}",
                String::from_utf8_lossy(&created.body)
            );
            let id = created.json()["id"].as_str().expect("id").to_owned();
            let url = runner.url("/webhooks/acme");
            let event = decided_event(&id, "approve", BOB);
            let event_id = format!("msg_ll_passkey_{i}");
            let deliver = || signed_delivery(&runner.http, &url, secret, &event_id, &event);
            let (voted, first, again) = futures::join!(
                send(decide(runner, DECIDER_A, &id, ALICE)),
                send(deliver()),
                send(deliver())
            );
            assert_eq!(
                (voted.status, voted.json()["code"].clone()),
                (403, json!("passkey_required"))
            );
            for delivered in [first, again] {
                assert_eq!(delivered.json()["outcome"], "passkey_required");
            }
            let approval = send(get(runner, KEY_A, &id)).await.json();
            assert_eq!(
                (approval["status"].clone(), approval["votes"].clone()),
                (json!("pending"), json!([]))
            );
            let cancelled = send(
                runner
                    .http
                    .post(runner.url(&format!("/approvals/{id}/cancel")))
                    .bearer_auth(KEY_A)
                    .json(&json!({"reason": "passkeys round"})),
            )
            .await;
            assert_eq!(cancelled.status, 200);
            let after = send(get(runner, KEY_A, &id)).await.json();
            assert_eq!(after["status"], "cancelled");
            assert_eq!(after["execution"]["status"], "not_started");
            let certificate = send(
                runner
                    .http
                    .get(runner.url(&format!("/approvals/{id}/certificate")))
                    .bearer_auth(KEY_A),
            )
            .await;
            assert_eq!(
                (certificate.status, certificate.json()["code"].clone()),
                (404, json!("no_certificate"))
            );
        })
        .buffer_unordered(4)
        .count()
        .await;
    // The runner's JWKS: its own certificate key, from its local KMS.
    let jwks = send(
        runner
            .http
            .get(runner.url("/.well-known/countersign/jwks.json")),
    )
    .await;
    assert_eq!(jwks.status, 200);
    assert_eq!(jwks.json()["keys"][0]["crv"], "P-256");
    ended
}
