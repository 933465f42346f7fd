//! The local AWS the tests talk to: moto from PyPI (`infra/moto_server.py`, one request at a
//! time), started once per test process on a free port — or whatever `AWS_ENDPOINT_URL` names.
//!
//! One per process, so the suites of one test binary share it; each `TestApp` (and each local
//! runner) keeps to tables and queues of its own, named by a fresh ULID, so they share the
//! server, never state.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The local AWS every test in this process talks to.
struct LocalAws {
    endpoint: Option<String>,
    // Held open for the life of the test process: moto exits when its stdin closes, so it never
    // outlives the tests, however they end.
    _moto: Option<(Child, ChildStdin)>,
}

fn local_aws() -> &'static LocalAws {
    static AWS: OnceLock<LocalAws> = OnceLock::new();
    AWS.get_or_init(|| {
        if std::env::var("AWS_ENDPOINT_URL").is_ok_and(|v| !v.is_empty()) {
            // The SDK reads the variable (and credentials) itself.
            return LocalAws {
                endpoint: None,
                _moto: None,
            };
        }
        let (endpoint, moto) = start_moto();
        LocalAws {
            endpoint: Some(endpoint),
            _moto: Some(moto),
        }
    })
}

pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The Python of the local virtualenv (`make test` installs it and sets `COUNTERSIGN_PYTHON`).
pub fn python() -> PathBuf {
    std::env::var_os("COUNTERSIGN_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".local/venv/bin/python"))
}

fn start_moto() -> (String, (Child, ChildStdin)) {
    start_moto_with(&[])
}

/// Another local AWS beside the tests' own, with `env` added to its environment (e.g. a grant
/// withheld: `MOTO_IAM_WITHOUT`); it stops when the returned handle is dropped.
pub fn another_local_aws(env: &[(&str, &str)]) -> OtherLocalAws {
    let (endpoint, moto) = start_moto_with(env);
    OtherLocalAws {
        endpoint,
        _moto: moto,
    }
}

/// A local AWS of one test's own (see [`another_local_aws`]).
pub struct OtherLocalAws {
    pub endpoint: String,
    _moto: (Child, ChildStdin),
}

impl Drop for OtherLocalAws {
    fn drop(&mut self) {
        let _ = self._moto.0.kill();
        let _ = self._moto.0.wait();
    }
}

fn start_moto_with(env: &[(&str, &str)]) -> (String, (Child, ChildStdin)) {
    let python = python();
    assert!(
        python.exists(),
        "moto is not installed ({} is missing): run `make test`, which installs it, \
         or set AWS_ENDPOINT_URL to a DynamoDB-compatible endpoint",
        python.display()
    );
    let port = free_port();
    let mut command = Command::new(&python);
    // The local stacks' deployment: their executors may resume the workflows the tests create
    // (state machines and durable functions named countersign-*), unless the environment or a
    // test's own local AWS says otherwise.
    if std::env::var_os("MOTO_IAM_PARAMETERS").is_none() {
        command.env("MOTO_IAM_PARAMETERS", LOCAL_RESUME_PARAMETERS);
    }
    let mut child = command
        .arg(workspace_root().join("infra/moto_server.py"))
        .arg(port.to_string())
        .arg("--exit-with-stdin")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start moto with {}: {e}", python.display()));
    let stdin = child.stdin.take().expect("stdin was piped");
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("moto exited before serving: {status}");
        }
        assert!(Instant::now() < deadline, "moto did not start within 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    (format!("http://{addr}"), (child, stdin))
}

/// The template's parameters every local stack is deployed with, unless it gives its own
/// (`MOTO_IAM_PARAMETERS`, infra/local_iam/gate.py): the state machines and the durable functions
/// (unqualified ARNs) whose paused workflows an approval may resume.
pub const LOCAL_RESUME_PARAMETERS: &str = r#"{"ResumeStateMachineArns": "arn:aws:states:us-east-1:123456789012:stateMachine:countersign-*", "ResumeFunctionArns": "arn:aws:lambda:us-east-1:123456789012:function:countersign-*"}"#;

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local addr").port()
}

/// The local moto's endpoint, or `None` when the environment names the endpoint itself.
pub fn aws_endpoint() -> Option<String> {
    local_aws().endpoint.clone()
}

/// moto's resident memory (VmRSS), when the tests started it.
pub fn moto_resident_bytes() -> Option<u64> {
    let (child, _) = local_aws()._moto.as_ref()?;
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The SDK configuration for the local AWS (or the endpoint the environment names).
pub async fn sdk_config() -> aws_config::SdkConfig {
    let aws = local_aws();
    let loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
    match &aws.endpoint {
        Some(endpoint) => {
            loader
                .endpoint_url(endpoint)
                .region(aws_config::Region::new("us-east-1"))
                .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
                    "test", "test", None, None, "tests",
                ))
                .load()
                .await
        }
        None => loader.load().await,
    }
}
