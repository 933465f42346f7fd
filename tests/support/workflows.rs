//! Workflows that wait on an approval, on the local AWS (docs/LOCAL_AWS.md, "Resuming a
//! workflow"): a Step Functions state machine whose first task waits with `.waitForTaskToken`
//! (it sends its token to a queue, where the test reads it), and a Lambda durable function's
//! callback made through the local AWS's control API. Both are named `countersign-…`: the
//! names every local stack is deployed able to resume.

use std::time::Duration;

use serde_json::{Value, json};

use crate::local_aws::{aws_endpoint, sdk_config};

const ACCOUNT: &str = "123456789012";

/// A state machine whose one task waits for its token (`timeout_seconds`, if given).
pub struct WaitingStateMachine {
    pub arn: String,
    sfn: aws_sdk_sfn::Client,
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
}

/// An execution's end, as `DescribeExecution` tells it.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionEnd {
    pub status: String,
    pub output: Option<Value>,
    pub error: Option<String>,
    pub cause: Option<String>,
}

impl WaitingStateMachine {
    pub async fn create(timeout_seconds: Option<u32>) -> Self {
        let sdk = sdk_config().await;
        let sfn = aws_sdk_sfn::Client::new(&sdk);
        let sqs = aws_sdk_sqs::Client::new(&sdk);
        let name = format!(
            "countersign-wait-{}",
            ulid::Ulid::new().to_string().to_lowercase()
        );
        let queue_url = sqs
            .create_queue()
            .queue_name(&name)
            .send()
            .await
            .expect("create the tokens' queue")
            .queue_url
            .expect("queue url");
        let mut ask = json!({
            "Type": "Task",
            "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
            "Parameters": {"QueueUrl": queue_url, "MessageBody": {"token.$": "$$.Task.Token"}},
            "End": true
        });
        if let Some(seconds) = timeout_seconds {
            ask["TimeoutSeconds"] = json!(seconds);
        }
        let definition = json!({"StartAt": "Ask", "States": {"Ask": ask}});
        let arn = sfn
            .create_state_machine()
            .name(&name)
            .definition(definition.to_string())
            .role_arn(format!("arn:aws:iam::{ACCOUNT}:role/{name}"))
            .send()
            .await
            .expect("create the state machine")
            .state_machine_arn;
        Self {
            arn,
            sfn,
            sqs,
            queue_url,
        }
    }

    /// Starts an execution and returns (its ARN, the token its task waits on).
    pub async fn start(&self) -> (String, String) {
        let execution = self
            .sfn
            .start_execution()
            .state_machine_arn(&self.arn)
            .input("{}")
            .send()
            .await
            .expect("start an execution")
            .execution_arn;
        for _ in 0..100 {
            let received = self
                .sqs
                .receive_message()
                .queue_url(&self.queue_url)
                .max_number_of_messages(1)
                .send()
                .await
                .expect("receive the token");
            if let Some(message) = received.messages().first() {
                let body: Value =
                    serde_json::from_str(message.body().unwrap_or("{}")).expect("a JSON body");
                self.sqs
                    .delete_message()
                    .queue_url(&self.queue_url)
                    .receipt_handle(message.receipt_handle().unwrap_or_default())
                    .send()
                    .await
                    .expect("delete the token's message");
                let token = body["token"].as_str().expect("the task's token").to_owned();
                return (execution, token);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the state machine never sent its token");
    }

    /// The execution's status, and its end once it has one.
    pub async fn describe(&self, execution: &str) -> ExecutionEnd {
        let described = self
            .sfn
            .describe_execution()
            .execution_arn(execution)
            .send()
            .await
            .expect("describe the execution");
        ExecutionEnd {
            status: described.status.as_str().to_owned(),
            output: described
                .output
                .as_deref()
                .map(|o| serde_json::from_str(o).expect("JSON output")),
            error: described.error,
            cause: described.cause,
        }
    }

    /// Waits for the execution to leave RUNNING.
    pub async fn ended(&self, execution: &str) -> ExecutionEnd {
        for _ in 0..300 {
            let end = self.describe(execution).await;
            if end.status != "RUNNING" {
                return end;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the execution {execution} is still running after 30 s");
    }
}

/// A paused durable execution's callback (the local AWS's stand-in).
pub struct DurableCallback {
    pub id: String,
    http: reqwest::Client,
    endpoint: String,
}

impl DurableCallback {
    /// A callback of a durable execution of `countersign-durable`, timing out after
    /// `timeout_seconds` (fractions allowed), if given.
    pub async fn create(timeout_seconds: Option<f64>) -> Self {
        let endpoint = aws_endpoint().expect("the local AWS (its control API)");
        let http = reqwest::Client::new();
        let mut body = json!({
            "function_arn": format!("arn:aws:lambda:us-east-1:{ACCOUNT}:function:countersign-durable"),
        });
        if let Some(seconds) = timeout_seconds {
            body["timeout_seconds"] = json!(seconds);
        }
        let created: Value = http
            .post(format!("{endpoint}/_countersign/durable/callbacks"))
            .json(&body)
            .send()
            .await
            .expect("create a callback")
            .json()
            .await
            .expect("the callback as JSON");
        Self {
            id: created["callback_id"]
                .as_str()
                .expect("callback_id")
                .to_owned(),
            http,
            endpoint,
        }
    }

    /// Its state: `status`, `result`, `error`, `answers_received`, `answers_accepted`, ….
    pub async fn state(&self) -> Value {
        let id =
            percent_encoding::utf8_percent_encode(&self.id, percent_encoding::NON_ALPHANUMERIC);
        self.http
            .get(format!(
                "{}/_countersign/durable/callbacks/{id}",
                self.endpoint
            ))
            .send()
            .await
            .expect("read the callback")
            .json()
            .await
            .expect("the callback's state as JSON")
    }
}

/// The next `count` calls of `operation` (e.g. `SendTaskSuccess`) for `target` (a task token or
/// a callback id: the tests share one local AWS) answer `error` first, changing nothing.
pub async fn fault(operation: &str, error: &str, count: u32, target: &str) {
    let endpoint = aws_endpoint().expect("the local AWS (its control API)");
    let reply = reqwest::Client::new()
        .post(format!("{endpoint}/_countersign/faults"))
        .json(&json!({"operation": operation, "error": error, "count": count, "target": target}))
        .send()
        .await
        .expect("queue a fault");
    assert!(reply.status().is_success(), "{:?}", reply.text().await);
}
