use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::payload::decimal_text;
use super::*;
use crate::domain::{Approver, Policy};

fn who(name: &str) -> Approver {
    Approver::parse(&format!("{name}@example.com")).unwrap()
}

fn group(name: &str) -> GroupName {
    GroupName::parse(name).unwrap()
}

fn groups(entries: &[(&str, &[&str])]) -> Groups {
    Groups::new(
        entries
            .iter()
            .map(|(name, members)| (group(name), members.iter().map(|m| who(m)).collect()))
            .collect::<BTreeMap<_, _>>(),
    )
}

fn payload(value: Value) -> Map<String, Value> {
    value.as_object().cloned().unwrap_or_default()
}

/// An ask of `action` with `payload` by `ci`.
fn ask<'a>(action: &'a str, payload: &'a Map<String, Value>) -> AskRequest<'a> {
    AskRequest {
        tenant: "acme",
        requester: "ci@acme",
        roles: vec!["requester"],
        action_type: action,
        payload,
        summary: "",
        approvers: vec![],
        channel: "api",
        resume: "",
        expires_in_seconds: 86_400,
    }
}

const DEPLOYS: &str = r#"
@id("prod-deploys")
@require("sre:2, security:1")
permit(principal, action == Countersign::Action::"deploy", resource)
when { context.payload.env == "prod" };

@id("staging-deploys")
@require("sre:1")
permit(principal, action == Countersign::Action::"deploy", resource)
when { context.payload.env == "staging" };

@id("small-refunds")
@require("none")
permit(principal, action == Countersign::Action::"refund", resource)
when { context.payload.amount_cents <= 5000 };

@id("large-refunds")
@require("finance:2")
permit(principal, action == Countersign::Action::"refund", resource)
when { context.payload.amount_cents > 5000 };

@id("never-drop-a-table")
forbid(principal, action == Countersign::Action::"agent", resource)
when { context.payload has input && context.payload.input has command
       && context.payload.input.command like "*DROP TABLE*" };

@id("agents")
@require("sre:1")
permit(principal, action == Countersign::Action::"agent", resource);
"#;

fn org() -> Groups {
    groups(&[
        ("sre", &["ana", "bo", "cy"]),
        ("security", &["dee"]),
        ("finance", &["fay", "gus"]),
    ])
}

#[test]
fn payload_numbers_are_longs_or_exact_decimals_and_the_rest_is_left_out() {
    assert_eq!(decimal_text("1.5").as_deref(), Some("1.5"));
    assert_eq!(decimal_text("-0.25").as_deref(), Some("-0.25"));
    assert_eq!(decimal_text("12.3400").as_deref(), Some("12.34"));
    assert_eq!(decimal_text("3.0").as_deref(), Some("3.0"));
    assert_eq!(decimal_text("1e-4").as_deref(), Some("0.0001"));
    assert_eq!(decimal_text("1.5e3").as_deref(), Some("1500.0"));
    assert_eq!(
        decimal_text("922337203685477.5807").as_deref(),
        Some("922337203685477.5807")
    );
    for inexact in [
        "0.00001",
        "1e-7",
        "1.5e300",
        "922337203685477.5808",
        "1e19",
        "x",
        "",
    ] {
        assert_eq!(decimal_text(inexact), None, "{inexact}");
    }
    // Through the whole request: nested records, arrays as sets, a number that fits neither
    // left out (reading it errors: fail closed), `null` left out, `__entity` a mere record.
    let set = PolicySet::parse(
        r#"
        @id("nested") @require("sre:1")
        permit(principal, action, resource) when {
            context.payload.build == 1042 && context.payload.order.total == decimal("12.5")
            && context.payload.tags.contains("hotfix") && context.payload.tags.contains(7)
            && context.payload.meta.__entity == "x"
            && !(context.payload has note)
        };
        @id("reads-the-tiny-number") forbid(principal, action, resource)
        when { context.payload has tiny && context.payload.tiny.greaterThan(decimal("0.0")) };
        @id("reads-it-without-has") forbid(principal, action, resource)
        when { context.payload.huge.greaterThan(decimal("0.0")) };
        "#,
        None,
    )
    .unwrap();
    let sent = payload(json!({
        "build": 1042, "order": {"total": 12.5}, "tags": ["hotfix", 7, null], "note": null,
        "meta": {"__entity": "x"}, "tiny": 0.00001, "huge": 1.5e300,
    }));
    match set.evaluate(&ask("deploy", &sent), &org()) {
        Evaluation::Error { errors } => {
            assert_eq!(errors.len(), 1, "{errors:?}");
            assert_eq!(errors[0].0, "reads-it-without-has");
        }
        other => panic!("the left-out number must error: {other:?}"),
    }
    let fine = payload(json!({
        "build": 1042, "order": {"total": 12.5}, "tags": ["hotfix", 7, null],
        "meta": {"__entity": "x"}, "tiny": 0.00001, "huge": 2.0,
    }));
    assert!(
        matches!(set.evaluate(&ask("deploy", &fine), &org()), Evaluation::Forbidden { ref policies } if policies == &["reads-it-without-has"]),
        "2.0 is a decimal: {:?}",
        set.evaluate(&ask("deploy", &fine), &org())
    );
}

#[test]
fn the_three_worked_examples_decide_as_the_guide_says() {
    let set = PolicySet::parse(DEPLOYS, None).unwrap();
    let prod = payload(json!({"env": "prod", "service": "api"}));
    assert_eq!(
        set.evaluate(&ask("deploy", &prod), &org()),
        Evaluation::Required {
            policies: vec!["prod-deploys".into()],
            groups: vec![(group("sre"), 2), (group("security"), 1)],
            assurance: None,
        }
    );
    let small = payload(json!({"amount_cents": 4250}));
    assert_eq!(
        set.evaluate(&ask("refund", &small), &org()),
        Evaluation::Auto {
            policies: vec!["small-refunds".into()]
        }
    );
    // 42.5 is a decimal: `<=` compares Longs only, so the policy errors — fail closed, as it
    // should (a policy reading decimals compares them with `.lessThanOrEqual(…)`).
    let decimal = payload(json!({"amount_cents": 42.5}));
    assert!(matches!(
        set.evaluate(&ask("refund", &decimal), &org()),
        Evaluation::Error { .. }
    ));
    // No amount at all: both refunds' permits read it and error.
    assert!(matches!(
        set.evaluate(&ask("refund", &Map::new()), &org()),
        Evaluation::Error { .. }
    ));
    let large = payload(json!({"amount_cents": 12000}));
    assert_eq!(
        set.evaluate(&ask("refund", &large), &org()),
        Evaluation::Required {
            policies: vec!["large-refunds".into()],
            groups: vec![(group("finance"), 2)],
            assurance: None,
        }
    );
    let drop =
        payload(json!({"tool_name": "Bash", "input": {"command": "psql -c 'DROP TABLE users'"}}));
    assert_eq!(
        set.evaluate(&ask("agent", &drop), &org()),
        Evaluation::Forbidden {
            policies: vec!["never-drop-a-table".into()]
        }
    );
    let ls = payload(json!({"tool_name": "Bash", "input": {"command": "ls"}}));
    assert!(matches!(
        set.evaluate(&ask("agent", &ls), &org()),
        Evaluation::Required { .. }
    ));
    // Nothing permits an action no policy names: Cedar's default deny.
    assert_eq!(
        set.evaluate(&ask("wire_transfer", &ls), &org()),
        Evaluation::Forbidden { policies: vec![] }
    );
}

#[test]
fn matching_permits_merge_a_group_twice_keeps_the_larger_and_none_yields_to_a_requirement() {
    let set = PolicySet::parse(
        r#"
        @id("a") @require("sre:1, security:1") permit(principal, action, resource);
        @id("b") @require("sre:2") permit(principal, action, resource);
        @id("c") @require("none") permit(principal, action, resource);
        "#,
        None,
    )
    .unwrap();
    let empty = Map::new();
    assert_eq!(
        set.evaluate(&ask("deploy", &empty), &org()),
        Evaluation::Required {
            policies: vec!["a".into(), "b".into(), "c".into()],
            groups: vec![(group("sre"), 2), (group("security"), 1)],
            assurance: None,
        }
    );
    let only_none = PolicySet::parse(
        r#"@id("c") @require("none") permit(principal, action, resource);
           @id("d") @require("none") permit(principal, action, resource);"#,
        None,
    )
    .unwrap();
    assert!(matches!(
        only_none.evaluate(&ask("deploy", &empty), &org()),
        Evaluation::Auto { .. }
    ));
}

#[test]
fn any_error_fails_closed_whatever_it_is_in() {
    let empty = Map::new();
    let amount = payload(json!({"amount": "ten"}));
    // An erroring forbid: Cedar alone would answer Allow (the permit decides, the forbid is
    // skipped). Fail closed.
    let erroring_forbid = PolicySet::parse(
        r#"@id("ok") @require("sre:1") permit(principal, action, resource);
           @id("big") forbid(principal, action, resource) when { context.payload.amount > 1000 };"#,
        None,
    )
    .unwrap();
    assert_eq!(
        erroring_forbid.evaluate(&ask("deploy", &amount), &org()),
        Evaluation::Error {
            errors: vec![(
                "big".into(),
                erroring_forbid_error(&erroring_forbid, &amount)
            )]
        }
    );
    // An erroring permit: denied, never allowed by another.
    let erroring_permit = PolicySet::parse(
        r#"@id("ok") @require("sre:1") permit(principal, action, resource);
           @id("reads-missing") @require("none") permit(principal, action, resource) when { context.payload.missing == 1 };"#,
        None,
    )
    .unwrap();
    assert!(matches!(
        erroring_permit.evaluate(&ask("deploy", &empty), &org()),
        Evaluation::Error { ref errors } if errors[0].0 == "reads-missing"
    ));
    // A group the tenant does not have.
    let unknown = PolicySet::parse(
        r#"@id("ghosts") @require("ghosts:1") permit(principal, action, resource);"#,
        None,
    )
    .unwrap();
    assert!(matches!(
        unknown.evaluate(&ask("deploy", &empty), &org()),
        Evaluation::Error { ref errors } if errors[0].0 == "ghosts" && errors[0].1.contains("ghosts")
    ));
}

fn erroring_forbid_error(set: &PolicySet, amount: &Map<String, Value>) -> String {
    match set.evaluate(&ask("deploy", amount), &org()) {
        Evaluation::Error { errors } => errors[0].1.clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_push_refuses_a_set_without_ids_requirements_or_with_bad_annotations() {
    let refused = |text: &str| PolicySet::parse(text, None).unwrap_err().to_string();
    assert!(refused("permit(principal, action, resource);").contains("@id"));
    assert!(
        refused(r#"@id("a") permit(principal, action, resource);"#).contains("@require"),
        "a permit without @require"
    );
    let twice = r#"@id("a") @require("none") permit(principal, action, resource);
                   @id("a") @require("none") permit(principal, action, resource);"#;
    assert!(refused(twice).contains("another policy's"));
    for bad in [
        "",
        "sre",
        "sre:0",
        "sre:201",
        "Sre:1",
        "sre:1, sre:2",
        "sre:1,,x:1",
        "sre:two",
    ] {
        let text = format!("@id(\"a\") @require({bad:?}) permit(principal, action, resource);");
        assert!(refused(&text).contains("@require"), "{bad}");
    }
    assert!(
        refused(r#"@id("f") @require("none") forbid(principal, action, resource);"#)
            .contains("forbid requires nothing")
    );
    assert!(
        refused(r#"@id("p") @require("sre:1") @assurance("yubikey") permit(principal, action, resource);"#)
            .contains("@assurance")
    );
    assert!(
        refused(r#"@id("p") @require("none") @assurance("passkey") permit(principal, action, resource);"#)
            .contains("@assurance")
    );
    // Cedar's own message for what Cedar refuses.
    assert!(refused("permit(principal, action, resource").contains("unexpected"));
    assert!(refused("").contains("no policy"));
    let template =
        r#"@id("t") @require("none") permit(principal == ?principal, action, resource);"#;
    assert!(refused(template).contains("templates"));
    // With a schema, Cedar's validator in strict mode.
    let schema = base_schema(&["deploy"]);
    assert!(
        PolicySet::parse(
            DEPLOYS.split("@id(\"small-refunds\")").next().unwrap(),
            Some(&schema)
        )
        .is_err()
    );
    let valid = r#"@id("any-deploy") @require("sre:1")
        permit(principal, action == Countersign::Action::"deploy", resource)
        when { context.channel == "api" && principal.roles.contains("requester") };"#;
    PolicySet::parse(valid, Some(&schema)).unwrap();
    let mistyped = r#"@id("typo") @require("sre:1")
        permit(principal, action == Countersign::Action::"deploy", resource)
        when { context.chanel == "api" };"#;
    let refusal = PolicySet::parse(&format!("{valid}\n{mistyped}"), Some(&schema))
        .unwrap_err()
        .to_string();
    assert!(refusal.contains("validator"), "{refusal}");
    // Named by its @id, not by Cedar's position in the set (`policy1`).
    assert!(refusal.contains("for policy \"typo\""), "{refusal}");
    assert!(!refusal.contains("policy1"), "{refusal}");
}

#[test]
fn a_group_rule_leaves_out_the_requester_and_an_unmeetable_one_names_its_group() {
    let org = org();
    let ci = Approver::parse("ci@acme").unwrap();
    let (approvers, policy) =
        approval_rules(&[(group("sre"), 2)], &org, &who("ana"), &[], None).unwrap();
    assert_eq!(
        policy.rules[0].approvers,
        [who("bo"), who("cy")],
        "ana asked"
    );
    assert_eq!(approvers, [who("bo"), who("cy")]);
    match approval_rules(&[(group("sre"), 3)], &org, &who("ana"), &[], None) {
        Err(ApplyRefusal::Unsatisfiable(errors)) => assert!(errors[0].field.contains("sre")),
        other => panic!("{other:?}"),
    }
    // The requester's own rules beside the groups; a name taken by a group is refused.
    let own = Policy::parse(
        &json!({"rules": [{"name": "sre", "approvers": ["zed@example.com"], "min_approvals": 1}]}),
        &[who("zed")],
        &ci,
    )
    .unwrap();
    assert!(matches!(
        approval_rules(&[(group("sre"), 1)], &org, &ci, &[who("zed")], Some(&own)),
        Err(ApplyRefusal::Invalid(_))
    ));
}

proptest! {
    /// Nothing a requester sends — any approvers, any rules of its own — yields fewer required
    /// votes of any group than the deployment's policy alone: each required group is a rule of
    /// its own, with its k and only the group's members (less the requester), whatever else.
    #[test]
    fn no_requester_input_lowers_a_required_group(
        required in proptest::collection::btree_map(0usize..3, 1u32..3, 1..3),
        listed in proptest::collection::vec(0usize..8, 0..6),
        own in proptest::option::of(proptest::collection::vec((proptest::collection::vec(0usize..8, 1..4), 1u32..3), 1..3)),
        requester in 0usize..8,
    ) {
        let people: Vec<Approver> = (0..8).map(|i| who(&format!("p{i}"))).collect();
        let names = ["sre", "security", "finance"];
        let org = Groups::new(
            names.iter().enumerate()
                .map(|(g, n)| (group(n), people[g * 2..g * 2 + 3].to_vec()))
                .collect(),
        );
        let required: Vec<(GroupName, u32)> = required.iter().map(|(g, k)| (group(names[*g]), *k)).collect();
        let requester = people[requester].clone();
        let mut approvers: Vec<Approver> = Vec::new();
        for i in listed {
            if !approvers.contains(&people[i]) { approvers.push(people[i].clone()); }
        }
        let own = own.and_then(|rules| {
            let mut all = approvers.clone();
            let rules: Vec<Value> = rules.iter().enumerate().map(|(i, (members, min))| {
                let members: Vec<String> = members.iter().map(|m| people[*m].as_str().to_owned()).collect();
                for m in &members { let a = Approver::parse(m).unwrap(); if !all.contains(&a) { all.push(a); } }
                json!({"name": format!("mine{i}"), "approvers": members, "min_approvals": min})
            }).collect();
            approvers = all.clone();
            Policy::parse(&json!({"rules": rules}), &all, &requester).ok()
        });
        if let Ok((_, policy)) = approval_rules(&required, &org, &requester, &approvers, own.as_ref()) {
            for (g, k) in &required {
                let rule = policy.rules.iter().find(|r| r.group.as_ref() == Some(g));
                let rule = rule.expect("every required group has its rule");
                prop_assert_eq!(rule.min_approvals, *k);
                let members = org.get(g).unwrap();
                prop_assert!(rule.approvers.iter().all(|a| members.contains(a) && !a.same_identity(&requester)));
                prop_assert_eq!(rule.approvers.len(), members.iter().filter(|m| !m.same_identity(&requester)).count());
            }
            prop_assert_eq!(policy.rules.iter().filter(|r| r.group.is_some()).count(), required.len());
        }
    }
}
