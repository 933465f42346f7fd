//! A bare MCP client on the JSON-RPC lines of `countersign mcp`'s stdio, for the tasks tests:
//! they check the server's answers exactly as sent (against the extension's schema), which a
//! typed client would parse and re-shape first. Every request carries its own `_meta` (protocol
//! 2026-07-28's per-request lifecycle: version, client info, capabilities — with or without
//! the tasks extension — and a progress token); the notifications that arrive meanwhile are
//! kept with the time they came.

use std::process::Stdio;
use std::time::Duration;

use countersign_tests::runtime_api::function_binary;
use countersign_tests::{ALICE, TestApp};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::Instant;

pub(crate) const TASKS: &str = "io.modelcontextprotocol/tasks";

pub(crate) struct Wire {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: u64,
    /// Whether its requests declare the tasks extension.
    tasks: bool,
    /// The notifications received so far, with when each came.
    pub notifications: Vec<(Instant, Value)>,
}

impl Wire {
    /// `countersign mcp` as `key`, its permission prompt asking alice under the `agent` type,
    /// with `env` on top (e.g. `COUNTERSIGN_AGENT_WAIT`).
    pub(crate) async fn start(t: &TestApp, key: &str, tasks: bool, env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(function_binary("countersign", "debug"));
        command
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("COUNTERSIGN_URL", &t.base)
            .env("COUNTERSIGN_API_KEY", key)
            .env("COUNTERSIGN_AGENT_ACTION", "agent")
            .env("COUNTERSIGN_AGENT_APPROVERS", ALICE)
            .env("COUNTERSIGN_AGENT_WAIT", "5")
            .envs(env.iter().copied())
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("spawn countersign mcp");
        let stdin = child.stdin.take().expect("its stdin");
        let stdout = child.stdout.take().expect("its stdout");
        Self {
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
            next_id: 0,
            tasks,
            notifications: Vec::new(),
        }
    }

    /// One request; its result, or its JSON-RPC error.
    pub(crate) async fn request(
        &mut self,
        method: &str,
        mut params: Value,
    ) -> Result<Value, Value> {
        self.next_id += 1;
        let id = self.next_id;
        let extensions = if self.tasks {
            json!({ TASKS: {} })
        } else {
            json!({})
        };
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "countersign-tests", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {"extensions": extensions},
            "progressToken": format!("progress-{id}"),
        });
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut text = line.to_string();
        text.push('\n');
        self.stdin
            .write_all(text.as_bytes())
            .await
            .expect("write a request");
        self.stdin.flush().await.expect("flush");
        loop {
            let line = tokio::time::timeout(Duration::from_secs(60), self.lines.next_line())
                .await
                .expect("an answer within a minute")
                .expect("read stdout")
                .expect("the server is still there");
            let message: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout holds only JSON-RPC ({e}): {line}"));
            assert_eq!(message["jsonrpc"], "2.0", "{message}");
            if message.get("method").is_some() && message.get("id").is_none() {
                self.notifications.push((Instant::now(), message));
                continue;
            }
            assert_eq!(message["id"], id, "an answer to another request: {message}");
            return match message.get("error") {
                Some(error) => Err(error.clone()),
                None => Ok(message["result"].clone()),
            };
        }
    }

    /// A `tools/call`.
    pub(crate) async fn call(&mut self, tool: &str, arguments: Value) -> Result<Value, Value> {
        self.request("tools/call", json!({"name": tool, "arguments": arguments}))
            .await
    }

    pub(crate) async fn get_task(&mut self, task_id: &str) -> Result<Value, Value> {
        self.request("tasks/get", json!({ "taskId": task_id }))
            .await
    }

    pub(crate) async fn cancel_task(&mut self, task_id: &str) -> Result<Value, Value> {
        self.request("tasks/cancel", json!({ "taskId": task_id }))
            .await
    }

    /// Kills the server (as a crash would) and waits until it is gone.
    pub(crate) async fn kill(mut self) {
        self.child.kill().await.expect("kill the server");
    }
}

/// The one text content of a tool result, as JSON (the same as its `structuredContent`).
pub(crate) fn content(result: &Value) -> Value {
    let text = result["content"][0]["text"]
        .as_str()
        .expect("a text content");
    let value: Value = serde_json::from_str(text).expect("the text holds JSON");
    assert_eq!(result["structuredContent"], value, "{result}");
    value
}
