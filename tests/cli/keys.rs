//! `countersign keys …`, the administrator's commands, run against the test app's keys table over
//! the local AWS with AWS credentials (not an API key): create, list, roll and revoke.

use std::time::Duration;

use assert_cmd::Command;
use countersign_tests::runtime_api::function_binary;
use serde_json::{Value, json};

use crate::harness::{assert_has, assert_starts, run, start, stderr, stdout};

/// `countersign keys …` against the test app's keys table over the local AWS, as an
/// administrator runs it: a created key works at once through the API; `list` shows no secret
/// or hash; `roll` overlaps; `revoke` ends a key; refusals exit 1 and change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keys_are_created_listed_rolled_and_revoked_over_aws_credentials() {
    let t = start().await;
    let table = t.app.store.tables().api_keys.clone();
    let keys = |args: &[&str]| {
        let mut command = Command::new(function_binary("countersign", "debug"));
        command
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("KEYS_TABLE", &table)
            .args(["keys"])
            .args(args)
            .timeout(Duration::from_secs(60));
        if let Some(endpoint) = countersign_tests::aws_endpoint() {
            command.env("AWS_ENDPOINT_URL", endpoint);
        }
        command
    };
    let created = run(keys(&[
        "create",
        "--tenant",
        "tenant-a",
        "--principal",
        "ci@tenant-a",
        "--role",
        "requester",
        "--role",
        "reader",
        "--expires-in",
        "90d",
        "--description",
        "pipeline",
    ]))
    .await
    .success();
    let key = stdout(&created).trim().to_owned();
    assert_starts(&key, "csk_");
    assert_has(&stderr(&created), "shown this once");
    let key_id = key[4..20].to_owned();
    let status = |key: String| {
        let t = &t;
        async move {
            t.send(t.http.get(t.url("/approvals/nope")).bearer_auth(key))
                .await
                .status
        }
    };
    assert_eq!(status(key.clone()).await, 404, "works on its first request");

    let listed = run(keys(&["list", "--json"])).await.success();
    let listed: Value = serde_json::from_str(&stdout(&listed)).expect("list --json");
    assert_eq!(listed[0]["key_id"], key_id.as_str());
    assert_eq!(listed[0]["roles"], json!(["requester", "reader"]));
    assert_eq!(listed[0]["description"], "pipeline");
    // Review of v5, finding 8: who created it is the caller's AWS identity (STS), not $USER.
    assert_starts(
        listed[0]["created_by"].as_str().unwrap_or_default(),
        "arn:aws:",
    );
    let text = stdout(&run(keys(&["list", "--tenant", "tenant-a"])).await.success());
    assert_has(&text, &key_id);
    assert!(!text.contains(&key[21..53]), "no secret in list");
    assert!(!listed.to_string().contains("hash"), "no hash in list");

    // An overlap shorter than a warm function keeps a key (KEY_CACHE_SECONDS, 60 by default)
    // would let the old key work past it: refused, nothing written.
    let short = run(keys(&["roll", &key_id, "--overlap", "30s"]))
        .await
        .code(4);
    assert_has(&stderr(&short), "KEY_CACHE_SECONDS");
    let rolled = run(keys(&["roll", &key_id, "--overlap", "1h", "--json"]))
        .await
        .success();
    let rolled: Value = serde_json::from_str(&stdout(&rolled)).expect("roll --json");
    let new_key = rolled["key"].as_str().expect("the new key").to_owned();
    assert_eq!(status(new_key.clone()).await, 404, "the successor works");
    assert_eq!(
        status(key.clone()).await,
        404,
        "the old key during the overlap"
    );

    run(keys(&["revoke", &key_id])).await.success();
    let again = run(keys(&["revoke", &key_id])).await.code(1);
    assert_has(&stderr(&again), "revoked");
    run(keys(&["roll", &key_id])).await.code(1);
    run(keys(&["revoke", "aaaaaaaaaaaaaaaa"])).await.code(1);
    run(keys(&[
        "create",
        "--tenant",
        "tenant-a",
        "--principal",
        "x@tenant-a",
        "--role",
        "requester",
        "--role",
        "decider",
    ]))
    .await
    .code(4);
    t.clock.advance(61);
    assert_eq!(
        status(key).await,
        401,
        "revoked, once the cache time is over"
    );
    assert_eq!(status(new_key).await, 404);
    let listed = run(keys(&["list", "--json"])).await.success();
    let listed: Value = serde_json::from_str(&stdout(&listed)).expect("list --json");
    assert_eq!(
        listed.as_array().map(Vec::len),
        Some(2),
        "one key and its successor"
    );
}
