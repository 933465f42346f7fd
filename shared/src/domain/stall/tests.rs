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
