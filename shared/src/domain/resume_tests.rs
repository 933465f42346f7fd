use serde_json::json;

use super::*;

fn parse(value: Value) -> Result<Resume, Vec<String>> {
    let mut errors = Vec::new();
    match Resume::parse(&value, &mut errors) {
        Some(resume) if errors.is_empty() => Ok(resume),
        _ => Err(errors.into_iter().map(|e| e.field).collect()),
    }
}

#[test]
fn a_resume_names_its_kind_and_a_token_within_aws_limits() {
    let sfn = parse(json!({"type": "stepfunctions", "task_token": "AQB8AAAAKgAAAAM"})).unwrap();
    assert_eq!(
        (sfn.kind, sfn.status, sfn.attempts),
        (ResumeKind::StepFunctions, ResumeStatus::Pending, 0)
    );
    let durable = parse(json!({"type": "lambda_durable", "callback_id": "Y2FsbGJhY2s+/x=="}));
    assert_eq!(durable.unwrap().kind, ResumeKind::LambdaDurable);
    let longest = "t".repeat(MAX_TASK_TOKEN_CHARS);
    assert!(parse(json!({"type": "stepfunctions", "task_token": longest})).is_ok());

    for (body, field) in [
        (json!("stepfunctions"), "resume"),
        (json!({"task_token": "x"}), "resume.type"),
        (json!({"type": "sqs", "task_token": "x"}), "resume.type"),
        (json!({"type": 1}), "resume.type"),
        (json!({"type": "stepfunctions"}), "resume.task_token"),
        (
            json!({"type": "stepfunctions", "task_token": ""}),
            "resume.task_token",
        ),
        (
            json!({"type": "stepfunctions", "task_token": "t".repeat(MAX_TASK_TOKEN_CHARS + 1)}),
            "resume.task_token",
        ),
        (
            json!({"type": "stepfunctions", "task_token": 7}),
            "resume.task_token",
        ),
        // The other kind's field is not this kind's.
        (
            json!({"type": "stepfunctions", "task_token": "x", "callback_id": "y"}),
            "resume.callback_id",
        ),
        (
            json!({"type": "lambda_durable", "callback_id": "c".repeat(MAX_CALLBACK_ID_CHARS + 1)}),
            "resume.callback_id",
        ),
        (
            json!({"type": "lambda_durable", "callback_id": "has space"}),
            "resume.callback_id",
        ),
        (
            json!({"type": "lambda_durable", "callback_id": "abc==="}),
            "resume.callback_id",
        ),
        (
            json!({"type": "lambda_durable", "callback_id": "=="}),
            "resume.callback_id",
        ),
    ] {
        assert_eq!(parse(body.clone()).unwrap_err(), [field], "{body}");
    }
}

#[test]
fn the_token_is_never_shown() {
    let token = "AQB8AAAAKgAAAAMAAAAAAAAAAS3cret";
    let resume = parse(json!({"type": "stepfunctions", "task_token": token})).unwrap();
    assert!(!format!("{resume:?}").contains(token));
    assert!(!json!(resume.view()).to_string().contains(token));
    assert_eq!(
        json!(resume.view()),
        json!({"type": "stepfunctions", "status": "pending", "attempts": 0, "last_error": null})
    );
    assert!(resume.token.name().starts_with("sha256:") && resume.token.name().len() == 19);
}

#[test]
fn resume_types_are_read_from_a_comma_separated_list() {
    assert_eq!(ResumeTypes::parse("").unwrap(), ResumeTypes::default());
    let both = ResumeTypes::parse(" stepfunctions, lambda_durable ,").unwrap();
    assert!(both.enables(ResumeKind::StepFunctions) && both.enables(ResumeKind::LambdaDurable));
    let one = ResumeTypes::parse("lambda_durable").unwrap();
    assert!(!one.enables(ResumeKind::StepFunctions));
    let error = ResumeTypes::parse("stepfunctions,sqs").unwrap_err();
    assert!(error.contains("stepfunctions, lambda_durable") && !error.contains("sqs"));
}

#[test]
fn the_answer_follows_the_end() {
    let mut approval = crate::domain::approval::tests::pending(1_000);
    assert_eq!(ResumeAnswer::of(&approval), None);
    approval.status = Status::Expired;
    let answer = ResumeAnswer::of(&approval).unwrap();
    assert_eq!(answer.error(), Some("Countersign.Expired"));
    let document: Value = serde_json::from_str(answer.document()).unwrap();
    assert_eq!(document["status"], "expired");
    assert_eq!(document["approval_id"], json!(approval.id));
    assert_eq!(
        document["decided_at"],
        crate::domain::rfc3339(approval.expires_at)
    );
    assert_eq!(document["votes"], json!([]));
}

#[test]
fn a_document_too_large_for_its_answer_stays_whole_json() {
    let vote = |n: usize| {
        json!({"approver": format!("a{n}@example.com"), "vote": "reject",
                                 "at": "2026-12-05T10:00:00Z", "comment": "x".repeat(2_000)})
    };
    let document = json!({"approval_id": "apr_1", "status": "rejected",
                          "decided_at": "2026-12-05T10:00:00Z",
                          "votes": (0..20).map(vote).collect::<Vec<_>>()});
    assert!(document.to_string().len() > MAX_FAILURE_BYTES);
    let fitted = within(document.clone(), MAX_FAILURE_BYTES);
    assert!(fitted.to_string().len() <= MAX_FAILURE_BYTES);
    assert_eq!(fitted["truncated"], true);
    assert_eq!(
        fitted["votes"].as_array().map(Vec::len),
        Some(20),
        "the votes, without comments"
    );
    assert!(fitted["votes"][0].get("comment").is_none());
    assert_eq!(
        within(document.clone(), MAX_SUCCESS_BYTES),
        document,
        "whole when it fits"
    );
    let tight = within(document, 200);
    assert_eq!(
        (tight["votes"].clone(), tight["truncated"].clone()),
        (json!([]), json!(true))
    );
}
