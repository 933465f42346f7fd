//! The template's IAM grants: no wildcard action, no wildcard resource but the few AWS gives no
//! resource-level permission for (X-Ray's writes, BatchGetSecretValue, Step Functions' task-token
//! answers), a durable function's executions (`<function ARN>:*`) and SES's identities of this
//! account narrowed to the configured From addresses, each named here.

use std::collections::BTreeSet;

use serde_norway::Value;

use crate::template::{of_type, statements, template, text};

#[test]
fn no_iam_statement_has_a_wildcard_action_or_resource() {
    let template = template();
    let roles = of_type(&template, "AWS::IAM::Role");
    assert_eq!(
        roles.len(),
        of_type(&template, "AWS::Serverless::Function").len(),
        "one role per function"
    );
    for (id, role) in roles {
        {
            for statement in statements(role) {
                for action in statement["Action"].as_sequence().expect("actions listed") {
                    let action = action.as_str().unwrap_or_default();
                    assert!(!action.contains('*'), "{id}: wildcard action {action}");
                }
                // X-Ray's two write actions (Tracing) have no resource-level permissions: AWS
                // documents "*" as their only resource. Exactly these two, nothing else on "*".
                if is_xray_write(statement)
                    || is_batch_secret_read(statement)
                    || is_task_token_answer(statement)
                {
                    continue;
                }
                // A durable function's callbacks: on each listed function's durable executions
                // (`<function ARN>:*`, the only form Lambda matches them by), nothing wider.
                // SES: the account's identities and configuration sets, only with a From address
                // EmailSenders allows (a template cannot make one ARN per listed identity).
                if is_email_send(statement) {
                    let resource = text(&statement["Resource"]);
                    assert!(
                        resource.contains(":${AWS::AccountId}:identity/*")
                            && text(&statement["Condition"]["StringLike"]["ses:FromAddress"])
                                .contains("EmailSenders"),
                        "{id}: SendEmail on {resource}, not narrowed by ses:FromAddress"
                    );
                    continue;
                }
                if is_durable_callback_answer(statement) {
                    let resource = text(&statement["Resource"]);
                    assert!(
                        resource.contains("${Arns}:*") && resource.contains("ResumeFunctionArns"),
                        "{id}: durable callbacks on {resource}"
                    );
                    continue;
                }
                let resources = match &statement["Resource"] {
                    Value::Sequence(items) => items.clone(),
                    single => vec![single.clone()],
                };
                for resource in resources {
                    let resource = text(&resource);
                    // Lambda names its log streams itself: the one wildcard allowed is a stream
                    // name inside the function's own log group.
                    let scoped_log_streams =
                        resource.ends_with(":log-stream:*") && resource.matches('*').count() == 1;
                    assert!(
                        !resource.contains('*') || scoped_log_streams,
                        "{id}: wildcard resource {resource}"
                    );
                    assert!(!resource.trim().is_empty(), "{id}: empty resource");
                }
            }
        }
    }
}

/// The X-Ray write statement Tracing needs: exactly `xray:PutTraceSegments` and
/// `xray:PutTelemetryRecords`, allowed on `"*"` (they support no resource-level permissions).
pub(crate) fn is_xray_write(statement: &Value) -> bool {
    allows_exactly(
        statement,
        &["xray:PutTraceSegments", "xray:PutTelemetryRecords"],
    ) && statement["Resource"].as_str() == Some("*")
}

/// Whether `statement` allows exactly the actions `expected`.
fn allows_exactly(statement: &Value, expected: &[&str]) -> bool {
    let actions: BTreeSet<&str> = statement["Action"]
        .as_sequence()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    statement["Effect"].as_str() == Some("Allow")
        && actions == expected.iter().copied().collect::<BTreeSet<_>>()
}

/// The executor's answers to Step Functions task tokens: exactly `states:SendTaskSuccess` and
/// `states:SendTaskFailure` on `"*"` — the Service Authorization Reference lists no resource
/// type for them (the token is the capability).
fn is_task_token_answer(statement: &Value) -> bool {
    allows_exactly(
        statement,
        &["states:SendTaskSuccess", "states:SendTaskFailure"],
    ) && statement["Resource"].as_str() == Some("*")
}

/// The executor's emails: `ses:SendEmail` alone.
fn is_email_send(statement: &Value) -> bool {
    allows_exactly(statement, &["ses:SendEmail"])
}

/// The executor's answers to Lambda durable functions' callbacks.
fn is_durable_callback_answer(statement: &Value) -> bool {
    allows_exactly(
        statement,
        &[
            "lambda:SendDurableExecutionCallbackSuccess",
            "lambda:SendDurableExecutionCallbackFailure",
        ],
    )
}

/// `secretsmanager:BatchGetSecretValue` alone on `"*"`: the action takes no resource-level
/// permission and grants nothing by itself (each secret read needs `GetSecretValue` on it).
pub(crate) fn is_batch_secret_read(statement: &Value) -> bool {
    statement["Effect"].as_str() == Some("Allow")
        && statement["Action"].as_sequence().is_some_and(|a| {
            a.len() == 1 && a[0].as_str() == Some("secretsmanager:BatchGetSecretValue")
        })
        && statement["Resource"].as_str() == Some("*")
}
