use serde_json::json;

use super::*;

fn people(names: &[&str]) -> Vec<Approver> {
    names.iter().map(|n| Approver::parse(n).unwrap()).collect()
}

fn fields(errors: &[FieldError]) -> Vec<&str> {
    errors.iter().map(|e| e.field.as_str()).collect()
}

#[test]
fn reminders_are_read_within_their_bounds_and_name_the_field_out_of_them() {
    let ok = json!({"after_seconds": 60, "every_seconds": 300, "max": 20});
    assert_eq!(
        Reminders::parse(&ok, "reminders"),
        Ok(Reminders {
            after_seconds: 60,
            every_seconds: 300,
            max: 20
        })
    );
    for (bad, field) in [
        (
            json!({"after_seconds": 59, "every_seconds": 300, "max": 1}),
            "reminders.after_seconds",
        ),
        (
            json!({"after_seconds": 60, "every_seconds": 299, "max": 1}),
            "reminders.every_seconds",
        ),
        (
            json!({"after_seconds": 60, "every_seconds": 300, "max": 0}),
            "reminders.max",
        ),
        (
            json!({"after_seconds": 60, "every_seconds": 300, "max": 21}),
            "reminders.max",
        ),
        (
            json!({"after_seconds": 60.5, "every_seconds": 300, "max": 1}),
            "reminders.after_seconds",
        ),
        (
            json!({"after_seconds": 60, "every_seconds": 300}),
            "reminders.max",
        ),
        (
            json!({"after_seconds": 60, "every_seconds": 300, "max": 1, "x": 1}),
            "reminders.x",
        ),
        (json!([60, 300, 1]), "reminders"),
    ] {
        let errors = Reminders::parse(&bad, "reminders").unwrap_err();
        assert_eq!(fields(&errors), [field], "{bad}");
    }
}

#[test]
fn reminder_n_falls_due_after_then_every_and_never_past_max() {
    let r = Reminders {
        after_seconds: 600,
        every_seconds: 3_600,
        max: 3,
    };
    assert_eq!(r.due(1_000, 0), None);
    assert_eq!(r.due(1_000, 1), Some(1_600));
    assert_eq!(r.due(1_000, 2), Some(5_200));
    assert_eq!(r.due(1_000, 3), Some(8_800));
    assert_eq!(r.due(1_000, 4), None, "max respected");
    let huge = Reminders {
        after_seconds: i64::MAX,
        every_seconds: 300,
        max: 2,
    };
    assert_eq!(huge.due(1, 1), None, "no overflow");
}

#[test]
fn escalation_steps_are_checked_like_any_approver() {
    let approvers = people(&["alice@example.com", "bob@example.com"]);
    let requester = Approver::parse("ci@acme").unwrap();
    let policy = Policy::single_decision(&approvers);
    let parse =
        |value: serde_json::Value| parse_escalation(&value, &approvers, Some(&policy), &requester);
    let steps = parse(json!([
        {"after_seconds": 3600, "approvers": ["lead@example.com"]},
        {"after_seconds": 7200, "approvers": ["director@example.com", "vp@example.com"], "rule": "approvers"},
    ]))
    .unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[1].rule.as_deref(), Some("approvers"));
    assert_eq!(steps[1].approvers.len(), 2);

    let invalid = |value: serde_json::Value| match parse(value) {
        Err(PolicyRefusal::Invalid(errors)) => {
            errors.into_iter().map(|e| e.field).collect::<Vec<_>>()
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(invalid(json!([])), ["escalation"]);
    let four = json!({"after_seconds": 60, "approvers": ["x@example.com"]});
    assert_eq!(invalid(json!([four, four, four, four])), ["escalation"]);
    assert_eq!(
        invalid(json!([{"after_seconds": 59, "approvers": ["lead@example.com"]}])),
        ["escalation[0].after_seconds"]
    );
    assert_eq!(
        invalid(json!([
            {"after_seconds": 600, "approvers": ["lead@example.com"]},
            {"after_seconds": 600, "approvers": ["director@example.com"]},
        ])),
        ["escalation[1].after_seconds"],
        "times increase"
    );
    assert_eq!(
        invalid(json!([
            {"after_seconds": 600, "approvers": ["lead@example.com"]},
            {"after_seconds": 900, "approvers": ["Lead@Example.com"]},
        ])),
        ["escalation[1].approvers[0]"],
        "one person in one step, by identity"
    );
    assert_eq!(
        invalid(json!([{"after_seconds": 600, "approvers": ["Bob@Example.com"]}])),
        ["escalation[0].approvers[0]"],
        "an approver already listed joins nothing"
    );
    assert_eq!(
        invalid(json!([{"after_seconds": 600, "approvers": ["lead@example.com"], "rule": "nope"}])),
        ["escalation[0].rule"]
    );
    assert_eq!(
        invalid(json!([{"after_seconds": 600, "approvers": []}])),
        ["escalation[0].approvers"]
    );
    assert_eq!(
        invalid(json!([{"after_seconds": 600, "approvers": ["lead@example.com"], "when": 1}])),
        ["escalation[0].when"]
    );
    let many: Vec<String> = (0..19).map(|i| format!("p{i}@example.com")).collect();
    assert_eq!(
        invalid(json!([{"after_seconds": 600, "approvers": many}])),
        ["escalation"],
        "20 people at most, the steps' included"
    );
    match parse(json!([{"after_seconds": 600, "approvers": ["CI@acme"]}])) {
        Err(PolicyRefusal::Unsatisfiable(errors)) => {
            assert_eq!(fields(&errors), ["escalation[0].approvers[0]"]);
        }
        other => panic!("the requester in a step: {other:?}"),
    }
}

#[test]
fn the_next_due_is_the_earliest_of_reminder_step_and_expiry() {
    let reminders = Reminders {
        after_seconds: 600,
        every_seconds: 600,
        max: 3,
    };
    let steps = vec![EscalationStep {
        after_seconds: 1_200,
        approvers: people(&["lead@example.com"]),
        rule: None,
    }];
    let next =
        |reminded, escalated| next_due(0, 2_000, Some(&reminders), reminded, &steps, escalated);
    assert_eq!(next(0, 0), (Next::Reminder(1), 600));
    // Reminder 2 and step 1 both at 1 200: the step first, so the reminder includes the lead.
    assert_eq!(next(1, 0), (Next::Escalation(1), 1_200));
    assert_eq!(next(1, 1), (Next::Reminder(2), 1_200));
    assert_eq!(next(2, 1), (Next::Reminder(3), 1_800));
    // Reminder 4 would be past max; then the expiry.
    assert_eq!(next(3, 1), (Next::Expiry, 2_000));
    // Nothing configured: the expiry, as before.
    assert_eq!(next_due(0, 2_000, None, 0, &[], 0), (Next::Expiry, 2_000));
    // A reminder at or after the expiry gives way to it.
    assert_eq!(
        next_due(0, 600, Some(&reminders), 0, &[], 0),
        (Next::Expiry, 600)
    );
}

#[test]
fn a_late_sweep_sends_the_latest_reminder_due_but_never_one_past_a_step_due_before_it() {
    let stall = Stall {
        reminders: Some(Reminders {
            after_seconds: 60,
            every_seconds: 300,
            max: 5,
        }),
        reminded: 0,
        escalation: vec![EscalationStep {
            after_seconds: 700,
            approvers: people(&["lead@example.com"]),
            rule: None,
        }],
        escalated: 0,
    };
    // Reminders at 60, 360, 660, 960, 1260; the step at 700; expiry at 5_000.
    assert_eq!(stall.due_at(0, 5_000, 59), None);
    assert_eq!(stall.due_at(0, 5_000, 400), Some(Next::Reminder(2)));
    assert_eq!(
        stall.due_at(0, 5_000, 1_000),
        Some(Next::Reminder(3)),
        "660 is due, 960 comes after the step at 700"
    );
    let reminded = Stall {
        reminded: 3,
        ..stall.clone()
    };
    assert_eq!(reminded.due_at(0, 5_000, 1_000), Some(Next::Escalation(1)));
    let escalated = Stall {
        escalated: 1,
        ..reminded
    };
    assert_eq!(escalated.due_at(0, 5_000, 1_000), Some(Next::Reminder(4)));
    assert_eq!(
        escalated.due_at(0, 900, 899),
        None,
        "nothing left before the expiry"
    );
    assert_eq!(
        stall.due_at(0, 300, 300),
        None,
        "the expiry's, not the sweep's"
    );
}

#[test]
fn a_step_joins_the_rule_it_names_or_every_rule_once() {
    let policy = Policy {
        rules: vec![
            super::super::Rule {
                name: "eng".into(),
                approvers: people(&["alice@example.com"]),
                min_approvals: 1,
                group: None,
            },
            super::super::Rule {
                name: "sec".into(),
                approvers: people(&["bob@example.com"]),
                min_approvals: 1,
                group: None,
            },
        ],
    };
    let steps = vec![
        EscalationStep {
            after_seconds: 60,
            approvers: people(&["lead@example.com"]),
            rule: Some("sec".into()),
        },
        EscalationStep {
            after_seconds: 120,
            approvers: people(&["vp@example.com"]),
            rule: None,
        },
    ];
    let joined = joined(&policy, &steps);
    let names = |i: usize| -> Vec<&str> {
        joined.rules[i]
            .approvers
            .iter()
            .map(Approver::as_str)
            .collect()
    };
    assert_eq!(names(0), ["alice@example.com", "vp@example.com"]);
    assert_eq!(
        names(1),
        ["bob@example.com", "lead@example.com", "vp@example.com"]
    );
    assert_eq!(
        super::joined(&joined, &steps),
        joined,
        "joining again adds no one"
    );
    assert_eq!(joined.rules[1].min_approvals, 1, "min_approvals unchanged");
}

/// Review of v6, finding 12: a reminder asks those who have not voted — and a person who cast
/// their one vote in someone else's place has voted (the store would refuse them another).
#[test]
fn a_reminder_skips_whoever_voted_in_someone_elses_place() {
    let mut approval = crate::domain::approval::tests::pending(1_000);
    approval.approvers = people(&["alice", "bob", "carol"]);
    approval.votes.push(crate::domain::Decision {
        outcome: crate::domain::Outcome::Approved,
        approver: people(&["alice"])[0].clone(),
        decided_at: 5,
        channel: crate::domain::Channel::Api,
        comment: None,
        webhook_event_id: None,
        key_id: None,
        signed_in: None,
        by: Some(people(&["bob"])[0].clone()),
        delegation_set_by: None,
        passkey: None,
    });
    let waiting: Vec<&str> = approval.waiting_on().iter().map(|a| a.as_str()).collect();
    assert_eq!(waiting, ["carol"], "alice's place is filled, bob has voted");
}
