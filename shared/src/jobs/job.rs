//! The jobs, and which committed change makes which job (pure).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::config::Subscription;
use crate::domain::trail::{EventType, TrailEvent};
use crate::domain::{
    Approval, ApprovalId, Approver, Completion, EpochSeconds, IdempotencyKey, Status, TenantId,
    rfc3339,
};
use crate::store::{Guarded, LedgerKey, size};

/// An SQS message body. Jobs carry what their downstream call needs (approvals never change
/// their action, context or decision once approved), so the executor reads nothing before
/// calling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Job {
    Notify(NotifyJob),
    Execute(ExecuteJob),
    Callback(CallbackJob),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NotifyJob {
    pub approval_id: ApprovalId,
    pub tenant: TenantId,
    pub approver: Approver,
    pub action: Value,
    pub context: Value,
    pub expires_at: EpochSeconds,
    /// The trail order of the approval's `approval.created` event: `notification.sent` sorts
    /// right after it.
    #[serde(default)]
    pub after: String,
}

/// One event delivered to the tenant's subscription.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallbackJob {
    pub approval_id: ApprovalId,
    pub tenant: TenantId,
    pub event_id: String,
    pub event_type: String,
    /// The event's trail order: `callback.delivered` / `callback.failed` sort right after it.
    pub event_order: String,
    /// What is POSTed (signed as serialised): `{"type", "timestamp", "data": {"approval",
    /// "event"}}`, the same on every attempt.
    pub body: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "ExecuteJobBody")]
pub struct ExecuteJob {
    pub approval_id: ApprovalId,
    pub tenant: TenantId,
    /// 0 for the approval's own execution, n for the nth operator retry.
    pub generation: u32,
    /// The create request's `Idempotency-Key`: with the tenant, the business key sent downstream.
    pub idempotency_key: IdempotencyKey,
    /// Whether the business key names the approval (see
    /// [`Approval::execute_key_names_approval`]); jobs queued before it existed do not.
    pub key_names_approval: bool,
    /// The configured action type, which names the target.
    pub action_type: String,
    pub payload: Map<String, Value>,
    pub context: Value,
    pub decision: Value,
}

/// An execute job as a message body holds it: as [`ExecuteJob`] writes it, or as jobs queued
/// before action types and payloads were fields of their own (`action: {"type", "payload"}`),
/// which a deploy may find still in the queue.
#[derive(Deserialize)]
struct ExecuteJobBody {
    approval_id: ApprovalId,
    tenant: TenantId,
    generation: u32,
    idempotency_key: IdempotencyKey,
    #[serde(default)]
    key_names_approval: bool,
    action_type: Option<String>,
    payload: Option<Map<String, Value>>,
    action: Option<ActionBody>,
    context: Value,
    decision: Value,
}

#[derive(Deserialize)]
struct ActionBody {
    #[serde(rename = "type")]
    action_type: String,
    payload: Map<String, Value>,
}

impl TryFrom<ExecuteJobBody> for ExecuteJob {
    type Error = &'static str;

    fn try_from(body: ExecuteJobBody) -> Result<Self, Self::Error> {
        let (action_type, payload) = match (body.action_type, body.payload, body.action) {
            (Some(action_type), Some(payload), _) => (action_type, payload),
            (None, None, Some(action)) => (action.action_type, action.payload),
            _ => return Err("an execute job names its action_type and payload"),
        };
        Ok(Self {
            approval_id: body.approval_id,
            tenant: body.tenant,
            generation: body.generation,
            idempotency_key: body.idempotency_key,
            key_names_approval: body.key_names_approval,
            action_type,
            payload,
            context: body.context,
            decision: body.decision,
        })
    }
}

/// What a header value cannot carry as it is: controls, space (trimmed at the ends) and `%`
/// itself (every byte outside ASCII is encoded too).
const HEADER_UNSAFE: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS.add(b' ').add(b'%');

/// Whether SQS accepts `c` in a message body: `#x9 | #xA | #xD | #x20–#xD7FF | #xE000–#xFFFD |
/// #x10000–#x10FFFF` (SendMessage, "MessageBody"); anything else refuses the whole request with
/// `InvalidMessageContents`.
pub fn sqs_allows(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

impl Job {
    /// The job as an SQS message body: its JSON with every character SQS refuses written as a
    /// `\uXXXX` escape. serde_json writes U+FFFE and U+FFFF (legal JSON, from any string the
    /// API accepts) raw; SQS refuses such an entry (InvalidMessageContents), the dispatcher
    /// fails the stream batch so that it comes again, and it never succeeds: the shard stalls
    /// behind it and the approval never executes. Outside strings JSON is ASCII, so escaping a
    /// character wherever it occurs changes no value: the body parses back to the same job.
    pub fn to_body(&self) -> Result<String, serde_json::Error> {
        let json = serde_json::to_string(self)?;
        if json.chars().all(sqs_allows) {
            return Ok(json);
        }
        let mut body = String::with_capacity(json.len() + 16);
        for c in json.chars() {
            if sqs_allows(c) {
                body.push(c);
            } else {
                // Only BMP characters are refused (every supplementary one is allowed).
                body.push_str(&format!("\\u{:04x}", c as u32));
            }
        }
        Ok(body)
    }

    /// The job's deduplication identity.
    pub fn id(&self) -> String {
        match self {
            Self::Notify(j) => format!("{}#notify#{}", j.approval_id, j.approver.as_str()),
            Self::Execute(j) => format!("{}#execute#{}", j.approval_id, j.generation),
            Self::Callback(j) => format!("{}#callback#{}", j.approval_id, j.event_id),
        }
    }

    /// The job as the execution ledger knows it: the item that guards it (one per notification,
    /// per callback, and per execution across its operator retries) and its generation.
    pub fn ledger(&self) -> LedgerKey {
        let guards = match self {
            Self::Notify(j) => Guarded::Notification(j.approver.clone()),
            Self::Execute(_) => Guarded::Execution,
            Self::Callback(j) => Guarded::Callback(j.event_id.clone()),
        };
        LedgerKey {
            tenant: self.tenant().clone(),
            approval_id: self.approval_id().clone(),
            guards,
            generation: self.generation(),
        }
    }

    /// The trail event an attempt's end makes (`completion`, as the ledger keeps it): a
    /// notification sent or failed, a callback delivered or failed. An execution's events come
    /// from the approval's own change, on the stream, so an execute job's end makes none here.
    pub fn ended_event(&self, completion: &Completion, now: EpochSeconds) -> Option<TrailEvent> {
        let completion = size::kept(completion);
        let (after, kind, discriminator, data) = match (self, &completion) {
            (Self::Notify(j), Completion::Succeeded) => (
                &j.after,
                EventType::NotificationSent,
                j.approver.identity(),
                json!({ "approver": j.approver }),
            ),
            // Refused by the notifier, or out of attempts: no review link reached the approver.
            (Self::Notify(j), Completion::Failed(error)) => (
                &j.after,
                EventType::NotificationFailed,
                j.approver.identity(),
                json!({ "approver": j.approver, "error": error }),
            ),
            (Self::Callback(j), Completion::Succeeded) => (
                &j.event_order,
                EventType::CallbackDelivered,
                j.event_id.clone(),
                json!({ "event_id": j.event_id, "event_type": j.event_type}),
            ),
            (Self::Callback(j), Completion::Failed(error)) => (
                &j.event_order,
                EventType::CallbackFailed,
                j.event_id.clone(),
                json!({ "event_id": j.event_id, "event_type": j.event_type, "error": error }),
            ),
            _ => return None,
        };
        let actor = json!({ "channel": self.kind() });
        Some(TrailEvent::recorded_after(
            after,
            kind,
            (self.tenant(), self.approval_id()),
            &discriminator,
            now,
            actor,
            data,
        ))
    }

    /// The `Idempotency-Key` sent downstream: the same on every attempt of the job.
    pub fn business_key(&self) -> String {
        match self {
            // An approver's name may hold any character but controls; a header value only
            // visible ASCII (and surrounding spaces are trimmed): the rest is percent-encoded, so
            // `alice@example.com` stays as it is.
            Self::Notify(j) => format!(
                "{}:notify:{}",
                j.approval_id,
                percent_encoding::utf8_percent_encode(j.approver.as_str(), HEADER_UNSAFE)
            ),
            // With the approval id: a create key may be used again once its record expired,
            // for another approval, whose execution must never meet the first one's stored
            // result at a target that dedupes. (An approval from before keeps the key its
            // execution may already have sent.)
            Self::Execute(j) if j.key_names_approval => {
                format!(
                    "{}:{}:{}",
                    j.tenant,
                    j.idempotency_key.as_str(),
                    j.approval_id
                )
            }
            Self::Execute(j) => format!("{}:{}", j.tenant, j.idempotency_key.as_str()),
            // The receiver dedupes by `webhook-id`, the event id.
            Self::Callback(j) => j.event_id.clone(),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Self::Notify(_) => "notify",
            Self::Execute(_) => "execute",
            Self::Callback(_) => "callback",
        }
    }

    pub fn approval_id(&self) -> &ApprovalId {
        match self {
            Self::Notify(j) => &j.approval_id,
            Self::Execute(j) => &j.approval_id,
            Self::Callback(j) => &j.approval_id,
        }
    }

    pub fn tenant(&self) -> &TenantId {
        match self {
            Self::Notify(j) => &j.tenant,
            Self::Execute(j) => &j.tenant,
            Self::Callback(j) => &j.tenant,
        }
    }

    pub fn generation(&self) -> u32 {
        match self {
            Self::Notify(_) | Self::Callback(_) => 0,
            Self::Execute(j) => j.generation,
        }
    }
}

/// The jobs one committed change of an approval makes: a new approval → one notify job per
/// approver; pending → approved, or an operator retry (a new execution generation) → one
/// execute job. Anything else → none.
/// `created`: the order of the change's `approval.created` event, if it has one.
pub fn jobs_for_change(old: Option<&Approval>, new: Option<&Approval>, created: &str) -> Vec<Job> {
    let Some(new) = new else {
        return Vec::new();
    };
    let view = json!(new.view(new.created_at));
    let mut jobs = Vec::new();
    if old.is_none() && new.status == Status::Pending {
        jobs.extend(new.approvers.iter().map(|approver| {
            Job::Notify(NotifyJob {
                approval_id: new.id.clone(),
                tenant: new.tenant.clone(),
                approver: approver.clone(),
                action: view["action"].clone(),
                context: view["context"].clone(),
                expires_at: new.expires_at,
                after: created.to_owned(),
            })
        }));
    }
    let newly_approved =
        new.status == Status::Approved && old.is_none_or(|o| o.status != Status::Approved);
    let retried = new.status == Status::Approved
        && old.is_some_and(|o| {
            o.status == Status::Approved && o.execution.generation < new.execution.generation
        });
    // The reconciler found the execution stuck (its job lost): the same job again.
    let requeued = new.status == Status::Approved
        && old.is_some_and(|o| {
            o.status == Status::Approved
                && o.execution.generation == new.execution.generation
                && o.execution.requeues < new.execution.requeues
        });
    if newly_approved || retried || requeued {
        jobs.push(execute_job(new));
    }
    jobs
}

/// The execute job of the approval's current execution generation.
pub fn execute_job(approval: &Approval) -> Job {
    let view = json!(approval.view(approval.created_at));
    Job::Execute(ExecuteJob {
        approval_id: approval.id.clone(),
        tenant: approval.tenant.clone(),
        generation: approval.execution.generation,
        idempotency_key: approval.idempotency_key.clone(),
        key_names_approval: approval.execute_key_names_approval,
        action_type: approval.action_type.clone(),
        payload: approval.payload.clone(),
        context: view["context"].clone(),
        decision: view["decision"].clone(),
    })
}

/// One callback job per event the tenant's subscription wants, carrying the approval as the
/// change left it.
pub fn callback_jobs(
    approval: &Approval,
    events: &[TrailEvent],
    subscription: Option<&Subscription>,
) -> Vec<Job> {
    let Some(subscription) = subscription else {
        return Vec::new();
    };
    events
        .iter()
        .filter(|e| subscription.wants(e.kind))
        .map(|event| {
            let mut body = json!({
                "type": event.kind.as_str(),
                "timestamp": rfc3339(event.at),
                "data": {
                    "approval": approval.view(event.at),
                    "event": event.view(),
                },
            });
            // A job must fit one SQS message, or the stream batch could never be dispatched:
            // an approval that carries more than that is called back without its payload and
            // context (the receiver reads them with GET /approvals/{id}).
            if body.to_string().len() > CALLBACK_BODY_LIMIT {
                body["data"]["approval"]["action"]["payload"] = Value::Null;
                body["data"]["approval"]["context"] = Value::Null;
                body["data"]["approval_truncated"] = json!(true);
            }
            Job::Callback(CallbackJob {
                approval_id: event.approval_id.clone(),
                tenant: event.tenant.clone(),
                event_id: event.id.clone(),
                event_type: event.kind.as_str().to_owned(),
                event_order: event.order.clone(),
                body,
            })
        })
        .collect()
}

/// The largest callback body a job carries whole: well inside SQS's 256 KiB message with the
/// job's own fields.
const CALLBACK_BODY_LIMIT: usize = 192 * 1024;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::approval::tests::pending;
    use crate::domain::{Approver, Channel, Decision, ExecutionStatus, Outcome};

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
        });
        approval
    }

    #[test]
    fn a_new_approval_notifies_each_approver_once() {
        let new = pending(1_000);
        let jobs = jobs_for_change(None, Some(&new), "");
        let ids: Vec<_> = jobs.iter().map(Job::id).collect();
        assert_eq!(
            ids,
            [
                format!("{}#notify#alice", new.id),
                format!("{}#notify#bob", new.id)
            ]
        );
        assert_eq!(jobs[0].business_key(), format!("{}:notify:alice", new.id));
        let mut odd = pending(1_000);
        odd.approvers = vec![Approver::parse("José \u{FFFF}%").unwrap()];
        let key = jobs_for_change(None, Some(&odd), "")[0].business_key();
        assert_eq!(key, format!("{}:notify:Jos%C3%A9%20%EF%BF%BF%25", odd.id));
        assert!(axum::http::HeaderValue::from_str(&key).is_ok());
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
            secret: crate::webhook::WebhookSecret::parse("whsec_c2VjcmV0").unwrap(),
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
                secret: crate::webhook::WebhookSecret::parse("whsec_c2VjcmV0").unwrap(),
                types: None,
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

            /// Every job dispatch makes — notifications, the execution, callbacks — is a body SQS
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

                let mut approved = new.clone();
                approved.status = Status::Approved;
                let vote = Decision {
                    outcome: Outcome::Approved,
                    approver: approver.clone(),
                    decided_at: 5,
                    channel: Channel::Api,
                    comment: Some(comment),
                    webhook_event_id: None,
                };
                approved.votes = vec![vote.clone()];
                approved.decision = Some(vote);
                approved.execution.status = ExecutionStatus::Queued;
                let decided = events_for_change(Some(&new), Some(&approved), "p2");
                jobs.extend(jobs_for_change(Some(&new), Some(&approved), "p2"));
                jobs.extend(callback_jobs(&approved, &decided, Some(&subscription())));
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
}
