//! The raw operations: the same DynamoDB requests as Countersign's hot paths, built by hand,
//! no Countersign code — what each path is measured against.

use std::collections::HashMap;

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{
    AttributeValue, Put, ReturnValue, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
    Update,
};
use countersign_tests::{ALICE, BOB};

use super::Bench;

/// A raw update either applied or was refused by its condition: anything else (a malformed
/// expression) would time a failure as if it were the operation.
fn raw_update_applied_or_refused<O, R: std::fmt::Debug>(
    result: Result<O, aws_sdk_dynamodb::error::SdkError<UpdateItemError, R>>,
) {
    if let Err(e) = result {
        assert!(
            matches!(
                e.as_service_error(),
                Some(UpdateItemError::ConditionalCheckFailedException(_))
            ),
            "raw update failed: {e:?}"
        );
    }
}

pub(super) fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

pub(super) fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// What every vote's condition holds (the app's `ONLY_IF_DECIDABLE`): pending, unexpired, a
/// listed approver, neither the requester nor sent with the requester's key, nor the GitHub
/// deployment's requester.
const DECIDABLE: &str = "#status = :pending AND #expires_at > :now AND contains(#approvers, :approver) \
     AND (attribute_not_exists(#requested_by_id) OR (#requested_by_id <> :approver_id AND #requested_by_id <> :sender_id)) \
     AND NOT contains(#gh.#rq, :approver_id) AND NOT contains(#gh.#rq, :sender_id)";

/// The principal of the decider key the timed API votes are sent with.
const DECIDER: &str = "portal@tenant-a";

fn names(pairs: &[&str]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|n| (format!("#{n}"), (*n).to_owned()))
        .collect()
}

impl Bench<'_> {
    pub(super) fn raw_approval_item(
        id: &str,
        key: &str,
        now: i64,
    ) -> HashMap<String, AttributeValue> {
        HashMap::from([
            ("pk".to_owned(), s(format!("tenant-a#{id}"))),
            ("tenant".to_owned(), s("tenant-a")),
            ("id".to_owned(), s(id)),
            ("status".to_owned(), s("pending")),
            ("status_id".to_owned(), s(format!("pending#{id}"))),
            ("due_kind".to_owned(), s("expiry")),
            ("due_at".to_owned(), n(now + 86_400)),
            ("action_type".to_owned(), s("deploy")),
            ("payload".to_owned(), s(r#"{"service":"api","build":1}"#)),
            (
                "context".to_owned(),
                s(r#"{"summary":"Deploy api build 1 to prod","requested_by":"ci"}"#),
            ),
            (
                "approvers".to_owned(),
                AttributeValue::L(vec![s(ALICE), s("bob@example.com")]),
            ),
            ("votes".to_owned(), AttributeValue::L(Vec::new())),
            ("idempotency_key".to_owned(), s(key)),
            ("created_at".to_owned(), n(now)),
            ("expires_at".to_owned(), n(now + 86_400)),
            (
                "execution".to_owned(),
                AttributeValue::M(HashMap::from([
                    ("status".to_owned(), s("not_started")),
                    ("attempts".to_owned(), n(0)),
                    ("updated_at".to_owned(), n(now)),
                    ("generation".to_owned(), n(0)),
                ])),
            ),
        ])
    }

    pub(super) async fn raw_create(&self, key: &str, now: i64) {
        let id = format!("apr_{}", ulid::Ulid::new());
        let body = vec![b'x'; 420];
        let claim = Put::builder()
            .table_name(&self.t.app.config.tables.idempotency_keys)
            .item("pk", s(format!("tenant-a#{key}")))
            .item("fingerprint", s("0".repeat(64)))
            .item("approval_id", s(&id))
            .item("response_status", n(201))
            .item("response_body", AttributeValue::B(Blob::new(body)))
            .item("created_at", n(now))
            .item("expires_at", n(now + 86_400))
            .condition_expression("attribute_not_exists(#pk) OR #expires_at < :now")
            .set_expression_attribute_names(Some(names(&["pk", "expires_at"])))
            .expression_attribute_values(":now", n(now))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .expect("put");
        let approval = Put::builder()
            .table_name(&self.t.app.config.tables.approvals)
            .set_item(Some(Bench::raw_approval_item(&id, key, now)))
            .condition_expression("attribute_not_exists(#pk)")
            .set_expression_attribute_names(Some(names(&["pk"])))
            .build()
            .expect("put");
        let _ = self
            .raw
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().put(claim).build())
            .transact_items(TransactWriteItem::builder().put(approval).build())
            .send()
            .await;
    }

    /// The first write of an approve (the app's `votes::first`): without a policy (`rules`
    /// 0) the single decision; on a quorum of `rules` rules the counted vote, which applies only
    /// while the vote does not complete it.
    fn raw_decide_update(
        id: &str,
        approver: &str,
        sender: &str,
        rules: usize,
        now: i64,
    ) -> (
        String,
        String,
        HashMap<String, String>,
        HashMap<String, AttributeValue>,
    ) {
        let decidable = format!("{DECIDABLE} AND NOT contains(#voters, :approver_id)");
        let record = "#votes = list_append(if_not_exists(#votes, :no_votes), :vote)";
        let (update, condition) = if rules == 0 {
            (
                "SET #status = :outcome, #status_id = :status_id, #decision = :decision, \
                 #execution.#status = :queued, #execution.#updated_at = :now, \
                 #due_kind = :execution_due, #due_at = :now"
                    .to_owned(),
                format!(
                    "{DECIDABLE} AND attribute_not_exists(#while_pending) \
                     AND attribute_not_exists(#approval_only)"
                ),
            )
        } else {
            let counters: Vec<String> = (0..rules)
                .map(|i| format!("#approvals_{i} = if_not_exists(#approvals_{i}, :zero) + if_not_exists(#ballots.#voter.#m{i}, :zero)"))
                .collect();
            let short: Vec<String> = (0..rules)
                .map(|i| format!("#approvals_{i} < #ballots.#voter.#t{i}"))
                .collect();
            (
                format!(
                    "SET {record}, {} ADD #voters :voter_set",
                    counters.join(", ")
                ),
                format!(
                    "{decidable} AND attribute_exists(#while_pending) AND ({})",
                    short.join(" OR ")
                ),
            )
        };
        let mut names = names(&[
            "status",
            "status_id",
            "due_kind",
            "due_at",
            "decision",
            "execution",
            "updated_at",
            "expires_at",
            "approvers",
            "requested_by_id",
            "while_pending",
            "votes",
            "voters",
            "ballots",
            "gh",
            "rq",
            "approval_only",
        ]);
        names.insert("#voter".to_owned(), approver.to_owned());
        for i in 0..rules {
            names.insert(format!("#approvals_{i}"), format!("approvals_{i}"));
            names.insert(format!("#m{i}"), format!("m{i}"));
            names.insert(format!("#t{i}"), format!("t{i}"));
        }
        let text = format!("{update} {condition}");
        names.retain(|k, _| {
            text.match_indices(k.as_str()).any(|(at, _)| {
                !text[at + k.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            })
        });
        let vote = Self::raw_vote(approver, now);
        let mut values = HashMap::from([
            (":vote".to_owned(), AttributeValue::L(vec![vote.clone()])),
            (":no_votes".to_owned(), AttributeValue::L(Vec::new())),
            (
                ":voter_set".to_owned(),
                AttributeValue::Ss(vec![approver.to_owned()]),
            ),
            (":pending".to_owned(), s("pending")),
            (":now".to_owned(), n(now)),
            (":approver".to_owned(), s(approver)),
            (":approver_id".to_owned(), s(approver)),
            (":sender_id".to_owned(), s(sender)),
        ]);
        if rules == 0 {
            values.insert(":outcome".to_owned(), s("approved"));
            values.insert(":decision".to_owned(), vote);
            values.insert(":queued".to_owned(), s("queued"));
            values.insert(":status_id".to_owned(), s(format!("approved#{id}")));
            values.insert(":execution_due".to_owned(), s("execution"));
        } else {
            values.insert(":zero".to_owned(), n(0));
        }
        // Only what the expressions use (DynamoDB refuses the rest).
        values.retain(|k, _| {
            text.match_indices(k.as_str()).any(|(at, _)| {
                !text[at + k.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            })
        });
        (update, condition, names, values)
    }

    /// bob's reject (a veto write), refused: the approval is already decided.
    pub(super) async fn raw_reject(&self, id: &str, now: i64) {
        let update = "SET #status = :outcome, #status_id = :status_id, #decision = :decision, \
             #votes = list_append(if_not_exists(#votes, :no_votes), :vote) ADD #voters :voter_set \
             REMOVE #due_kind, #due_at";
        let condition = format!("{DECIDABLE} AND NOT contains(#voters, :approver_id)");
        let mut vote = Self::raw_vote(BOB, now);
        if let AttributeValue::M(map) = &mut vote {
            map.insert("outcome".to_owned(), s("rejected"));
        }
        let values = HashMap::from([
            (":outcome".to_owned(), s("rejected")),
            (":status_id".to_owned(), s(format!("rejected#{id}"))),
            (":decision".to_owned(), vote.clone()),
            (":vote".to_owned(), AttributeValue::L(vec![vote])),
            (":no_votes".to_owned(), AttributeValue::L(Vec::new())),
            (
                ":voter_set".to_owned(),
                AttributeValue::Ss(vec![BOB.to_owned()]),
            ),
            (":pending".to_owned(), s("pending")),
            (":now".to_owned(), n(now)),
            (":approver".to_owned(), s(BOB)),
            (":approver_id".to_owned(), s(BOB)),
            (":sender_id".to_owned(), s(DECIDER)),
        ]);
        let result = self
            .raw
            .update_item()
            .table_name(&self.t.app.config.tables.approvals)
            .key("pk", s(format!("tenant-a#{id}")))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_names(Some(names(&[
                "status",
                "status_id",
                "due_kind",
                "due_at",
                "decision",
                "expires_at",
                "approvers",
                "requested_by_id",
                "votes",
                "voters",
                "gh",
                "rq",
            ])))
            .set_expression_attribute_values(Some(values))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        raw_update_applied_or_refused(result);
    }

    fn raw_vote(approver: &str, now: i64) -> AttributeValue {
        AttributeValue::M(HashMap::from([
            ("outcome".to_owned(), s("approved")),
            ("approver".to_owned(), s(approver)),
            ("decided_at".to_owned(), n(now)),
            ("channel".to_owned(), s("api")),
        ]))
    }

    /// The second write of the approve that completes a 2-of-3 (the app's `votes::completing`).
    pub(super) async fn raw_complete(&self, id: &str, approver: &str, now: i64) {
        let update = "SET #status = :outcome, #status_id = :status_id, #decision = :decision, \
             #execution.#status = :queued, #execution.#updated_at = :now, \
             #due_kind = :execution_due, #due_at = :now, \
             #votes = list_append(if_not_exists(#votes, :no_votes), :vote), \
             #approvals_0 = #approvals_0 + #ballots.#voter.#m0 ADD #voters :voter_set";
        let condition = format!(
            "{DECIDABLE} AND NOT contains(#voters, :approver_id) AND attribute_exists(#while_pending) \
             AND attribute_not_exists(#approval_only) AND #approvals_0 >= #ballots.#voter.#t0"
        );
        let mut names = names(&[
            "status",
            "status_id",
            "due_kind",
            "due_at",
            "decision",
            "execution",
            "updated_at",
            "expires_at",
            "approvers",
            "requested_by_id",
            "while_pending",
            "votes",
            "voters",
            "approvals_0",
            "ballots",
            "m0",
            "t0",
            "gh",
            "rq",
            "approval_only",
        ]);
        names.insert("#voter".to_owned(), approver.to_owned());
        names.retain(|k, _| update.contains(k.as_str()) || condition.contains(k.as_str()));
        let vote = Self::raw_vote(approver, now);
        let values = HashMap::from([
            (":outcome".to_owned(), s("approved")),
            (":decision".to_owned(), vote.clone()),
            (":vote".to_owned(), AttributeValue::L(vec![vote])),
            (
                ":voter_set".to_owned(),
                AttributeValue::Ss(vec![approver.to_owned()]),
            ),
            (":queued".to_owned(), s("queued")),
            (":status_id".to_owned(), s(format!("approved#{id}"))),
            (":execution_due".to_owned(), s("execution")),
            (":pending".to_owned(), s("pending")),
            (":now".to_owned(), n(now)),
            (":approver".to_owned(), s(approver)),
            (":approver_id".to_owned(), s(approver)),
            (":sender_id".to_owned(), s(DECIDER)),
            (":no_votes".to_owned(), AttributeValue::L(Vec::new())),
        ]);
        let result = self
            .raw
            .update_item()
            .table_name(&self.t.app.config.tables.approvals)
            .key("pk", s(format!("tenant-a#{id}")))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        raw_update_applied_or_refused(result);
    }

    pub(super) async fn raw_decide(&self, id: &str, approver: &str, rules: usize, now: i64) {
        let (update, condition, names, values) =
            Self::raw_decide_update(id, approver, DECIDER, rules, now);
        let result = self
            .raw
            .update_item()
            .table_name(&self.t.app.config.tables.approvals)
            .key("pk", s(format!("tenant-a#{id}")))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        raw_update_applied_or_refused(result);
    }

    pub(super) async fn raw_webhook(&self, id: &str, event_id: &str, now: i64) {
        let inbox = Put::builder()
            .table_name(&self.t.app.config.tables.webhook_inbox)
            .item("pk", s(format!("acme#{event_id}")))
            .item("source", s("acme"))
            .item("event_id", s(event_id))
            .item("event_type", s("approval.decided"))
            .item("approval_id", s(id))
            .item("outcome", s("applied"))
            .item("received_at", n(now))
            .item("webhook_timestamp", n(now))
            .item("request_id", s("req_bench"))
            .item("body_sha256", s("0".repeat(64)))
            .item("expires_at", n(now + 2_592_000))
            .condition_expression("attribute_not_exists(#pk)")
            .set_expression_attribute_names(Some(names(&["pk"])))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .expect("put");
        // A webhook's vote is sent by the approver it names.
        let (update, condition, names, values) = Self::raw_decide_update(id, ALICE, ALICE, 0, now);
        let decide = Update::builder()
            .table_name(&self.t.app.config.tables.approvals)
            .key("pk", s(format!("tenant-a#{id}")))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .expect("update");
        let _ = self
            .raw
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().put(inbox).build())
            .transact_items(TransactWriteItem::builder().update(decide).build())
            .send()
            .await;
    }
}

impl Bench<'_> {
    /// A GitHub round's approval as Countersign writes it (the gate with its one delivery).
    fn raw_github_approval(
        id: &str,
        delivery: &str,
        run: u64,
        now: i64,
    ) -> HashMap<String, AttributeValue> {
        let mut item = Bench::raw_approval_item(id, &format!("github:{delivery}"), now);
        // What a round's approval holds: the deployment, the summary, who asked.
        item.insert("action_type".to_owned(), s("github_deployment"));
        item.insert(
            "payload".to_owned(),
            s(format!(r#"{{"repository":"acme/api","repository_id":5150,"run_id":{run},"environment":"solo","sha":"1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d","ref":"refs/heads/main","event":"push"}}"#)),
        );
        item.insert(
            "context".to_owned(),
            s(format!(r#"{{"summary":"Deploy acme/api@1a2b3c4 to solo, run {run}","requested_by":"github:user1004","github":{{"sender":"user1004","sender_approver":"dave@example.com"}}}}"#)),
        );
        item.insert("approvers".to_owned(), AttributeValue::L(vec![s(BOB)]));
        item.insert("requested_by".to_owned(), s("github:user1004"));
        item.insert("requested_by_id".to_owned(), s("dave@example.com"));
        item.insert(
            "gh".to_owned(),
            AttributeValue::M(HashMap::from([
                ("iid".to_owned(), n(77_001)),
                ("repo".to_owned(), s("acme/api")),
                ("rid".to_owned(), n(5_150)),
                ("run".to_owned(), n(run)),
                ("env".to_owned(), s("solo")),
                (
                    "cb".to_owned(),
                    s(format!("https://api.github.com/repos/acme/api/actions/runs/{run}/deployment_protection_rule")),
                ),
                ("login".to_owned(), s("user1004")),
                ("uid".to_owned(), n(1_004)),
                (
                    "dl".to_owned(),
                    AttributeValue::L(vec![AttributeValue::M(HashMap::from([
                        ("id".to_owned(), s(delivery)),
                        ("at".to_owned(), n(now)),
                    ]))]),
                ),
            ])),
        );
        item
    }

    fn raw_github_inbox(&self, delivery: &str, outcome: &str, now: i64) -> Put {
        Put::builder()
            .table_name(&self.t.app.config.tables.webhook_inbox)
            .item("pk", s(format!("github.tenant-a#{delivery}")))
            .item("source", s("github.tenant-a"))
            .item("event_id", s(delivery))
            .item("event_type", s("deployment_protection_rule"))
            .item("outcome", s(outcome))
            .item("received_at", n(now))
            .item("webhook_timestamp", n(now))
            .item("request_id", s("req_bench"))
            .item("body_sha256", s("0".repeat(64)))
            .item("expires_at", n(now + 2_592_000))
            .condition_expression("attribute_not_exists(#pk)")
            .set_expression_attribute_names(Some(names(&["pk"])))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .expect("put")
    }

    /// The guard against a replay of the delivery under another id (what it names: its
    /// deployment), written once in the delivery's transaction as the store writes it.
    fn raw_github_replay_guard(&self, delivery: &str, now: i64) -> TransactWriteItem {
        let put = Put::builder()
            .table_name(&self.t.app.config.tables.webhook_inbox)
            .item(
                "pk",
                s(format!("github.tenant-a#deployment#5150#{delivery}")),
            )
            .item("event_id", s(delivery))
            .item("expires_at", n(now + 2_592_000))
            .condition_expression("attribute_not_exists(#pk)")
            .set_expression_attribute_names(Some(names(&["pk"])))
            .build()
            .expect("put");
        TransactWriteItem::builder().put(put).build()
    }

    fn round_pk(run: u64) -> String {
        format!("github.tenant-a#round#5150#{run}#solo")
    }

    /// The open of a GitHub round: the inbox item, the round's pointer (only while no round is
    /// open), the run's environments and the approval, in one transaction. The approval, if it
    /// opened.
    pub(super) async fn raw_github_open(
        &self,
        delivery: &str,
        run: u64,
        now: i64,
    ) -> Option<String> {
        let id = format!("apr_{}", ulid::Ulid::new());
        let pointer = Update::builder()
            .table_name(&self.t.app.config.tables.webhook_inbox)
            .key("pk", s(Self::round_pk(run)))
            .update_expression("SET #approval_id = :approval_id, #answered = :false, #opened_at = :now, #expires_at = :expires_at")
            .condition_expression("attribute_not_exists(#pk) OR #answered = :true")
            .set_expression_attribute_names(Some(names(&["pk", "approval_id", "answered", "opened_at", "expires_at"])))
            .expression_attribute_values(":approval_id", s(&id))
            .expression_attribute_values(":false", AttributeValue::Bool(false))
            .expression_attribute_values(":true", AttributeValue::Bool(true))
            .expression_attribute_values(":now", n(now))
            .expression_attribute_values(":expires_at", n(now + 31 * 86_400))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .expect("update");
        let run_item = Update::builder()
            .table_name(&self.t.app.config.tables.webhook_inbox)
            .key("pk", s(format!("github.tenant-a#run#5150#{run}")))
            .update_expression("ADD #environments :environment SET #expires_at = :expires_at")
            .set_expression_attribute_names(Some(names(&["environments", "expires_at"])))
            .expression_attribute_values(
                ":environment",
                AttributeValue::Ss(vec!["solo".to_owned()]),
            )
            .expression_attribute_values(":expires_at", n(now + 31 * 86_400))
            .build()
            .expect("update");
        let approval = Put::builder()
            .table_name(&self.t.app.config.tables.approvals)
            .set_item(Some(Bench::raw_github_approval(&id, delivery, run, now)))
            .condition_expression("attribute_not_exists(#pk)")
            .set_expression_attribute_names(Some(names(&["pk"])))
            .build()
            .expect("put");
        self.raw
            .transact_write_items()
            .transact_items(
                TransactWriteItem::builder()
                    .put(self.raw_github_inbox(delivery, "opened", now))
                    .build(),
            )
            .transact_items(TransactWriteItem::builder().update(pointer).build())
            .transact_items(TransactWriteItem::builder().update(run_item).build())
            .transact_items(TransactWriteItem::builder().put(approval).build())
            .transact_items(self.raw_github_replay_guard(delivery, now))
            .send()
            .await
            .ok()
            .map(|_| id)
    }

    /// A delivery that joins the open round of `run` (approval `open`): the open, refused by the
    /// pointer, then the join — the inbox item, a check that the round is still open, and the
    /// delivery added to its approval.
    pub(super) async fn raw_github_join(&self, delivery: &str, run: u64, open: &str, now: i64) {
        assert!(
            self.raw_github_open(delivery, run, now).await.is_none(),
            "the round is open"
        );
        let still_open = aws_sdk_dynamodb::types::ConditionCheck::builder()
            .table_name(&self.t.app.config.tables.webhook_inbox)
            .key("pk", s(Self::round_pk(run)))
            .condition_expression("#approval_id = :approval_id AND #answered = :false")
            .set_expression_attribute_names(Some(names(&["approval_id", "answered"])))
            .expression_attribute_values(":approval_id", s(open))
            .expression_attribute_values(":false", AttributeValue::Bool(false))
            .build()
            .expect("check");
        let joined = Update::builder()
            .table_name(&self.t.app.config.tables.approvals)
            .key("pk", s(format!("tenant-a#{open}")))
            .update_expression("SET #gh.#dl = list_append(#gh.#dl, :delivery)")
            .condition_expression("attribute_exists(#pk) AND size(#gh.#dl) < :max")
            .set_expression_attribute_names(Some(names(&["gh", "dl", "pk"])))
            .expression_attribute_values(
                ":delivery",
                AttributeValue::L(vec![AttributeValue::M(HashMap::from([
                    ("id".to_owned(), s(delivery)),
                    ("at".to_owned(), n(now)),
                ]))]),
            )
            .expression_attribute_values(":max", n(100))
            .build()
            .expect("update");
        let joined_ok = self
            .raw
            .transact_write_items()
            .transact_items(
                TransactWriteItem::builder()
                    .put(self.raw_github_inbox(delivery, "joined", now))
                    .build(),
            )
            .transact_items(
                TransactWriteItem::builder()
                    .condition_check(still_open)
                    .build(),
            )
            .transact_items(TransactWriteItem::builder().update(joined).build())
            .transact_items(self.raw_github_replay_guard(delivery, now))
            .send()
            .await;
        assert!(joined_ok.is_ok(), "raw join: {joined_ok:?}");
    }
}
