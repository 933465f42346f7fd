//! One trace from a create request to every call made for its approval, and nothing a requester
//! wrote, nor a key, in any metric, trace or log line (docs/OPERATIONS.md). Run on the local
//! runner's real binary, whose standard output and error are everything it logs.

use std::collections::BTreeSet;

use countersign_tests::jobs::Downstream;
use countersign_tests::local_runner::{LocalRunner, isolated_env};
use countersign_tests::{
    ACME_SECRET, ALICE, CreateBody, DECIDER_A, KEY_A, TENANT_A, TOKEN_SECRET, decision_body,
    eventually, test_api_keys,
};
use serde_json::{Value, json};

use crate::helpers::{CALLBACK_SECRET, subscription};

const GIVEN_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const GIVEN: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
/// Put in the payload, the context, a comment: must appear in no metric, trace or log line.
const MARKER: &str = "MARKER-7f3a91-requester-text";
/// An approver's name: must appear in no metric.
const APPROVER_MARKER: &str = "marker-approver-5c2e@example.com";

/// `traceparent` → (trace id, parent span id), checked for W3C's form.
fn parts(traceparent: &str) -> (String, String) {
    let fields: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(fields.len(), 4, "{traceparent:?}");
    assert_eq!(fields[0], "00");
    for (field, len) in fields[1..].iter().zip([32, 16, 2]) {
        assert_eq!(field.len(), len, "{traceparent}");
        assert!(
            field
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
    }
    assert_ne!(fields[1], "0".repeat(32));
    assert_ne!(fields[2], "0".repeat(16));
    (fields[1].to_owned(), fields[2].to_owned())
}

/// A log line's field (its spans' fields are at its top level too).
fn field<'a>(line: &'a Value, name: &str) -> Option<&'a str> {
    line[name].as_str()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_trace_from_create_to_every_call_and_nothing_requester_written_in_any_line() {
    let downstream = Downstream::default();
    let base = downstream.serve().await;
    let prefix = format!("tr-{}", ulid::Ulid::new().to_string().to_lowercase());
    let mut env = isolated_env(&prefix).await;
    env.extend(
        [
            ("API_KEYS", test_api_keys()),
            (
                "ACTION_TARGETS",
                json!({"deploy": {"url": format!("{base}/ok"), "idempotent": true}}).to_string(),
            ),
            ("NOTIFIER_URL", format!("{base}/notify")),
            ("DECISION_TOKEN_SECRET", TOKEN_SECRET.to_owned()),
            (
                "PUBLIC_BASE_URL",
                "https://approvals.example.com".to_owned(),
            ),
            (
                "EVENT_SUBSCRIPTIONS",
                subscription(&format!("{base}/callback"), None),
            ),
            (
                "WEBHOOK_SOURCES",
                json!({"acme": {"tenant": TENANT_A, "secrets": [ACME_SECRET]}}).to_string(),
            ),
            ("RUST_LOG", "info,countersign=debug".to_owned()),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    );
    let runner = LocalRunner::start(&env).await;
    // A table key decides one of the two: neither it nor its hash may appear in any line.
    let store = countersign::Store::new(
        aws_sdk_dynamodb::Client::new(&countersign_tests::sdk_config().await),
        countersign::store::Tables::with_prefix(&prefix),
    );
    let table_decider =
        countersign_tests::table_key(&store, TENANT_A, "portal@tenant-a", &["decider"], None).await;
    let http = reqwest::Client::new();
    let body = CreateBody::new("deploy", &[ALICE, APPROVER_MARKER])
        .payload(json!({"note": MARKER}))
        .context(json!({"summary": MARKER}))
        .to_string();
    let create = |key: &'static str, traceparent: Option<&'static str>| {
        let mut request = http
            .post(runner.url("/approvals"))
            .bearer_auth(KEY_A)
            .header("content-type", "application/json")
            .header("idempotency-key", key)
            .body(body.clone());
        if let Some(traceparent) = traceparent {
            request = request.header("traceparent", traceparent);
        }
        async move {
            let reply = request.send().await.expect("create");
            assert_eq!(reply.status(), 201);
            let created: Value = reply.json().await.expect("json");
            created["id"].as_str().expect("id").to_owned()
        }
    };
    let traced = create("trace-1", Some(GIVEN)).await;
    let fresh = create("trace-2", None).await;
    for (id, decider) in [(&traced, DECIDER_A), (&fresh, table_decider.expose())] {
        let mut vote = decision_body("approve", APPROVER_MARKER);
        vote["comment"] = json!(MARKER);
        let reply = http
            .post(runner.url(&format!("/approvals/{id}/decision")))
            .bearer_auth(decider)
            .json(&vote)
            .send()
            .await
            .expect("decide");
        assert_eq!(reply.status(), 200);
    }
    // Each: two notifications, one execute call, and callbacks for created, the vote, approved,
    // and the execution's events.
    eventually("both executed and every callback delivered", || async {
        let executed = [&traced, &fresh].iter().all(|id| {
            downstream
                .calls_to("/ok")
                .iter()
                .filter(|(_, body)| body["approval_id"] == **id)
                .count()
                == 1
        });
        let callbacks = downstream.calls_to("/callback");
        let succeeded = |id: &str| {
            callbacks.iter().any(|(_, body)| {
                body["type"] == "execution.succeeded" && body["data"]["approval"]["id"] == id
            })
        };
        executed && succeeded(&traced) && succeeded(&fresh)
    })
    .await;

    // The traceparent of each call, by approval (calls carry its id in their bodies).
    let of = |path: &str, id: &str| -> Vec<String> {
        let calls = downstream.calls_to(path);
        let traceparents = downstream.traceparents(path);
        assert_eq!(calls.len(), traceparents.len());
        calls
            .iter()
            .zip(traceparents)
            .filter(|((_, body), _)| {
                body["approval_id"] == id || body["data"]["approval"]["id"] == id
            })
            .map(|(_, t)| t)
            .collect()
    };
    let mut fresh_traces = BTreeSet::new();
    let mut spans = BTreeSet::new();
    for (id, expected) in [(&traced, Some(GIVEN_TRACE)), (&fresh, None)] {
        let calls: Vec<(&str, String)> = ["/ok", "/notify", "/callback"]
            .iter()
            .flat_map(|path| of(path, id).into_iter().map(move |t| (*path, t)))
            .collect();
        let paths: BTreeSet<&str> = calls.iter().map(|(p, _)| *p).collect();
        assert_eq!(
            paths.len(),
            3,
            "the execute call, notifications and callbacks: {calls:?}"
        );
        for (path, traceparent) in &calls {
            let (trace, span) = parts(traceparent);
            match expected {
                Some(expected) => assert_eq!(trace, expected, "{path}"),
                None => {
                    assert_ne!(trace, GIVEN_TRACE);
                    fresh_traces.insert(trace);
                }
            }
            assert_ne!(span, "00f067aa0ba902b7", "a new parent span");
            assert!(spans.insert(span), "a new parent span per call");
        }
    }
    assert_eq!(
        fresh_traces.len(),
        1,
        "one fresh trace for the approval without one"
    );

    // Nothing requester-written, no key, in any line; no approver in any metric.
    let stdout = runner.stdout_lines_with("");
    let stderr = runner.stderr_lines_with("");
    let emf: Vec<&String> = stdout.iter().filter(|l| l.contains("\"_aws\"")).collect();
    assert!(
        !emf.is_empty(),
        "the runner writes its metrics to standard output"
    );
    for line in &emf {
        crate::metrics::valid_document(line);
        assert!(!line.contains(APPROVER_MARKER), "{line}");
        assert!(!line.contains(TENANT_A), "no tenant unless asked: {line}");
    }
    for line in stdout.iter().chain(&stderr) {
        let key_hash: String = table_decider
            .digest()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        for secret in [
            MARKER,
            KEY_A,
            DECIDER_A,
            CALLBACK_SECRET,
            TOKEN_SECRET,
            ACME_SECRET,
            table_decider.expose(),
            &key_hash,
        ] {
            assert!(!line.contains(secret), "{secret} in {line}");
        }
    }
    // Every log line about an approval names it, its tenant and a trace; the lines of its
    // create, its jobs and their calls name its own trace.
    let about = |id: &str| -> Vec<Value> {
        stdout
            .iter()
            .filter(|l| l.contains(id) && !l.contains("\"_aws\""))
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    };
    let lines = about(&traced);
    assert!(lines.len() >= 5, "{lines:#?}");
    for line in &lines {
        assert_eq!(field(line, "approval_id"), Some(traced.as_str()), "{line}");
        assert_eq!(field(line, "tenant"), Some(TENANT_A), "{line}");
        let trace = field(line, "trace_id").unwrap_or_else(|| panic!("no trace_id: {line}"));
        assert_eq!(trace.len(), 32, "{line}");
        // A job's lines (dispatch sending it, the executor running it) name its kind.
        if line.get("kind").is_some() {
            assert_eq!(trace, GIVEN_TRACE, "{line}");
        }
    }
    let jobs = lines.iter().filter(|l| l.get("kind").is_some()).count();
    assert!(jobs >= 3, "the jobs' lines: {lines:#?}");
}

/// Every line about a Slack-decided approval names it and its tenant, and its Slack jobs carry
/// the approval's own trace (issue 36): the post, the click, the update.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_lines_of_a_slack_decided_approval_name_it_and_its_trace() {
    use countersign_tests::slack::{FakeSlack, SLACK_SIGNING_SECRET, U_ALICE, slack_headers};
    let downstream = Downstream::default();
    let base = downstream.serve().await;
    let slack = FakeSlack::start().await;
    let prefix = format!("trs-{}", ulid::Ulid::new().to_string().to_lowercase());
    let mut env = isolated_env(&prefix).await;
    env.extend(
        [
            ("API_KEYS", test_api_keys()),
            (
                "ACTION_TARGETS",
                json!({"deploy": {"url": format!("{base}/ok"), "idempotent": true}}).to_string(),
            ),
            ("SLACK", slack.config()),
            ("DECISION_TOKEN_SECRET", TOKEN_SECRET.to_owned()),
            (
                "PUBLIC_BASE_URL",
                "https://approvals.example.com".to_owned(),
            ),
            ("NOTIFIER_URL", format!("{base}/notify")),
            ("RUST_LOG", "info,countersign=debug".to_owned()),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    );
    let runner = LocalRunner::start(&env).await;
    let http = reqwest::Client::new();
    let reply = http
        .post(runner.url("/approvals"))
        .bearer_auth(KEY_A)
        .header("content-type", "application/json")
        .header("idempotency-key", "trace-slack-1")
        .header("traceparent", GIVEN)
        .body(CreateBody::new("deploy", &[ALICE]).to_string())
        .send()
        .await
        .expect("create");
    assert_eq!(reply.status(), 201);
    let created: Value = reply.json().await.expect("json");
    let id = created["id"].as_str().expect("id").to_owned();
    let wait = std::time::Duration::from_secs(60);
    slack.wait_for_message(&id, wait, |m| m.has_buttons()).await;
    let body = slack.click_body(U_ALICE, "countersign.approve", &id);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    let mut click = http
        .post(runner.url(&format!("/slack/interactions/{TENANT_A}")))
        .body(body.clone());
    for (name, value) in slack_headers(SLACK_SIGNING_SECRET, now, &body) {
        click = click.header(name, value);
    }
    assert_eq!(click.send().await.expect("click").status(), 200);
    slack
        .wait_for_message(&id, wait, |m| m.shown().contains("execution: *succeeded*"))
        .await;

    let lines: Vec<Value> = runner
        .stdout_lines_with(&id)
        .iter()
        .filter(|l| !l.contains("\"_aws\""))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for line in &lines {
        assert_eq!(field(line, "approval_id"), Some(id.as_str()), "{line}");
        assert_eq!(field(line, "tenant"), Some(TENANT_A), "{line}");
        assert!(field(line, "trace_id").is_some(), "{line}");
        if line.get("kind").is_some() {
            assert_eq!(field(line, "trace_id"), Some(GIVEN_TRACE), "{line}");
        }
    }
    let slack_jobs = lines
        .iter()
        .filter(|l| field(l, "kind") == Some("slack"))
        .count();
    assert!(slack_jobs >= 2, "the post and the update: {lines:#?}");
    let clicks = lines
        .iter()
        .filter(|l| field(l, "route") == Some("/slack/interactions/{tenant}"))
        .count();
    assert_eq!(clicks, 1, "the click's line names the approval: {lines:#?}");
}
