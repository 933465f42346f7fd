//! The local runner's real binary (`countersign-local`, what `make run` starts) as one
//! long-lived stack: every route on one port, the stream poller into dispatch and the queue
//! poller into the executor, against the tests' local AWS. Its standard output (the demo's echo
//! and notifier lines) is kept for the test to read.

use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use countersign::runner::ensure_queues;
use countersign::store::Tables;

use crate::runtime_api::function_binary;

/// A running `countersign-local`; dropping it kills the process.
pub struct LocalRunner {
    child: Child,
    pub base: String,
    pub http: reqwest::Client,
    stdout: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Drop for LocalRunner {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn collect(stream: impl Read + Send + 'static) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            sink.lock().expect("output lock").push(line);
        }
    });
    lines
}

fn lines_with(lines: &Mutex<Vec<String>>, needle: &str) -> Vec<String> {
    lines
        .lock()
        .expect("output lock")
        .iter()
        .filter(|l| l.contains(needle))
        .cloned()
        .collect()
}

/// Variables that give a runner tables and a jobs queue of its own (named `prefix…`), so that
/// several runners can share one local AWS.
pub async fn isolated_env(prefix: &str) -> Vec<(String, String)> {
    let tables = Tables::with_prefix(prefix);
    let sqs = aws_sdk_sqs::Client::new(&crate::sdk_config().await);
    let queues = ensure_queues(&sqs, &format!("{prefix}-jobs"), 30, 5)
        .await
        .expect("create the runner's queues");
    vec![
        ("APPROVALS_TABLE".into(), tables.approvals),
        ("IDEMPOTENCY_TABLE".into(), tables.idempotency_keys),
        ("INBOX_TABLE".into(), tables.webhook_inbox),
        ("LEDGER_TABLE".into(), tables.execution_ledger),
        ("EVENTS_TABLE".into(), tables.events),
        ("APPROVAL_INDEX_TABLE".into(), tables.approval_index),
        ("KEYS_TABLE".into(), tables.api_keys),
        ("JOBS_QUEUE_URL".into(), queues.queue_url),
    ]
}

impl LocalRunner {
    /// Starts the binary with `env` as its configuration (on top of the local AWS's endpoint
    /// and credentials) and waits until `/health` answers 200.
    pub async fn start(env: &[(String, String)]) -> Self {
        Self::start_against(crate::aws_endpoint(), env).await
    }

    /// [`LocalRunner::start`] against the local AWS at `endpoint` (`None`: what the
    /// environment's `AWS_ENDPOINT_URL` names).
    pub async fn start_against(endpoint: Option<String>, env: &[(String, String)]) -> Self {
        // `PORT` in `env` chooses it (a test that must know the runner's origin before it
        // starts: sign-in's redirect URI); otherwise a free one.
        let port = match env.iter().find(|(name, _)| name == "PORT") {
            Some((_, port)) => port.parse().expect("PORT is a port"),
            None => TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port(),
        };
        let mut command = Command::new(function_binary("countersign-local", "debug"));
        command
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("PORT", port.to_string())
            .env("AWS_REGION", "us-east-1")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        match endpoint {
            Some(endpoint) => {
                command
                    .env("AWS_ENDPOINT_URL", endpoint)
                    .env("AWS_ACCESS_KEY_ID", "test")
                    .env("AWS_SECRET_ACCESS_KEY", "test");
            }
            None => {
                for (name, value) in std::env::vars().filter(|(k, _)| k.starts_with("AWS_")) {
                    command.env(name, value);
                }
            }
        }
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("start countersign-local");
        let stdout = collect(child.stdout.take().expect("piped stdout"));
        let stderr = collect(child.stderr.take().expect("piped stderr"));
        let mut runner = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
            stdout,
            stderr,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let health = runner.http.get(runner.url("/health")).send().await;
            if health.is_ok_and(|r| r.status() == 200) {
                return runner;
            }
            if let Ok(Some(status)) = runner.child.try_wait() {
                panic!(
                    "countersign-local exited before serving ({status}):\n{}",
                    runner.log_tail()
                );
            }
            assert!(
                Instant::now() < deadline,
                "countersign-local did not serve within 60 s:\n{}",
                runner.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Kills the process at once (SIGKILL), as a crashed instance: requests in flight are cut
    /// off wherever they are.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Lines of standard output that contain `needle`.
    pub fn stdout_lines_with(&self, needle: &str) -> Vec<String> {
        lines_with(&self.stdout, needle)
    }

    /// Lines of standard error that contain `needle`.
    pub fn stderr_lines_with(&self, needle: &str) -> Vec<String> {
        lines_with(&self.stderr, needle)
    }

    /// The last lines the runner wrote (both streams), for a failing test's message.
    pub fn log_tail(&self) -> String {
        let tail = |lines: &Arc<Mutex<Vec<String>>>| {
            let lines = lines.lock().expect("output lock");
            lines[lines.len().saturating_sub(40)..].join("\n")
        };
        format!(
            "--- stdout ---\n{}\n--- stderr ---\n{}",
            tail(&self.stdout),
            tail(&self.stderr)
        )
    }
}
