//! The API as documented: `docs/openapi.json` is the document the server serves (a valid OpenAPI
//! 3.1 document naming every route the router has), and Schemathesis (PyPI) holds the real
//! router, dispatcher and executor on the local AWS to it — seeded and bounded, configured by
//! tests/schemathesis/.

use std::path::PathBuf;
use std::process::Command;

use countersign_tests::{ACME_SECRET, ApiKeys, TestApp, python, workspace_root};
use serde_json::Value;

const REQUESTER: &str = "fuzz-requester-0123456789abcdef";
const DECIDER: &str = "fuzz-decider-0123456789abcdef";

fn committed_document() -> Value {
    let path = workspace_root().join("docs/openapi.json");
    let text = std::fs::read_to_string(&path).expect("read docs/openapi.json");
    serde_json::from_str(&text).expect("docs/openapi.json is JSON")
}

#[tokio::test]
async fn the_served_document_is_the_committed_one_and_valid_openapi_3_1() {
    let t = TestApp::start().await;
    let reply = t.send(t.http.get(t.url("/openapi.json"))).await;
    assert_eq!(reply.status, 200);
    let served = reply.json();
    assert!(
        served == committed_document(),
        "docs/openapi.json differs from the served document: regenerate it with\n  \
         cargo run -q -p countersign-local -- openapi > docs/openapi.json"
    );
    assert_eq!(served["openapi"], "3.1.0");

    // Valid by the OpenAPI 3.1 meta-schema (openapi-spec-validator comes with moto).
    let check = Command::new(python())
        .args([
            "-c",
            "import json, sys; from openapi_spec_validator import validate; validate(json.load(open(sys.argv[1])))",
        ])
        .arg(workspace_root().join("docs/openapi.json"))
        .output()
        .expect("run python");
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
}

/// Every documented operation is routed (tests/api/template.rs holds the document's operations, the
/// router's and the template's routes to one list): asked without a key, each answers with one
/// of its documented statuses, never a 405.
#[tokio::test]
async fn every_documented_operation_is_routed() {
    let t = TestApp::start().await;
    let doc = committed_document();
    let mut operations = 0;
    for (path, item) in doc["paths"].as_object().expect("paths") {
        let concrete = path
            .replace("{id}", "apr_01JD3ZZZZZZZZZZZZZZZZZZZZZ")
            .replace("{source}", "acme")
            .replace("{tenant}", "tenant-a");
        for (method, operation) in item.as_object().expect("path item") {
            // A path item also holds the parameters its operations share.
            let Some(responses) = operation["responses"].as_object() else {
                continue;
            };
            let method: reqwest::Method = method.to_uppercase().parse().expect("a method");
            operations += 1;
            let reply = t
                .send_any(t.http.request(method.clone(), t.url(&concrete)))
                .await;
            assert!(
                responses.contains_key(&reply.status.to_string()),
                "{method} {path}: {} is not documented ({})",
                reply.status,
                reply.text()
            );
            assert_ne!(reply.status, 405, "{method} {path}");
        }
    }
    assert_eq!(operations, 28, "documented operations");
}

/// Where Schemathesis lives: beside the test Python (both come from infra/requirements.txt).
fn schemathesis() -> PathBuf {
    let path = python().with_file_name("schemathesis");
    assert!(
        path.exists(),
        "{} is missing: `make test` installs it (infra/requirements.txt)",
        path.display()
    );
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn schemathesis_finds_no_5xx_and_no_answer_the_document_does_not_describe() {
    let keys = ApiKeys::new()
        .key("ci@fuzz", &["requester", "operator"], REQUESTER)
        .key("portal@fuzz", &["decider"], DECIDER)
        .to_string();
    let t = TestApp::start_jobs(&[("API_KEYS", &keys)]).await;
    let schemathesis = schemathesis();
    let (base, document) = (t.base.clone(), t.url("/openapi.json"));
    let run = tokio::task::spawn_blocking(move || {
        Command::new(schemathesis)
            .current_dir(workspace_root().join("tests/schemathesis"))
            .args(["run", "--output-truncate", "true", &document])
            .env("COUNTERSIGN_FUZZ_BASE_URL", base)
            .env("COUNTERSIGN_FUZZ_REQUESTER_KEY", REQUESTER)
            .env("COUNTERSIGN_FUZZ_DECIDER_KEY", DECIDER)
            .env("COUNTERSIGN_FUZZ_ACTION_TYPE", "deploy")
            .env("COUNTERSIGN_FUZZ_WEBHOOK_SOURCE", "acme")
            .env("COUNTERSIGN_FUZZ_WEBHOOK_SECRET", ACME_SECRET)
            .env("NO_COLOR", "1")
            .output()
            .expect("run schemathesis")
    })
    .await
    .expect("schemathesis thread");
    let out = String::from_utf8_lossy(&run.stdout);
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "schemathesis found problems:\n{out}\n{err}"
    );

    // The summary: "N generated, N passed" and the seed the run used.
    let cases_line = out
        .lines()
        .skip_while(|l| !l.starts_with("Test cases:"))
        .nth(1)
        .unwrap_or_default()
        .trim()
        .to_owned();
    let generated: u64 = cases_line
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no case count in the summary:\n{out}"));
    assert!(
        cases_line.ends_with(&format!("{generated} passed")),
        "{cases_line}"
    );
    let seed = out
        .lines()
        .find_map(|l| l.strip_prefix("Seed: "))
        .unwrap_or("?")
        .to_owned();
    println!("schemathesis: {cases_line} (seed {seed})");
    assert!(
        generated >= 500,
        "only {generated} cases: the run is not exploring"
    );

    // The stateful links reached real approvals: created, voted on, cancelled, their trails read.
    let items = t
        .dynamodb
        .scan()
        .table_name(&t.app.config.tables.approvals)
        .send()
        .await
        .expect("scan the approvals")
        .items
        .unwrap_or_default();
    let status_count = |status: &str| {
        items
            .iter()
            .filter(|i| {
                i.get("status")
                    .and_then(|s| s.as_s().ok())
                    .map(String::as_str)
                    == Some(status)
            })
            .count()
    };
    let log = &t.requests;
    println!(
        "schemathesis: {} approvals created ({} approved or rejected, {} cancelled); requests: {} votes, {} cancels, {} trails read",
        items.len(),
        status_count("approved") + status_count("rejected"),
        status_count("cancelled"),
        log.count_ending("POST", "/decision"),
        log.count_ending("POST", "/cancel"),
        log.count_ending("GET", "/events"),
    );
    assert!(
        items.len() >= 10,
        "only {} approvals were created",
        items.len()
    );
}
