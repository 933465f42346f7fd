//! What each operation does in each mode: `prepare` makes what a cell's operations act on,
//! before the timed part; `operate` is the timed operation itself (raw, in-process or over
//! loopback). Apart from the requests they send (`requests.rs`) and the raw DynamoDB calls
//! (`raw.rs`): the table of which is which.

use countersign_tests::{ALICE, BOB, DECIDER_A, KEY_A, decided_event, deploy_body};
use serde_json::json;

use super::{Bench, Fixture, JOINS_PER_ROUND, Mode, Op};

impl Bench<'_> {
    pub(super) async fn prepare(&self, op: Op, mode: Mode, now: i64) -> Fixture {
        let body = deploy_body(1, &[ALICE, "bob@example.com"]);
        if op == Op::Reminder {
            let (ids, approvals) = self.pending_reminded(self.ops).await;
            return Fixture {
                ids,
                approvals,
                workflows: None,
            };
        }
        if op == Op::Resume {
            return self.pending_resumed(self.ops).await;
        }
        let ids = match op {
            Op::CreateFirst => Vec::new(),
            Op::CreateReplay => {
                match mode {
                    Mode::Raw => self.raw_create(&self.key("replay"), now).await,
                    _ => assert_eq!(
                        self.t
                            .create(KEY_A, &self.key("replay"), &body)
                            .await
                            .status,
                        201
                    ),
                }
                Vec::new()
            }
            Op::DecideWinner | Op::WebhookFirst => self.pending(self.ops, "bench-pending").await,
            Op::VoteCounted => self.pending_quorum(self.ops, "bench-quorum").await,
            Op::VoteCompleting => {
                let ids = self.pending_quorum(self.ops, "bench-voted").await;
                for id in &ids {
                    let approve = json!({"decision": "approve", "approver": ALICE});
                    assert_eq!(self.t.decide(DECIDER_A, id, approve).await.status, 200);
                }
                ids
            }
            Op::DecideLoser => {
                let id = self.pending(1, "bench-decided").await.remove(0);
                let approve = json!({"decision": "approve", "approver": ALICE});
                assert_eq!(self.t.decide(DECIDER_A, &id, approve).await.status, 200);
                vec![id]
            }
            Op::GithubOpen | Op::Reminder | Op::Resume => Vec::new(),
            // Rounds open, each joined by up to JOINS_PER_ROUND operations' deliveries (an
            // approval names at most 100 deliveries).
            Op::GithubJoin => {
                let mut ids = Vec::new();
                for round in 0..self.ops.div_ceil(JOINS_PER_ROUND) {
                    let run = self.join_run(round * JOINS_PER_ROUND);
                    let delivery = self.key(&format!("gh-open-{round}"));
                    match mode {
                        // The raw join names the open round's approval (Countersign learns it
                        // from the refused open).
                        Mode::Raw => ids.push(
                            self.raw_github_open(&delivery, run, now)
                                .await
                                .expect("opened"),
                        ),
                        _ => {
                            let request = self.github_request(&delivery, run);
                            assert_eq!(self.send(Mode::InProcess, request).await, 200);
                        }
                    }
                }
                ids
            }
            Op::WebhookDuplicate => {
                let id = self.pending(1, "bench-dup").await.remove(0);
                match mode {
                    Mode::Raw => self.raw_webhook(&id, &self.key("msg-dup"), now).await,
                    _ => {
                        let event = decided_event(&id, "approve", ALICE);
                        let request = Bench::webhook_request(&self.key("msg-dup"), &event, now);
                        assert_eq!(self.send(Mode::InProcess, request).await, 200);
                    }
                }
                vec![id]
            }
        };
        self.t.calls.take();
        Fixture {
            ids,
            approvals: Vec::new(),
            workflows: None,
        }
    }

    pub(super) async fn operate(&self, op: Op, mode: Mode, i: usize, fixture: &Fixture, now: i64) {
        let body = || deploy_body(1, &[ALICE, "bob@example.com"]);
        match (op, mode) {
            (Op::CreateFirst, Mode::Raw) => {
                self.raw_create(&self.key(&format!("create-{i}")), now)
                    .await
            }
            (Op::CreateFirst, _) => {
                let request = Bench::create_request(&self.key(&format!("create-{i}")), &body());
                assert_eq!(self.send(mode, request).await, 201);
            }
            (Op::CreateReplay, Mode::Raw) => self.raw_create(&self.key("replay"), now).await,
            (Op::CreateReplay, _) => assert_eq!(
                self.send(mode, Bench::create_request(&self.key("replay"), &body()))
                    .await,
                201
            ),
            (Op::DecideWinner, Mode::Raw) => self.raw_decide(&fixture.ids[i], ALICE, 0, now).await,
            (Op::DecideWinner, _) => {
                assert_eq!(
                    self.send(
                        mode,
                        Bench::decide_request(&fixture.ids[i], "approve", ALICE)
                    )
                    .await,
                    200
                );
            }
            (Op::DecideLoser, Mode::Raw) => self.raw_reject(&fixture.ids[0], now).await,
            (Op::DecideLoser, _) => {
                let request = Bench::decide_request(&fixture.ids[0], "reject", "bob@example.com");
                assert_eq!(self.send(mode, request).await, 409);
            }
            (Op::VoteCounted, Mode::Raw) => self.raw_decide(&fixture.ids[i], ALICE, 1, now).await,
            (Op::VoteCounted, _) => {
                let request = Bench::decide_request(&fixture.ids[i], "approve", ALICE);
                assert_eq!(self.send(mode, request).await, 200);
            }
            // Refused as a counted vote (the item as it was comes back), then completing.
            (Op::VoteCompleting, Mode::Raw) => {
                self.raw_decide(&fixture.ids[i], BOB, 1, now).await;
                self.raw_complete(&fixture.ids[i], BOB, now).await;
            }
            (Op::VoteCompleting, _) => {
                let request = Bench::decide_request(&fixture.ids[i], "approve", BOB);
                assert_eq!(self.send(mode, request).await, 200);
            }
            (Op::WebhookFirst, Mode::Raw) => {
                self.raw_webhook(&fixture.ids[i], &self.key(&format!("msg-{i}")), now)
                    .await
            }
            (Op::WebhookFirst, _) => {
                let event = decided_event(&fixture.ids[i], "approve", ALICE);
                let request = Bench::webhook_request(
                    &self.key(&format!("msg-{i}")),
                    &event,
                    self.t.clock.now(),
                );
                assert_eq!(self.send(mode, request).await, 200);
            }
            (Op::GithubOpen, Mode::Raw) => {
                let delivery = self.key(&format!("gh-{i}"));
                assert!(
                    self.raw_github_open(&delivery, self.run(i + 1), now)
                        .await
                        .is_some()
                );
            }
            (Op::GithubOpen, _) => {
                let request = self.github_request(&self.key(&format!("gh-{i}")), self.run(i + 1));
                assert_eq!(self.send(mode, request).await, 200);
            }
            (Op::GithubJoin, Mode::Raw) => {
                let delivery = self.key(&format!("gh-join-{i}"));
                let round = &fixture.ids[i / JOINS_PER_ROUND];
                self.raw_github_join(&delivery, self.join_run(i), round, now)
                    .await
            }
            (Op::GithubJoin, _) => {
                let request =
                    self.github_request(&self.key(&format!("gh-join-{i}")), self.join_run(i));
                assert_eq!(self.send(mode, request).await, 200);
            }
            // A sweep at the reminder's time, the approval as that sweep read it.
            (Op::Reminder, Mode::Raw) => self.raw_remind(&fixture.approvals[i]).await,
            (Op::Reminder, _) => self.remind(&fixture.approvals[i]).await,
            (Op::Resume, Mode::Raw) => self.raw_resume(fixture, i, now).await,
            (Op::Resume, _) => self.resume(fixture, i).await,
            (Op::WebhookDuplicate, Mode::Raw) => {
                self.raw_webhook(&fixture.ids[0], &self.key("msg-dup"), now)
                    .await
            }
            (Op::WebhookDuplicate, _) => {
                let event = decided_event(&fixture.ids[0], "approve", ALICE);
                let request =
                    Bench::webhook_request(&self.key("msg-dup"), &event, self.t.clock.now());
                assert_eq!(self.send(mode, request).await, 200);
            }
        }
    }
}
