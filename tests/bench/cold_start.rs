//! Cold start: each function's release binary, from process start to its first request to the
//! Runtime API (its init: configuration, AWS clients, TLS roots), median of many starts; with
//! the binary's size and its zip's.

use std::time::{Duration, Instant};

use countersign_tests::runtime_api::{RuntimeApi, function_binary, start_function};

const FUNCTIONS: [&str; 5] = ["api", "decide", "webhook", "dispatch", "executor"];

fn env() -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = [
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("API_KEYS", "tenant-a=key-a-0123456789abcdef"),
        ("ACTION_TARGETS", r#"{"deploy": {"url": "http://127.0.0.1:9/deploy"}}"#),
        ("WEBHOOK_SOURCES", r#"{"acme": {"tenant": "tenant-a", "secrets": ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}}"#),
        ("DECISION_TOKEN_SECRET", "bench-review-token-secret-0123456789"),
        ("JOBS_QUEUE_URL", "http://127.0.0.1:9/000000000000/jobs"),
        ("NOTIFIER_URL", "http://127.0.0.1:9/notify"),
        ("PUBLIC_BASE_URL", "https://approvals.example.com"),
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:9"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    env.sort();
    env
}

fn mib(bytes: u64) -> String {
    format!("{:.2} MiB", bytes as f64 / 1_048_576.0)
}

/// The size of `path` deflated into a zip, as Lambda would store it (python's zipfile).
fn zipped_size(path: &std::path::Path) -> Option<u64> {
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import io,sys,zipfile; b=io.BytesIO(); z=zipfile.ZipFile(b,'w',zipfile.ZIP_DEFLATED); \
             z.write(sys.argv[1],'bootstrap'); z.close(); print(len(b.getvalue()))",
        )
        .arg(path)
        .output()
        .ok()?;
    String::from_utf8(out.stdout).ok()?.trim().parse().ok()
}

pub async fn run(starts: usize) {
    println!(
        "\nCold start (release binaries for this host; time from exec to the first Runtime API request, median of {starts})"
    );
    println!(
        "{:<10} {:>10} {:>10} {:>12} {:>14} {:>16}",
        "function", "median", "max", "binary", "zip (host)", "zip (arm64)"
    );
    for function in FUNCTIONS {
        let binary = function_binary(function, "release");
        let mut times = Vec::with_capacity(starts);
        for _ in 0..starts {
            let api = RuntimeApi::start(Vec::new()).await;
            let started = Instant::now();
            let mut child = start_function(&binary, &api, &env());
            let deadline = started + Duration::from_secs(10);
            let first = loop {
                if let Some(at) = api.first_next() {
                    break at;
                }
                assert!(
                    Instant::now() < deadline,
                    "{function} never asked for an invocation"
                );
                if let Ok(Some(status)) = child.try_wait() {
                    panic!("{function} exited during init: {status}");
                }
                tokio::time::sleep(Duration::from_micros(200)).await;
            };
            times.push(first.duration_since(started));
            let _ = child.kill();
            let _ = child.wait();
        }
        times.sort();
        let size = std::fs::metadata(&binary).map(|m| m.len()).unwrap_or(0);
        let arm64 = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join(format!("../target/lambda/{function}/bootstrap.zip"));
        let arm64 = std::fs::metadata(&arm64)
            .map(|m| mib(m.len()))
            .unwrap_or_else(|_| "(make package)".to_owned());
        println!(
            "{:<10} {:>7.1} ms {:>7.1} ms {:>12} {:>14} {:>16}",
            function,
            times[times.len() / 2].as_secs_f64() * 1000.0,
            times[times.len() - 1].as_secs_f64() * 1000.0,
            mib(size),
            zipped_size(&binary).map_or_else(|| "?".to_owned(), mib),
            arm64
        );
    }
}
