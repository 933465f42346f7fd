//! Approvals that don't stall (docs/API.md "Reminders and escalation"): reminders to the
//! approvers who have not voted and escalation steps that add approvers, each sent or applied
//! once by a conditional write however many sweeps run at once — driven by the injected clock,
//! through the real router, stream, queue and notifier against the local AWS.

use countersign::Function;
use countersign::jobs::Expirer;
use countersign_tests::{
    ALICE, BOB, CAROL, CreateBody, DAVE, KEY_A, TestApp, decision_body, events_of_type, eventually,
    execute_key,
};
use futures::future::join_all;
use serde_json::{Value, json};

/// Five sweeps at once, as five overlapping scheduled invocations would run: (reminders sent,
/// steps applied) over all of them.
async fn five_sweeps(t: &TestApp) -> (usize, usize) {
    let runs = (0..5).map(|_| async {
        let expirer = Expirer::new(t.function(Function::Sweeper));
        expirer.run().await.expect("the sweep succeeds")
    });
    join_all(runs).await.iter().fold((0, 0), |(r, e), report| {
        (r + report.reminded, e + report.escalated)
    })
}

/// The notifier's calls for `id` with `reason` number `number`: (key, approver), sorted.
fn notifications(t: &TestApp, id: &str, reason: &str, number: u64) -> Vec<(String, String)> {
    let mut calls: Vec<(String, String)> = t
        .downstream()
        .calls_to("/notify")
        .into_iter()
        .filter(|(_, body)| {
            body["approval_id"] == id && body["reason"] == reason && body["number"] == number
        })
        .map(|(key, body)| {
            (
                key,
                body["approver"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    calls.sort();
    calls
}

fn keys_for(id: &str, reason: &str, number: u64, approvers: &[&str]) -> Vec<(String, String)> {
    approvers
        .iter()
        .map(|a| (format!("{id}:{reason}:{number}:{a}"), (*a).to_owned()))
        .collect()
}

/// The runner's own sweeper runs once at start, then not for an hour: the test's sweeps are
/// the only ones.
async fn start() -> TestApp {
    TestApp::start_jobs(&[("SWEEP_INTERVAL_SECONDS", "3600")]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_reminder_reaches_whoever_has_not_voted_once_under_five_sweeps_and_stops_at_the_decision()
 {
    let t = start().await;
    let body = CreateBody::new("deploy", &[ALICE, BOB, CAROL])
        .policy(json!({"rules": [{"name": "oncall", "approvers": [ALICE, BOB, CAROL], "min_approvals": 2}]}))
        .expires_in(3_600)
        .with("reminders", json!({"after_seconds": 60, "every_seconds": 300, "max": 3}))
        .to_string();
    let id = t.create_ok(KEY_A, "remind-1", &body).await;
    let created = t.get(KEY_A, &id).await.json();
    assert_eq!(
        created["reminders"],
        json!({"after_seconds": 60, "every_seconds": 300, "max": 3, "sent": 0})
    );
    let item = t.approval_item(&id).await;
    assert_eq!(
        countersign_tests::attr_s(&item, "due_kind"),
        "reminder",
        "due first for its reminder"
    );
    t.approve(&id, ALICE).await;

    assert_eq!(five_sweeps(&t).await, (0, 0), "nothing due before 60 s");
    t.clock.advance(61);
    assert_eq!(five_sweeps(&t).await, (1, 0), "one write won");
    let expected = keys_for(&id, "reminder", 1, &[BOB, CAROL]);
    eventually("bob and carol are reminded", || async {
        notifications(&t, &id, "reminder", 1) == expected
    })
    .await;
    assert_eq!(five_sweeps(&t).await, (0, 0), "sent: not again");

    t.clock.advance(300);
    assert_eq!(five_sweeps(&t).await, (1, 0));
    let expected = keys_for(&id, "reminder", 2, &[BOB, CAROL]);
    eventually("the second reminder", || async {
        notifications(&t, &id, "reminder", 2) == expected
    })
    .await;

    // Bob's vote decides it: the third reminder is never sent.
    t.approve(&id, BOB).await;
    t.clock.advance(300);
    assert_eq!(five_sweeps(&t).await, (0, 0), "a decision stops the rest");
    let done = t
        .wait_for_execution(KEY_A, &id, std::time::Duration::from_secs(30))
        .await;
    assert_eq!(done["reminders"]["sent"], 2);
    assert!(notifications(&t, &id, "reminder", 3).is_empty());
    for (key, _) in notifications(&t, &id, "reminder", 1)
        .into_iter()
        .chain(notifications(&t, &id, "reminder", 2))
    {
        assert_eq!(
            (t.downstream().calls(&key), t.downstream().effects(&key)),
            (1, 1),
            "{key}"
        );
    }
    let item = t.approval_item(&id).await;
    assert!(!item.contains_key("due_kind"), "nothing due once decided");

    let events = t.trail(KEY_A, &id, 100).await;
    let reminded = events_of_type(&events, "approval.reminded");
    assert_eq!(reminded.len(), 2, "{events:#?}");
    assert_eq!(reminded[0]["data"]["number"], 1);
    assert_eq!(reminded[0]["data"]["whom"], json!([BOB, CAROL]));
    assert_eq!(reminded[1]["data"]["number"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn max_is_respected_then_the_approval_waits_for_its_expiry_and_a_late_sweep_sends_one() {
    let t = start().await;
    let body = CreateBody::new("deploy", &[ALICE, BOB])
        .expires_in(7_200)
        .with(
            "reminders",
            json!({"after_seconds": 60, "every_seconds": 300, "max": 2}),
        )
        .to_string();
    let id = t.create_ok(KEY_A, "remind-max", &body).await;
    // Asleep for 20 minutes: the late sweep sends the latest reminder fallen due (2), once.
    t.clock.advance(1_200);
    assert_eq!(five_sweeps(&t).await, (1, 0));
    eventually("the latest reminder, to both", || async {
        notifications(&t, &id, "reminder", 2) == keys_for(&id, "reminder", 2, &[ALICE, BOB])
    })
    .await;
    assert!(notifications(&t, &id, "reminder", 1).is_empty(), "no burst");
    t.clock.advance(3_000);
    assert_eq!(five_sweeps(&t).await, (0, 0), "max 2");
    let item = t.approval_item(&id).await;
    assert_eq!(countersign_tests::attr_s(&item, "due_kind"), "expiry");

    // The action type's default applies when the create names none.
    let defaulted = start_with_default().await;
    let id = defaulted
        .create_ok(
            KEY_A,
            "remind-default",
            &CreateBody::new("deploy", &[ALICE]).to_string(),
        )
        .await;
    let view = defaulted.get(KEY_A, &id).await.json();
    assert_eq!(view["reminders"]["every_seconds"], 900);
    let own = defaulted
        .create_ok(
            KEY_A,
            "remind-own",
            &CreateBody::new("deploy", &[ALICE])
                .with(
                    "reminders",
                    json!({"after_seconds": 120, "every_seconds": 600, "max": 1}),
                )
                .to_string(),
        )
        .await;
    let view = defaulted.get(KEY_A, &own).await.json();
    assert_eq!(
        view["reminders"]["every_seconds"], 600,
        "the request's own wins"
    );
}

async fn start_with_default() -> TestApp {
    let targets = json!({
        "deploy": {"url": "https://deploy.example.com/run", "idempotent": true,
                   "approval": {"reminders": {"after_seconds": 300, "every_seconds": 900, "max": 4}}},
    })
    .to_string();
    TestApp::start_with(&[("ACTION_TARGETS", &targets)]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_step_adds_a_lead_once_whose_vote_completes_the_quorum_and_it_runs_once() {
    let t = start().await;
    let body = CreateBody::new("deploy", &[ALICE, BOB])
        .payload(json!({"service": "api"}))
        .policy(json!({"rules": [{"name": "pair", "approvers": [ALICE, BOB], "min_approvals": 2}]}))
        .expires_in(86_400)
        .with(
            "escalation",
            json!([{"after_seconds": 600, "approvers": [CAROL]},
                   {"after_seconds": 1200, "approvers": [DAVE], "rule": "pair"}]),
        )
        .to_string();
    let id = t.create_ok(KEY_A, "escalate-1", &body).await;
    t.approve(&id, ALICE).await;
    // Not yet an approver.
    t.decide(
        countersign_tests::DECIDER_A,
        &id,
        decision_body("approve", CAROL),
    )
    .await
    .assert_problem(403, "not_an_approver");

    t.clock.advance(601);
    assert_eq!(five_sweeps(&t).await, (0, 1), "one step, once");
    eventually("carol is told", || async {
        notifications(&t, &id, "escalation", 1) == keys_for(&id, "escalation", 1, &[CAROL])
    })
    .await;
    assert_eq!(five_sweeps(&t).await, (0, 0));
    let view = t.get(KEY_A, &id).await.json();
    assert_eq!(view["approvers"], json!([ALICE, BOB, CAROL]));
    assert_eq!(
        view["policy"]["rules"][0]["approvers"],
        json!([ALICE, BOB, CAROL])
    );
    assert_eq!(view["policy"]["rules"][0]["min_approvals"], 2, "unchanged");
    assert_eq!(view["escalation"][0]["applied"], true);
    assert_eq!(view["escalation"][1]["applied"], false);
    // Listed under her own facet: her listing (and inbox) has it.
    eventually("carol's listing has it", || async {
        let page = t
            .get_path(
                KEY_A,
                &format!("/approvals?approver={CAROL}&status=pending"),
            )
            .await
            .json();
        page["approvals"]
            .as_array()
            .is_some_and(|a| a.iter().any(|a| a["id"] == id.as_str()))
    })
    .await;

    let page = t.send(t.http.get(t.review_link(&id, CAROL))).await.text();
    assert!(
        page.contains(&format!("{CAROL} (you)")) && page.contains("(added by escalation step 1)"),
        "{page}"
    );

    let decided = t.approve(&id, CAROL).await;
    assert_eq!(decided["status"], "approved", "{decided}");
    let done = t
        .wait_for_execution(KEY_A, &id, std::time::Duration::from_secs(30))
        .await;
    assert_eq!(done["execution"]["status"], "succeeded");
    let key = execute_key("escalate-1", &id);
    assert_eq!(t.downstream().effects(&key), 1);
    t.clock.advance(1_000);
    assert_eq!(
        five_sweeps(&t).await,
        (0, 0),
        "decided: step 2 never applies"
    );
    assert!(notifications(&t, &id, "escalation", 2).is_empty());

    let events = t.trail(KEY_A, &id, 100).await;
    let escalated = events_of_type(&events, "approval.escalated");
    assert_eq!(escalated.len(), 1, "{events:#?}");
    assert_eq!(escalated[0]["data"]["approvers"], json!([CAROL]));
    assert_eq!(escalated[0]["data"]["step"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_reminders_and_escalation_are_refused_naming_the_field_and_nothing_is_written() {
    let t = TestApp::start().await;
    let with = |field: &str, value: Value| {
        CreateBody::new("deploy", &[ALICE, BOB])
            .with(field, value)
            .to_string()
    };
    for (n, (body, status, code, field)) in [
        (
            with(
                "escalation",
                json!([{"after_seconds": 600, "approvers": ["tenant-a"]}]),
            ),
            400,
            "policy_unsatisfiable",
            "escalation[0].approvers[0]",
        ),
        (
            with(
                "escalation",
                json!([{"after_seconds": 600, "approvers": [BOB]}]),
            ),
            400,
            "invalid_request",
            "escalation[0].approvers[0]",
        ),
        (
            with(
                "escalation",
                json!([{"after_seconds": 30, "approvers": [CAROL]}]),
            ),
            400,
            "invalid_request",
            "escalation[0].after_seconds",
        ),
        (
            with(
                "reminders",
                json!({"after_seconds": 60, "every_seconds": 60, "max": 2}),
            ),
            400,
            "invalid_request",
            "reminders.every_seconds",
        ),
        (
            with(
                "reminders",
                json!({"after_seconds": 60, "every_seconds": 300, "max": 2, "on": 1}),
            ),
            400,
            "invalid_request",
            "reminders.on",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let reply = t.create(KEY_A, &format!("bad-{n}"), &body).await;
        reply.assert_problem(status, code);
        let problem = reply.json();
        let fields: Vec<&str> = problem["errors"]
            .as_array()
            .expect("errors")
            .iter()
            .filter_map(|e| e["field"].as_str())
            .collect();
        assert!(fields.contains(&field), "{field} in {}", reply.text());
    }
    let listed = t.get_path(KEY_A, "/approvals?status=pending").await.json();
    assert_eq!(listed["approvals"], json!([]), "nothing written");
}

/// In Slack, the channel that first told them: a step redraws the message with the lead among
/// the approvers and replies in its thread mentioning them; a reminder replies mentioning whoever
/// has not voted. Each reply once, under five sweeps.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slack_replies_in_the_thread_mentioning_whom_a_step_or_a_reminder_concerns() {
    use countersign_tests::slack::{U_BOB, U_CAROL};
    let (t, slack) = TestApp::start_slack(&[("SWEEP_INTERVAL_SECONDS", "3600")]).await;
    let body = CreateBody::new("deploy", &[ALICE, BOB])
        .context(json!({"summary": "Deploy api"}))
        .policy(json!({"rules": [{"name": "pair", "approvers": [ALICE, BOB], "min_approvals": 2}]}))
        .expires_in(86_400)
        .with(
            "reminders",
            json!({"after_seconds": 900, "every_seconds": 3600, "max": 1}),
        )
        .with(
            "escalation",
            json!([{"after_seconds": 600, "approvers": [CAROL]}]),
        )
        .to_string();
    let id = t.create_ok(KEY_A, "slack-stall", &body).await;
    let message = slack
        .wait_for_message(&id, std::time::Duration::from_secs(30), |m| m.has_buttons())
        .await;
    t.approve(&id, ALICE).await;
    let replies = || {
        slack
            .calls("chat.postMessage")
            .into_iter()
            .filter(|c| c.body["thread_ts"] == message.ts.as_str())
            .map(|c| c.body["text"].as_str().unwrap_or_default().to_owned())
            .collect::<Vec<_>>()
    };

    t.clock.advance(601);
    assert_eq!(five_sweeps(&t).await, (0, 1));
    eventually("the step's reply", || async { replies().len() == 1 }).await;
    assert_eq!(
        replies()[0],
        format!("Escalated (step 1): <@{U_CAROL}> can now decide.")
    );
    slack
        .wait_for_message(&id, std::time::Duration::from_secs(30), |m| {
            m.shown().contains(CAROL)
        })
        .await;

    t.clock.advance(300);
    assert_eq!(five_sweeps(&t).await, (1, 0));
    eventually("the reminder's reply", || async { replies().len() == 2 }).await;
    assert_eq!(
        replies()[1],
        format!("Reminder 1: still waiting on <@{U_BOB}>, <@{U_CAROL}>.")
    );
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(replies().len(), 2, "each once");
    let events = t.trail(KEY_A, &id, 100).await;
    let sent = events_of_type(&events, "notification.sent");
    assert!(
        sent.iter()
            .any(|e| e["data"]["reason"] == "reminder" && e["actor"]["channel"] == "slack_reply"),
        "{events:#?}"
    );
}

/// Round trips: a sweep reads what is due (one query per partition, the approvals in one
/// batch) and touches each approval with one conditional write; with nothing due, only the
/// queries.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sweep_is_one_conditional_write_per_approval_it_moves_on() {
    let t = TestApp::start().await;
    let reminded = CreateBody::new("deploy", &[ALICE, BOB])
        .with(
            "reminders",
            json!({"after_seconds": 60, "every_seconds": 300, "max": 2}),
        )
        .to_string();
    let escalated = CreateBody::new("deploy", &[ALICE])
        .with(
            "escalation",
            json!([{"after_seconds": 60, "approvers": [CAROL]}]),
        )
        .to_string();
    for (n, body) in [&reminded, &reminded, &escalated].into_iter().enumerate() {
        t.create_ok(KEY_A, &format!("trips-{n}"), body).await;
    }
    let sweep = || async {
        Expirer::new(t.function(Function::Sweeper))
            .run()
            .await
            .expect("the sweep succeeds")
    };
    t.calls.take();
    sweep().await;
    assert_eq!(
        t.calls.take(),
        ["Query", "Query", "Query"],
        "nothing due: the expiry, escalation and reminder partitions"
    );
    t.clock.advance(61);
    let report = sweep().await;
    assert_eq!((report.reminded, report.escalated), (2, 1));
    assert_eq!(
        t.calls.take(),
        [
            "Query",
            "Query",
            "Query",
            "BatchGetItem",
            "UpdateItem",
            "UpdateItem",
            "UpdateItem"
        ]
    );
}
