use serde_json::json;

use super::*;

#[test]
fn an_approval_survives_the_round_trip() {
    let mut approval = Approval {
        tenant: TenantId::parse("acme").unwrap(),
        id: ApprovalId::generate(),
        status: Status::Approved,
        requested_by: Some(Approver::parse("ci@acme").unwrap()),
        requested_by_key_id: KeyId::parse("abcdefghijklmnop"),
        action_type: "deploy".into(),
        executes: false,
        payload: json!({"build": 1042, "big": 12345678901234567890u64, "f": 0.1, "n": null})
            .as_object()
            .unwrap()
            .clone(),
        approvers: vec![
            Approver::parse("bob").unwrap(),
            Approver::parse("alice").unwrap(),
        ],
        context: json!({"summary": "<b>x</b>"}).as_object().unwrap().clone(),
        idempotency_key: IdempotencyKey::parse("k#1").unwrap(),
        execute_key_names_approval: true,
        created_at: 1_700_000_000,
        expires_at: 1_700_604_800,
        policy: Some(Policy {
            rules: vec![Rule {
                name: "engineering".into(),
                approvers: vec![Approver::parse("bob").unwrap()],
                min_approvals: 1,
                group: None,
            }],
        }),
        votes: vec![Decision {
            outcome: Outcome::Rejected,
            approver: Approver::parse("bob").unwrap(),
            decided_at: 1_700_000_050,
            channel: Channel::ReviewPage,
            comment: None,
            webhook_event_id: None,
            key_id: None,
            signed_in: Some(SignIn {
                issuer: "https://idp.example.com".into(),
                sub: "00u1bob".into(),
                auth_time: Some(1_700_000_000),
            }),
            by: Some(Approver::parse("Carol").unwrap()),
            delegation_set_by: None,
            passkey: None,
        }],
        decision: Some(Decision {
            outcome: Outcome::Approved,
            approver: Approver::parse("alice").unwrap(),
            decided_at: 1_700_000_100,
            channel: Channel::Webhook,
            comment: Some("ok".into()),
            webhook_event_id: Some("msg_1".into()),
            key_id: None,
            signed_in: None,
            by: None,
            delegation_set_by: None,
            passkey: None,
        }),
        cancellation: Some(Cancellation {
            by: Approver::parse("ci@acme").unwrap(),
            at: 1_700_000_100,
            reason: Some("wrong build".into()),
            channel: Some(Channel::Github),
        }),
        execution: Execution {
            status: ExecutionStatus::Failed,
            attempts: 3,
            last_error: Some("HTTP 500".into()),
            updated_at: 1_700_000_200,
            generation: 2,
            note: Some("done by hand".into()),
            claimed_by: Some("claim-1".into()),
            claimant: Some(Approver::parse("ci@acme").unwrap()),
            reported_at: Some(1_700_000_300),
            retry_key: Some("retry-1".into()),
            retry_keys: vec!["retry-0".into(), "retry-1".into()],
            late_reports: vec!["an attempt learnt: succeeded".into()],
            requeues: 2,
            status_checks: vec![StatusCheck {
                at: 1_700_000_150,
                answer: "pending".into(),
                detail: None,
            }],
        },
        slack: Some(SlackMessage {
            channel: "C0123".into(),
            ts: "1700000000.000100".into(),
        }),
        trace: Some("4bf92f3577b34da6a3ce929d0e0e4736-01".into()),
        stall: Default::default(),
        resume: None,
        policy_source: None,
        policy_evaluated: None,
        assurance: None,
        comment_cap: None,
        certificate: None,
        github: Some(GithubGate {
            installation_id: 42,
            repository: "acme/api".into(),
            repository_id: 7,
            run_id: 123,
            environment: "production east".into(),
            callback_url:
                "https://api.github.com/repos/acme/api/actions/runs/123/deployment_protection_rule"
                    .into(),
            sender_login: "octocat".into(),
            sender_id: 1,
            requester: Some(Approver::parse("Carol@acme").unwrap()),
            joined_requesters: vec![Approver::parse("dave@acme").unwrap()],
            deliveries: vec![
                GithubDelivery {
                    id: "d-1".into(),
                    at: 1_700_000_000,
                },
                GithubDelivery {
                    id: "d-2".into(),
                    at: 1_700_000_005,
                },
            ],
        }),
    };
    let item = approval_to_item(&approval);
    assert_eq!(
        item["requested_by_id"],
        s("carol@acme"),
        "a GitHub deployment's requester, for separation of duties, is its sender's approver"
    );
    assert_eq!(approval_from_item(&item).unwrap(), approval);
    approval.decision = None;
    approval.policy = None;
    approval.votes.clear();
    approval.execution.last_error = None;
    approval.execution.note = None;
    assert_eq!(
        approval_from_item(&approval_to_item(&approval)).unwrap(),
        approval
    );
    // An approval stored before the execute key named the approval reads as one.
    let mut item = approval_to_item(&approval);
    item.remove("execute_key");
    assert!(
        !approval_from_item(&item)
            .unwrap()
            .execute_key_names_approval
    );
}

#[test]
fn a_damaged_item_names_the_attribute() {
    let mut item = approval_to_item(&crate::domain::approval::tests::pending(100));
    item.insert("status".into(), s("maybe"));
    assert_eq!(
        approval_from_item(&item).unwrap_err().to_string(),
        "stored item is malformed: status"
    );
}
