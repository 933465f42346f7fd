//! `countersign policy …` and `countersign groups …`, the administrator's commands over AWS
//! credentials (as `keys`): a set refused with Cedar's message stores nothing; versions pushed,
//! shown, listed and rolled back; groups set, listed and deleted; `policy test` offline with its
//! exit codes; `policy schema`; and `countersign mcp` under a policy, asking nobody by name.

use std::path::PathBuf;
use std::time::Duration;

use assert_cmd::Command;
use countersign::domain::approval_policy::Mode;
use countersign_tests::runtime_api::function_binary;
use countersign_tests::{ALICE, ALICE_KEY, BOB, CI_KEY, TENANT_A, TestApp};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use serde_json::{Value, json};

use crate::harness::{assert_has, assert_starts, countersign, run, start, stderr, stdout, vote};

const SET: &str = r#"
@id("deploys")
@require("sre:1")
permit(principal, action == Countersign::Action::"deploy", resource);

@id("no-drop")
forbid(principal, action == Countersign::Action::"agent", resource)
when { context.payload.input.command like "*DROP TABLE*" };

@id("agent-tools")
@require("sre:1")
permit(principal, action == Countersign::Action::"agent", resource);

@id("small-refunds")
@require("none")
permit(principal, action == Countersign::Action::"refund", resource)
when { context.payload.amount_cents <= 5000 };
"#;

/// A scratch directory of its own for each test, under the target directory.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "policy-{name}-{}",
        ulid::Ulid::new().to_string().to_lowercase()
    ));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn write(dir: &std::path::Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path.to_string_lossy().into_owned()
}

/// `countersign ARGS` over the test app's keys table with AWS credentials (no API key).
fn admin(t: &TestApp, args: &[&str]) -> Command {
    let mut command = Command::new(function_binary("countersign", "debug"));
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("KEYS_TABLE", &t.app.store.tables().api_keys)
        .args(args)
        .timeout(Duration::from_secs(60));
    if let Some(endpoint) = countersign_tests::aws_endpoint() {
        command.env("AWS_ENDPOINT_URL", endpoint);
    }
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn policies_and_groups_are_pushed_shown_rolled_back_and_in_force() {
    let t = start().await;
    let dir = scratch("push");
    // Groups: set, listed; a bad member is a usage error (exit 4); delete what is not there: 1.
    let set = run(admin(
        &t,
        &["groups", "set", "--tenant", TENANT_A, "sre", ALICE, BOB],
    ))
    .await
    .code(0);
    assert_has(&stdout(&set), "group sre for tenant-a: 2 member(s)");
    let listed = run(admin(
        &t,
        &["groups", "list", "--tenant", TENANT_A, "--json"],
    ))
    .await
    .code(0);
    let listed: Value = serde_json::from_str(&stdout(&listed)).expect("JSON");
    assert_eq!(listed, json!([{"group": "sre", "members": [ALICE, BOB]}]));
    run(admin(
        &t,
        &["groups", "set", "--tenant", TENANT_A, "Bad Name", ALICE],
    ))
    .await
    .code(4);
    run(admin(
        &t,
        &["groups", "delete", "--tenant", TENANT_A, "dba"],
    ))
    .await
    .code(1);

    // A set Cedar refuses, or one whose permit says nothing it requires: exit 1, nothing stored.
    let broken = write(&dir, "broken.cedar", "permit(principal, action resource);");
    let refused = run(admin(
        &t,
        &["policy", "push", "--tenant", TENANT_A, &broken],
    ))
    .await
    .code(1);
    assert_has(&stderr(&refused), "error:");
    let bare = write(
        &dir,
        "bare.cedar",
        r#"@id("x") permit(principal, action, resource);"#,
    );
    let refused = run(admin(&t, &["policy", "push", "--tenant", TENANT_A, &bare]))
        .await
        .code(1);
    assert_has(&stderr(&refused), "@require");
    // Validated against a schema in strict mode: a payload field the schema does not declare.
    let schema = run(admin(&t, &["policy", "schema", "--action", "deploy"]))
        .await
        .code(0);
    assert_has(&stdout(&schema), "namespace Countersign");
    let schema = write(&dir, "base.cedarschema", &stdout(&schema));
    let reads_missing = write(
        &dir,
        "field.cedar",
        r#"@id("f") @require("sre:1") permit(principal, action == Countersign::Action::"deploy", resource) when { context.payload.service == "api" };"#,
    );
    let invalid = run(admin(
        &t,
        &[
            "policy",
            "push",
            "--tenant",
            TENANT_A,
            &reads_missing,
            "--schema",
            &schema,
        ],
    ))
    .await
    .code(1);
    assert_has(&stderr(&invalid), "validator");
    let history = run(admin(&t, &["policy", "history", "--tenant", TENANT_A]))
        .await
        .code(0);
    assert_eq!(stdout(&history).trim(), "", "nothing stored");

    // Pushed: version 1, in force at the next create.
    let file = write(&dir, "set.cedar", SET);
    let pushed = run(admin(&t, &["policy", "push", "--tenant", TENANT_A, &file]))
        .await
        .code(0);
    assert_starts(&stdout(&pushed), "policy version 1 for tenant-a (sha256 ");
    let body = json!({"action": {"type": "deploy", "payload": {"build": 1}}}).to_string();
    let approval = t.create(CI_KEY, "cli-pol-1", &body).await.json();
    assert_eq!(approval["policy"]["source"]["version"], 1, "{approval}");
    assert_eq!(approval["policy"]["rules"][0]["group"], "sre");
    // The pipeline gate names nobody: the policy chose alice and bob.
    let gated = run(countersign(
        &t,
        CI_KEY,
        &[
            "request",
            "--type",
            "deploy",
            "--payload",
            r#"{"build": 2}"#,
            "--json",
        ],
    ))
    .await
    .code(0);
    let gated: Value = serde_json::from_str(&stdout(&gated)).expect("JSON");
    assert_eq!(gated["approvers"], json!([ALICE, BOB]), "{gated}");
    assert_eq!(gated["policy"]["source"]["policies"], json!(["deploys"]));

    // log_only, then a rollback to 1: version 3, enforce, with 1's text.
    let logged = run(admin(
        &t,
        &[
            "policy", "push", "--tenant", TENANT_A, &file, "--mode", "log_only",
        ],
    ))
    .await
    .code(0);
    assert_has(&stdout(&logged), "policy version 2");
    let rolled = run(admin(
        &t,
        &["policy", "rollback", "--tenant", TENANT_A, "--to", "1"],
    ))
    .await
    .code(0);
    assert_has(&stdout(&rolled), "policy version 3");
    run(admin(
        &t,
        &["policy", "rollback", "--tenant", TENANT_A, "--to", "9"],
    ))
    .await
    .code(1);
    let history = run(admin(
        &t,
        &["policy", "history", "--tenant", TENANT_A, "--json"],
    ))
    .await
    .code(0);
    let history: Value = serde_json::from_str(&stdout(&history)).expect("JSON");
    let modes: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["mode"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["enforce", "log_only", "enforce"]);
    assert_eq!(history[0]["sha256"], history[2]["sha256"]);
    assert!(
        history[0]["pushed_by"]
            .as_str()
            .unwrap()
            .starts_with("arn:aws:"),
        "the pusher's AWS identity: {}",
        history[0]
    );
    let shown = run(admin(
        &t,
        &["policy", "show", "--tenant", TENANT_A, "--version", "2"],
    ))
    .await
    .code(0);
    assert_has(&stdout(&shown), "version 2  log_only");
    assert_has(&stdout(&shown), r#"@id("small-refunds")"#);

    // A group deleted: creates requiring it fail closed (once the cache time passed).
    run(admin(
        &t,
        &["groups", "delete", "--tenant", TENANT_A, "sre"],
    ))
    .await
    .code(0);
    t.clock.advance(61);
    t.create(CI_KEY, "cli-pol-2", &body)
        .await
        .assert_problem(403, "policy_error");
}

#[tokio::test]
async fn policy_test_evaluates_offline_with_its_exit_codes() {
    let dir = scratch("test");
    let set = write(&dir, "set.cedar", SET);
    let groups = write(
        &dir,
        "groups.json",
        &json!({"sre": [ALICE, BOB]}).to_string(),
    );
    let test = |request: Value, principal: &str| {
        let request = write(
            &dir,
            &format!("{}.json", ulid::Ulid::new()),
            &request.to_string(),
        );
        let mut command = Command::new(function_binary("countersign", "debug"));
        command.env_clear().args([
            "policy",
            "test",
            &set,
            "--groups",
            &groups,
            "--principal",
            principal,
            "--request",
            &request,
        ]);
        command
    };
    let deploy = json!({"action": {"type": "deploy", "payload": {"build": 1}}});
    let allowed = run(test(deploy.clone(), "ci@acme")).await.code(0);
    let decision: Value = serde_json::from_str(&stdout(&allowed)).expect("JSON");
    assert_eq!(decision["decision"], "allow");
    assert_eq!(decision["policies"], json!(["deploys"]));
    assert_eq!(decision["rules"][0]["group"], "sre");
    assert_eq!(decision["rules"][0]["approvers"], json!([ALICE, BOB]));
    // The requester in its group is left out of it.
    let own = run(test(deploy, ALICE)).await.code(0);
    let own: Value = serde_json::from_str(&stdout(&own)).expect("JSON");
    assert_eq!(own["rules"][0]["approvers"], json!([BOB]));
    let small = json!({"action": {"type": "refund", "payload": {"amount_cents": 100}}});
    let auto: Value =
        serde_json::from_str(&stdout(&run(test(small, "ci@acme")).await.code(0))).unwrap();
    assert_eq!(auto["decision"], "auto");
    let drop =
        json!({"action": {"type": "agent", "payload": {"input": {"command": "DROP TABLE t"}}}});
    let forbid: Value =
        serde_json::from_str(&stdout(&run(test(drop, "ci@acme")).await.code(3))).unwrap();
    assert_eq!(forbid["decision"], "forbid");
    assert_eq!(forbid["policies"], json!(["no-drop"]));
    let odd = json!({"action": {"type": "agent", "payload": {"tool_name": "Read"}}});
    let error: Value =
        serde_json::from_str(&stdout(&run(test(odd, "ci@acme")).await.code(4))).unwrap();
    assert_eq!(error["decision"], "error");
    assert_eq!(error["errors"][0]["policy"], "no-drop");
}

/// `countersign mcp` with no `COUNTERSIGN_AGENT_APPROVERS`: the policy names the approvers of
/// both tools' approvals, and a forbidden call is denied saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_mcp_tools_ask_whom_the_policy_requires() {
    let t = start().await;
    t.set_group(TENANT_A, "sre", &[ALICE]).await;
    t.push_policy(TENANT_A, SET, Mode::Enforce).await;
    let command =
        tokio::process::Command::new(function_binary("countersign", "debug")).configure(|c| {
            c.env_clear()
                .env("PATH", std::env::var("PATH").unwrap_or_default())
                .env("COUNTERSIGN_URL", &t.base)
                .env("COUNTERSIGN_API_KEY", CI_KEY)
                .env("COUNTERSIGN_AGENT_ACTION", "agent")
                .env("COUNTERSIGN_AGENT_WAIT", "20")
                .arg("mcp");
        });
    let client =
        ().serve(TokioChildProcess::new(command).expect("spawn countersign mcp"))
            .await
            .expect("the MCP handshake");
    let call = |tool: &'static str, arguments: Value| {
        let client = &client;
        async move {
            let result = client
                .call_tool(
                    CallToolRequestParams::new(tool)
                        .with_arguments(arguments.as_object().expect("arguments").clone()),
                )
                .await
                .expect("the tool call");
            result.structured_content.expect("structured content")
        }
    };
    let requested = call(
        "request_approval",
        json!({"action_type": "agent", "payload": {"input": {"command": "ls"}}}),
    )
    .await;
    assert_eq!(requested["status"], "pending", "{requested}");
    assert_eq!(requested["policy"]["rules"][0]["group"], "sre");
    assert_eq!(requested["approvers"], json!([ALICE]));

    let asking = call(
        "permission_prompt",
        json!({"tool_name": "Bash", "input": {"command": "make test"}, "tool_use_id": "toolu_pol"}),
    );
    let voting = async {
        let id = loop {
            let page = t
                .send(t.http.get(t.url("/approvals")).bearer_auth(CI_KEY))
                .await
                .json();
            if let Some(id) = page["approvals"][0]["id"].as_str()
                && id != requested["id"]
            {
                break id.to_owned();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        vote(&t, ALICE_KEY, &id, "approve").await;
    };
    let (allowed, ()) = tokio::join!(asking, voting);
    assert_eq!(allowed["behavior"], "allow", "{allowed}");

    let denied = call(
        "permission_prompt",
        json!({"tool_name": "Bash", "input": {"command": "psql -c 'DROP TABLE users'"}, "tool_use_id": "toolu_drop"}),
    )
    .await;
    assert_eq!(denied["behavior"], "deny");
    assert!(
        denied["message"]
            .as_str()
            .unwrap_or_default()
            .contains("policy_forbidden"),
        "{denied}"
    );
    assert!(
        denied["message"]
            .as_str()
            .unwrap_or_default()
            .contains("forbidden by approval policy no-drop"),
        "{denied}"
    );
    client.cancel().await.expect("close");
}

/// docs/POLICY.md's worked examples, as a policy repository tests them in CI: `ci.sh` runs
/// `countersign policy test` (validated against the schema) on every request and passes; a
/// request whose expected decision is wrong makes it fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_worked_examples_pass_their_own_ci_script() {
    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/policies");
    let binary = function_binary("countersign", "debug");
    let bin_dir = binary
        .parent()
        .expect("bin dir")
        .to_string_lossy()
        .into_owned();
    let path = format!("{bin_dir}:{}", std::env::var("PATH").unwrap_or_default());
    let ci = |dir: &std::path::Path| {
        let mut command = Command::new("sh");
        command.env("PATH", &path).arg(dir.join("ci.sh"));
        command
    };
    let passed = run(ci(&examples)).await.code(0);
    let out = stdout(&passed);
    for name in [
        "allow-production-deploy",
        "auto-small-refund",
        "allow-large-refund",
        "forbid-agent-drops-a-table",
        "allow-agent-reads-a-file",
        "error-deploy-without-environment",
    ] {
        assert_has(&out, &format!("ok   {name}"));
    }
    // The same repository with one wrong expectation: a large refund expected to approve itself.
    let copy = scratch("examples");
    std::fs::create_dir_all(copy.join("requests")).expect("requests dir");
    for file in ["ci.sh", "acme.cedar", "acme.cedarschema", "groups.json"] {
        std::fs::copy(examples.join(file), copy.join(file)).expect("copy");
    }
    std::fs::copy(
        examples.join("requests/allow-large-refund.json"),
        copy.join("requests/auto-large-refund.json"),
    )
    .expect("copy");
    let failed = run(ci(&copy)).await.code(1);
    assert_has(&stdout(&failed), "FAIL auto-large-refund (exit 0)");
}
