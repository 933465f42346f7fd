//! The per-request CPU work, measured alone: what each request pays before and after its one
//! DynamoDB round trip.

use std::hint::black_box;
use std::time::Instant;

use countersign::domain::{CreateRequest, fingerprint};
use countersign::webhook::{WebhookSecret, verify};
use serde_json::{Value, json};

/// Mean time of `f` over enough iterations to take about half a second.
fn time<T>(name: &str, bytes: usize, mut f: impl FnMut() -> T) {
    let mut iterations = 1u64;
    loop {
        let started = Instant::now();
        for _ in 0..iterations {
            black_box(f());
        }
        let elapsed = started.elapsed();
        if elapsed.as_millis() >= 300 {
            let per = elapsed.as_secs_f64() / iterations as f64;
            let throughput = if bytes > 0 {
                format!("{:>8.0} MiB/s", bytes as f64 / per / 1_048_576.0)
            } else {
                String::new()
            };
            println!("{name:<52} {:>10.1} µs {throughput}", per * 1e6);
            return;
        }
        iterations *= 2;
    }
}

pub fn run() {
    println!("\nPer-request CPU work (one core)");
    let big_payload: String = "x".repeat(60 * 1024);
    let body = json!({
        "action": {"type": "deploy", "payload": {"service": "api", "build": 1042, "notes": big_payload}},
        "approvers": ["alice@example.com", "bob@example.com"],
        "context": {"summary": "Deploy api build 1042 to prod", "requested_by": "ci"},
        "expires_in_seconds": 86400
    });
    let bytes = serde_json::to_vec(&body).expect("json");
    let small = serde_json::to_vec(&json!({
        "action": {"type": "deploy", "payload": {"service": "api", "build": 1042}},
        "approvers": ["alice@example.com"], "context": {"summary": "Deploy"}
    }))
    .expect("json");

    time(
        "parse a 64 KiB create body (serde_json)",
        bytes.len(),
        || serde_json::from_slice::<Value>(&bytes),
    );
    let value: Value = serde_json::from_slice(&bytes).expect("json");
    time("validate it (CreateRequest::parse)", bytes.len(), || {
        CreateRequest::parse(&value, |t| t == "deploy")
    });
    time(
        "fingerprint it (RFC 8785 canonical form + SHA-256)",
        bytes.len(),
        || fingerprint(&value),
    );
    time(
        "parse + validate + fingerprint a small create body",
        small.len(),
        || {
            let v: Value = serde_json::from_slice(&small).expect("json");
            (
                CreateRequest::parse(&v, |t| t == "deploy").is_ok(),
                fingerprint(&v),
            )
        },
    );
    let secret = WebhookSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("secret");
    let webhook_body = vec![b'a'; 64 * 1024];
    let signature = secret.sign("msg_1", 1_000, &webhook_body);
    let secrets = [secret];
    time(
        "verify a Standard Webhooks signature over 64 KiB",
        webhook_body.len(),
        || {
            verify(
                &secrets,
                Some("msg_1"),
                Some("1000"),
                Some(&signature),
                &webhook_body,
                1_000,
            )
        },
    );
    metrics();
}

/// What metrics add to a request: its scope, two counts and a duration, and the documents
/// written once at its end (here into memory; in Lambda one write to standard output).
fn metrics() {
    use countersign::observe::{Emitter, Metric, MetricsConfig, Sink, count, milliseconds};
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let emitter = Emitter::new(MetricsConfig::default(), Sink::Memory(lines.clone()));
    time(
        "one invocation's metrics (3 metrics, 2 EMF documents)",
        0,
        || {
            futures::executor::block_on(emitter.invocation("decide", async {
                count(Metric::VoteCounted, &["api"]);
                count(Metric::ApprovalDecided, &["approved"]);
                milliseconds(Metric::TimeToDecision, &["approved"], 61_000);
            }));
            lines.lock().expect("lines").clear();
        },
    );
}
