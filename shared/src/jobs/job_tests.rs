//! The jobs each change makes, and their bodies on SQS.

use super::*;
use crate::domain::approval::tests::pending;
use crate::domain::{Approval, Approver, Channel, Decision, ExecutionStatus, Outcome, Status};
use crate::jobs::dispatch_policy::{
    callback_jobs, execute_job, github_job, jobs_for_change, slack_job,
};
use crate::jobs::job_body::sqs_allows;

fn decided(outcome: Outcome) -> Approval {
    let mut approval = pending(1_000);
    approval.status = outcome.status();
    approval.decision = Some(Decision {
        outcome,
        approver: Approver::parse("alice").unwrap(),
        decided_at: 5,
        channel: Channel::Api,
        comment: None,
        webhook_event_id: None,
        key_id: None,
        signed_in: None,
        by: None,
        delegation_set_by: None,
        passkey: None,
    });
    approval
}

#[test]
fn a_callbacks_two_outcomes_share_one_id_so_only_one_is_ever_stored() {
    use crate::domain::trail::events_for_change;
    let approval = pending(1_000);
    let events = events_for_change(None, Some(&approval), "p");
    let subscription = crate::config::Subscription {
        url: "http://x".into(),
        secrets: vec![crate::webhook::WebhookSecret::parse("whsec_c2VjcmV0").unwrap()],
        types: None,
    };
    let jobs = callback_jobs(&approval, &events, Some(&subscription));
    let job = &jobs[0];
    let delivered = job.ended_event(&Completion::Succeeded, 7).unwrap();
    let failed = job
        .ended_event(&Completion::Failed("HTTP 410".into()), 7)
        .unwrap();
    assert_eq!(delivered.kind, EventType::CallbackDelivered);
    assert_eq!(failed.kind, EventType::CallbackFailed);
    assert_eq!(delivered.id, failed.id);
    assert_eq!(job.outcome_id().as_deref(), Some(delivered.id.as_str()));
    // A retry makes no event: nothing is written until the callback has its outcome.
    assert!(
        job.ended_event(&Completion::RetryWait("HTTP 503".into()), 7)
            .is_none()
    );
    // Notifications keep their ledger item.
    let notify = &jobs_for_change(None, Some(&approval), "p")[0];
    assert_eq!(notify.outcome_id(), None);
}

#[test]
fn a_new_approval_notifies_its_approvers_in_one_job_each_call_with_its_own_key() {
    let new = pending(1_000);
    let jobs = jobs_for_change(None, Some(&new), "");
    let ids: Vec<_> = jobs.iter().map(Job::id).collect();
    assert_eq!(ids, [format!("{}#notify", new.id)]);
    assert_eq!(jobs[0].ledger().pk(), format!("{}#notify", new.id));
    let Job::Notify(job) = &jobs[0] else {
        panic!("not a notify job")
    };
    let approvers: Vec<&str> = job.approvers.iter().map(Approver::as_str).collect();
    assert_eq!(approvers, ["alice", "bob"]);
    assert_eq!(
        job.key_for(&job.approvers[0]),
        format!("{}:notify:alice", new.id)
    );
    let odd = Approver::from_stored("José \u{FFFF}%").unwrap();
    let key = job.key_for(&odd);
    assert_eq!(key, format!("{}:notify:Jos%C3%A9%20%EF%BF%BF%25", new.id));
    assert!(axum::http::HeaderValue::from_str(&key).is_ok());
}

/// A notify job queued before v5 named one approver and had a ledger item of its own: read from
/// the queue after an upgrade, it keeps both.
#[test]
fn a_notify_job_queued_before_v5_keeps_its_approver_and_its_ledger_item() {
    let new = pending(1_000);
    let queued_before = format!(
        r#"{{"kind": "notify", "approval_id": "{}", "tenant": "acme", "approver": "alice",
        "action": {{}}, "context": null, "expires_at": 5, "after": "7#00"}}"#,
        new.id
    );
    let job: Job = serde_json::from_str(&queued_before).unwrap();
    assert_eq!(job.id(), format!("{}#notify#alice", new.id));
    assert_eq!(job.ledger().pk(), format!("{}#notify#alice", new.id));
    let again: Job = serde_json::from_str(&job.to_body().unwrap()).unwrap();
    assert_eq!(again, job, "it keeps them through the queue");
}

/// Two approvers' notify jobs queued before v5 end in items of their own: the same attempt of
/// each never shares (and so overwrites) one item of the trail.
#[test]
fn notify_jobs_queued_before_v5_record_their_ends_apart() {
    let new = pending(1_000);
    let queued_before = |approver: &str| {
        let body = format!(
            r#"{{"kind": "notify", "approval_id": "{}", "tenant": "acme", "approver": "{approver}",
            "action": {{}}, "context": null, "expires_at": 5, "after": "7#00"}}"#,
            new.id
        );
        let Job::Notify(job) = serde_json::from_str(&body).unwrap() else {
            panic!("not a notify job")
        };
        job
    };
    let (alice, bob) = (queued_before("alice"), queued_before("bob"));
    let end = |job: &NotifyJob| {
        let approver = job.approvers[0].clone();
        job.events(&[(&approver, Ok(()))], 1, 10).remove(0).order
    };
    let (a, b) = (end(&alice), end(&bob));
    assert_ne!(
        crate::domain::trail::order_place(&a).0,
        crate::domain::trail::order_place(&b).0
    );
    assert!(
        a.starts_with("7~00n001-") && b.starts_with("7~00n001-"),
        "{a} {b}"
    );
    // A job of v5 (every approver in one) keeps the plain attempt.
    let Job::Notify(one) = jobs_for_change(None, Some(&new), "7#00").remove(0) else {
        panic!("not a notify job")
    };
    assert!(end(&one).starts_with("7~00n001#"), "{}", end(&one));
}

/// The events of one end of a notify job share one item of the trail, after the creation and
/// before the next change; two ends (attempts) never share one.
#[test]
fn a_notify_jobs_end_records_its_approvers_in_one_item() {
    use crate::domain::trail::{order_place, stream_position};
    let new = pending(1_000);
    let created = format!("{}#00", stream_position("7"));
    let Job::Notify(job) = jobs_for_change(None, Some(&new), &created).remove(0) else {
        panic!("not a notify job")
    };
    let outcomes = [
        (&job.approvers[0], Ok(())),
        (&job.approvers[1], Err("HTTP 410".to_owned())),
    ];
    let events = job.events(&outcomes, 1, 9);
    assert_eq!(events[0].kind, EventType::NotificationSent);
    assert_eq!(events[1].kind, EventType::NotificationFailed);
    assert_eq!(
        order_place(&events[0].order).0,
        order_place(&events[1].order).0
    );
    assert!(created < events[0].order && events[1].order < format!("{}#00", stream_position("8")));
    let later = job.events(&outcomes[..1], 2, 9);
    assert_ne!(
        order_place(&later[0].order).0,
        order_place(&events[0].order).0
    );
    assert_eq!(
        later[0].id, events[0].id,
        "one id per approver's notification"
    );
}

#[test]
fn approval_makes_one_execute_job_with_the_business_key() {
    let old = pending(1_000);
    let mut new = decided(Outcome::Approved);
    new.id = old.id.clone();
    let jobs = jobs_for_change(Some(&old), Some(&new), "");
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].id(), format!("{}#execute#0", new.id));
    assert_eq!(jobs[0].ledger().pk(), format!("{}#execute", new.id));
    assert_eq!(jobs[0].business_key(), format!("acme:k:{}", new.id));
    // An approval made before the key named it keeps the key it may already have sent.
    let mut older = new.clone();
    older.execute_key_names_approval = false;
    assert_eq!(execute_job(&older).business_key(), "acme:k");
    let queued_before = format!(
        r#"{{"kind": "execute", "approval_id": "{}", "tenant": "acme", "generation": 0,
        "idempotency_key": "k", "action": {{"type": "deploy", "payload": {{"build": 7}}}},
        "context": {{}}, "decision": {{}}}}"#,
        new.id
    );
    let queued_before: Job = serde_json::from_str(&queued_before).unwrap();
    assert_eq!(queued_before.business_key(), "acme:k");
    let Job::Execute(old_shape) = &queued_before else {
        panic!("not an execute job")
    };
    assert_eq!(old_shape.action_type, "deploy");
    assert_eq!(old_shape.payload["build"], 7);
    let Job::Execute(job) = &jobs[0] else {
        panic!("not an execute job")
    };
    assert_eq!(job.decision["outcome"], "approved");
    assert_eq!(job.action_type, "deploy");
}

#[test]
fn rejection_expiry_and_execution_progress_make_no_job() {
    let old = pending(1_000);
    assert!(jobs_for_change(Some(&old), Some(&decided(Outcome::Rejected)), "").is_empty());
    assert!(jobs_for_change(Some(&old), Some(&old), "").is_empty());
    let approved = decided(Outcome::Approved);
    let mut running = approved.clone();
    running.execution.status = ExecutionStatus::Running;
    assert!(jobs_for_change(Some(&approved), Some(&running), "").is_empty());
    assert!(jobs_for_change(Some(&approved), None, "").is_empty());
}

#[test]
fn an_approval_only_type_is_never_dispatched() {
    let mut old = pending(1_000);
    old.executes = false;
    let mut approved = decided(Outcome::Approved);
    approved.executes = false;
    assert!(jobs_for_change(Some(&old), Some(&approved), "").is_empty());
    let mut claimed = approved.clone();
    claimed.execution.status = ExecutionStatus::Running;
    claimed.execution.claimed_by = Some("tool-use-1".into());
    assert!(jobs_for_change(Some(&approved), Some(&claimed), "").is_empty());
}

#[test]
fn a_counted_vote_and_a_cancel_make_no_job() {
    let old = pending(1_000);
    let mut counted = old.clone();
    counted
        .votes
        .push(decided(Outcome::Approved).decision.unwrap());
    assert!(jobs_for_change(Some(&old), Some(&counted), "").is_empty());
    let mut cancelled = old.clone();
    cancelled.status = Status::Cancelled;
    assert!(jobs_for_change(Some(&counted), Some(&cancelled), "").is_empty());
}

#[test]
fn an_operator_retry_makes_an_execute_job_of_the_next_generation() {
    let mut failed = decided(Outcome::Approved);
    failed.execution.status = ExecutionStatus::Failed;
    let mut retried = failed.clone();
    retried.execution.status = ExecutionStatus::Queued;
    retried.execution.generation = 1;
    let jobs = jobs_for_change(Some(&failed), Some(&retried), "");
    assert_eq!(
        jobs.iter().map(Job::id).collect::<Vec<_>>(),
        [format!("{}#execute#1", failed.id)]
    );
}

#[test]
fn a_requeue_by_the_reconciler_makes_the_same_execute_job_again() {
    let mut queued = decided(Outcome::Approved);
    queued.execution.status = ExecutionStatus::Queued;
    let mut requeued = queued.clone();
    requeued.execution.requeues = 1;
    let jobs = jobs_for_change(Some(&queued), Some(&requeued), "");
    assert_eq!(
        jobs.iter().map(Job::id).collect::<Vec<_>>(),
        [format!("{}#execute#0", queued.id)]
    );
}

#[test]
fn a_callback_too_large_for_one_message_leaves_out_payload_and_context() {
    use crate::config::Subscription;
    use crate::domain::trail::events_for_change;
    let mut big = pending(1_000);
    big.context
        .insert("log".into(), Value::String("x".repeat(190 * 1024)));
    big.votes = (0..20)
        .map(|i| Decision {
            comment: Some("y".repeat(2_000)),
            approver: Approver::parse(&format!("a{i}")).unwrap(),
            ..decided(Outcome::Approved).decision.unwrap()
        })
        .collect();
    let events = events_for_change(None, Some(&big), "p");
    let subscription = Subscription {
        url: "http://x".into(),
        secrets: vec![crate::webhook::WebhookSecret::parse("whsec_c2VjcmV0").unwrap()],
        types: None,
    };
    let jobs = callback_jobs(&big, &events, Some(&subscription));
    assert!(!jobs.is_empty());
    for job in &jobs {
        let text = serde_json::to_string(job).unwrap();
        assert!(text.len() < 256 * 1024, "{} bytes", text.len());
        let Job::Callback(j) = job else { panic!() };
        assert_eq!(j.body["data"]["approval_truncated"], true);
        assert_eq!(j.body["data"]["approval"]["id"], big.id.as_str());
    }
    let small = callback_jobs(&pending(1_000), &events, Some(&subscription));
    let Job::Callback(j) = &small[0] else {
        panic!()
    };
    assert!(j.body["data"].get("approval_truncated").is_none());
}

mod sqs_bodies {
    use proptest::prelude::*;

    use super::*;
    use crate::config::Subscription;
    use crate::domain::trail::events_for_change;

    /// Any character a JSON string may hold, the ones SQS refuses and the edges of its
    /// ranges much more often than chance would pick them.
    fn any_char() -> impl Strategy<Value = char> {
        prop_oneof![
            3 => any::<char>(),
            2 => prop::sample::select(vec![
                '\u{0}', '\u{1}', '\u{8}', '\u{b}', '\u{1f}', '\t', '\n', '\r', '"', '\\',
                '\u{7f}', '\u{d7ff}', '\u{e000}', '\u{fffd}', '\u{fffe}', '\u{ffff}',
                '\u{10000}', '\u{10ffff}',
            ]),
        ]
    }

    fn any_text() -> impl Strategy<Value = String> {
        prop::collection::vec(any_char(), 0..12).prop_map(|c| c.into_iter().collect())
    }

    /// A name `Approver::parse` accepts (no control characters, not blank).
    fn any_name() -> impl Strategy<Value = Approver> {
        any_text().prop_filter_map("an approver name", |raw| {
            Approver::parse(&format!("a{raw}")).ok()
        })
    }

    fn subscription() -> Subscription {
        Subscription {
            url: "http://x".into(),
            secrets: vec![crate::webhook::WebhookSecret::parse("whsec_c2VjcmV0").unwrap()],
            types: None,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

        /// Every job dispatch makes — notifications, the execution, callbacks, Slack's — is a body SQS
        /// accepts, whatever the payload, context, approver names and comments hold, and it
        /// reads back as the same job: the payload reaches the target value for value.
        #[test]
        fn every_job_body_is_sqs_legal_and_reads_back_as_the_job(
            payload in prop::collection::btree_map(any_text(), any_text(), 0..4),
            context in prop::collection::btree_map(any_text(), any_text(), 0..4),
            approver in any_name(),
            comment in any_text(),
        ) {
            let mut new = pending(1_000);
            new.payload = payload.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
            new.context = context.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
            new.approvers = vec![approver.clone()];
            let created = events_for_change(None, Some(&new), "p1");
            let mut jobs = jobs_for_change(None, Some(&new), "p1");
            jobs.extend(callback_jobs(&new, &created, Some(&subscription())));
            jobs.extend(slack_job(None, Some(&new), "p1"));

            let mut approved = new.clone();
            approved.status = Status::Approved;
            let vote = Decision {
                outcome: Outcome::Approved,
                approver: approver.clone(),
                decided_at: 5,
                channel: Channel::Api,
                comment: Some(comment),
                webhook_event_id: None,
                key_id: None,
                signed_in: None,
                by: None,
                delegation_set_by: None,
                passkey: None,
            };
            approved.votes = vec![vote.clone()];
            approved.decision = Some(vote);
            approved.execution.status = ExecutionStatus::Queued;
            let decided = events_for_change(Some(&new), Some(&approved), "p2");
            jobs.extend(jobs_for_change(Some(&new), Some(&approved), "p2"));
            jobs.extend(callback_jobs(&approved, &decided, Some(&subscription())));
            jobs.extend(slack_job(Some(&new), Some(&approved), "p2"));
            prop_assert!(jobs.iter().any(|j| matches!(j, Job::Slack(_))));
            prop_assert!(jobs.iter().any(|j| matches!(j, Job::Execute(_))));

            for job in &jobs {
                let body = job.to_body().unwrap();
                prop_assert!(body.chars().all(sqs_allows), "{body:?}");
                prop_assert_eq!(&serde_json::from_str::<Job>(&body).unwrap(), job);
                if let Job::Execute(j) = job {
                    prop_assert_eq!(&j.payload, &new.payload);
                    prop_assert_eq!(&j.context, &Value::Object(new.context.clone()));
                    prop_assert_eq!(&j.decision["approver"], &Value::String(approver.as_str().to_owned()));
                }
            }
        }
    }

    #[test]
    fn a_body_escapes_only_what_sqs_refuses() {
        let mut new = pending(1_000);
        new.payload.insert(
            "say".into(),
            Value::String("a\u{ffff}b\u{fffe}\u{10000}é".into()),
        );
        let body = jobs_for_change(None, Some(&new), "")[0].to_body().unwrap();
        assert!(body.contains("a\\uffffb\\ufffe\u{10000}é"), "{body}");
        let plain = jobs_for_change(None, Some(&pending(1_000)), "")[0].clone();
        assert_eq!(
            plain.to_body().unwrap(),
            serde_json::to_string(&plain).unwrap()
        );
    }
}

#[test]
fn jobs_survive_the_queue() {
    let jobs = jobs_for_change(None, Some(&pending(1_000)), "");
    let body = serde_json::to_string(&jobs[0]).unwrap();
    assert!(body.contains(r#""kind":"notify""#));
    assert_eq!(serde_json::from_str::<Job>(&body).unwrap(), jobs[0]);
}

#[test]
fn a_slack_job_follows_what_the_message_shows_and_nothing_else() {
    let new = pending(1_000);
    let created = slack_job(None, Some(&new), "p1").expect("a new approval's message");
    assert_eq!(created.id(), format!("{}#slack#p1", new.id));
    assert_eq!(created.ledger().pk(), format!("{}#slack", new.id));
    // Where the message is, kept on the approval: nothing it shows.
    let mut placed = new.clone();
    placed.slack = Some(crate::domain::SlackMessage {
        channel: "C1".into(),
        ts: "1.2".into(),
    });
    assert!(slack_job(Some(&new), Some(&placed), "p2").is_none());
    // An attempt beginning: shown as queued still.
    let mut queued = decided(Outcome::Approved);
    queued.execution.status = ExecutionStatus::Queued;
    let mut running = queued.clone();
    running.execution.status = ExecutionStatus::Running;
    assert!(slack_job(Some(&queued), Some(&running), "p3").is_none());
    let mut succeeded = running.clone();
    succeeded.execution.status = ExecutionStatus::Succeeded;
    assert!(slack_job(Some(&running), Some(&succeeded), "p4").is_some());
    assert!(slack_job(Some(&new), None, "p5").is_none());
}

#[test]
fn a_job_carries_its_approvals_trace_and_one_queued_without_starts_one_it_keeps() {
    let mut approval = pending(1_000);
    approval.trace = Some("4bf92f3577b34da6a3ce929d0e0e4736-01".into());
    let notify = jobs_for_change(None, Some(&approval), "p").remove(0);
    assert_eq!(
        notify.trace().trace_id(),
        "4bf92f3577b34da6a3ce929d0e0e4736"
    );
    let body = notify.to_body().unwrap();
    assert!(
        body.contains(r#""trace":"4bf92f3577b34da6a3ce929d0e0e4736-01""#),
        "{body}"
    );

    // Queued before traces were kept: a fresh trace, the same for the job's lines and calls.
    approval.trace = None;
    let old = jobs_for_change(None, Some(&approval), "p").remove(0);
    assert!(
        !old.to_body().unwrap().contains("\"trace\""),
        "no trace, no field"
    );
    let traced = old.traced();
    assert_eq!(traced.trace(), traced.trace());
    assert_eq!(traced.trace().trace_id().len(), 32);
}

/// A GitHub deployment's gate, on an approval.
fn gated(mut approval: Approval) -> Approval {
    approval.github = Some(crate::domain::GithubGate {
        installation_id: 42,
        repository: "acme/api".into(),
        repository_id: 7,
        run_id: 123,
        environment: "production".into(),
        callback_url:
            "https://api.github.com/repos/acme/api/actions/runs/123/deployment_protection_rule"
                .into(),
        sender_login: "octocat".into(),
        sender_id: 1,
        requester: None,
        joined_requesters: Vec::new(),
        deliveries: Vec::new(),
    });
    approval
}

#[test]
fn github_is_told_every_end_but_a_runs_own_once() {
    use crate::domain::trail::events_for_change;
    let before = gated(pending(1_000));
    // Approved: the execution is the answer.
    let approved = gated(decided(Outcome::Approved));
    let jobs = jobs_for_change(Some(&before), Some(&approved), "");
    let Job::Execute(execute) = &jobs[0] else {
        panic!("an execute job: {jobs:?}");
    };
    let call = execute.github.as_ref().expect("the answer");
    assert!(call.approved && call.comment.contains("approved by alice"));
    assert!(github_job(Some(&before), Some(&approved), &[]).is_none());
    // Rejected, expired, cancelled by a person: a rejection, once (not on a later change).
    let rejected = gated(decided(Outcome::Rejected));
    let events = events_for_change(Some(&before), Some(&rejected), "p");
    let Some(Job::Github(job)) = github_job(Some(&before), Some(&rejected), &events) else {
        panic!("a rejection");
    };
    assert!(!job.call.approved);
    assert_eq!(job.after, events[events.len() - 1].order);
    assert!(github_job(Some(&rejected), Some(&rejected), &[]).is_none());
    let mut expired = before.clone();
    expired.status = Status::Expired;
    assert!(github_job(Some(&before), Some(&expired), &[]).is_some());
    let cancelled_by = |channel| {
        let mut c = before.clone();
        c.status = Status::Cancelled;
        c.cancellation = Some(crate::domain::Cancellation {
            by: Approver::parse("github").unwrap(),
            at: 9,
            reason: Some("the workflow run ended: cancelled".into()),
            channel,
        });
        c
    };
    assert!(github_job(Some(&before), Some(&cancelled_by(None)), &[]).is_some());
    assert!(
        github_job(
            Some(&before),
            Some(&cancelled_by(Some(Channel::Github))),
            &[]
        )
        .is_none(),
        "a run that ended is told nothing"
    );
    // Not a GitHub deployment: nothing.
    assert!(
        github_job(
            Some(&pending(1_000)),
            Some(&decided(Outcome::Rejected)),
            &[]
        )
        .is_none()
    );
    // A rejection's job survives SQS and reads back.
    let body = Job::Github(job.clone()).to_body().unwrap();
    assert_eq!(
        serde_json::from_str::<Job>(&body).unwrap(),
        Job::Github(job)
    );
}

/// A reminder's and a step's notifications: made from the sweep's change, each its own job,
/// ledger item, keys and events (never the first notification's), and the reason and number
/// in the body as the notifier reads them.
#[test]
fn a_reminder_and_a_step_notify_whom_they_concern_under_their_own_ledger_item_and_keys() {
    use crate::domain::stall::{EscalationStep, Reminders};
    use crate::domain::trail::events_for_change;
    use crate::jobs::dispatch_policy::stall_jobs;
    let mut old = pending(100_000);
    old.stall.reminders = Some(Reminders {
        after_seconds: 60,
        every_seconds: 300,
        max: 3,
    });
    old.stall.escalation = vec![EscalationStep {
        after_seconds: 60,
        approvers: vec![Approver::parse("lead").unwrap()],
        rule: None,
    }];
    old.votes = decided(Outcome::Approved).decision.into_iter().collect();
    let mut new = old.clone();
    new.stall.reminded = 1;
    new.stall.escalated = 1;
    new.approvers.push(Approver::parse("lead").unwrap());
    let events = events_for_change(Some(&old), Some(&new), "p");
    let kinds: Vec<EventType> = events.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [EventType::Escalated, EventType::Reminded]);
    let jobs = stall_jobs(Some(&new), &events);
    let ids: Vec<String> = jobs.iter().map(Job::id).collect();
    assert_eq!(
        ids,
        [
            format!("{}#escalation:1", new.id),
            format!("{}#reminder:1", new.id)
        ]
    );
    let Job::Notify(reminder) = &jobs[1] else {
        panic!("not a notify job")
    };
    let whom: Vec<&str> = reminder.approvers.iter().map(Approver::as_str).collect();
    assert_eq!(whom, ["bob", "lead"], "alice voted; the lead joined");
    assert_eq!(jobs[1].ledger().pk(), format!("{}#reminder:1", new.id));
    assert_eq!(
        reminder.key_for(&reminder.approvers[0]),
        format!("{}:reminder:1:bob", new.id)
    );
    let sent = reminder.events(&[(&reminder.approvers[0], Ok(()))], 1, 7);
    let first = jobs_for_change(None, Some(&old), "p");
    let Job::Notify(first) = &first[0] else {
        panic!("not a notify job")
    };
    let first_sent = first.events(&[(&first.approvers[1], Ok(()))], 1, 7);
    assert_ne!(
        sent[0].id, first_sent[0].id,
        "bob's reminder is not his first"
    );

    let body = serde_json::to_value(&jobs[1]).unwrap();
    assert_eq!(
        (&body["reason"], &body["number"]),
        (&json!("reminder"), &json!(1))
    );
    let back: Job = serde_json::from_value(body).unwrap();
    assert_eq!(back, jobs[1]);
    let first_body = serde_json::to_value(Job::Notify(first.clone())).unwrap();
    assert!(first_body.get("reason").is_none());
    let back: Job = serde_json::from_value(first_body).unwrap();
    assert_eq!(back, Job::Notify(first.clone()));
}
