//! IAM in the local stack: every route, job and sweep calls the local AWS as its function's role
//! in `infra/template.yaml`, and a call its role does not allow is refused as AWS refuses it.
//! These are the paths two reviews of v5 found broken on AWS while every test passed (moto then
//! allowed every call), each through the role its function has:
//!
//! - the audit trail's read (the API function's Query of the events table): here;
//! - a callback delivered (the executor's GetItem of the events table): here;
//! - an execution given up after its last attempt, and one ended by the reconciler (their
//!   GetItem of the approvals table, where the ledger is): `crash::a_crash_during_the_last_
//!   allowed_attempt_does_not_leave_the_execution_running`,
//!   `scheduled::an_execution_whose_job_keeps_getting_lost_ends_failed_and_an_operator_resumes_it`;
//! - GitHub's 422 after a crash: `crash::a_crash_after_github_took_the_answer_ends_succeeded_
//!   with_one_decision`;
//! - a listing while `by_status_keys` backfills (the API function's Query of `by_status` at
//!   `ApprovalsIndexesStep` 1): `upgrade::a_stack_from_before_v5_upgrades_in_place_and_keeps_
//!   every_approval`.
//!
//! What the enforcement itself refuses and allows is tested in `infra/tests/test_local_iam.py`;
//! that every grant is used and every call granted, by `infra/iam_coverage.py` after the suite.

use countersign::runner::Deployment;
use countersign_tests::local_aws::another_local_aws;
use countersign_tests::local_runner::LocalRunner;
use countersign_tests::receiver::CallbackReceiver;
use countersign_tests::{ALICE, KEY_A, TestApp, event_types, eventually};
use serde_json::json;

use crate::helpers::{CALLBACK_SECRET, deploy, subscription};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_trail_is_read_as_the_api_function() {
    let t = TestApp::start_jobs(&[]).await;
    let id = t.create_ok(KEY_A, "iam-trail", &deploy(&[ALICE])).await;
    t.approve(&id, ALICE).await;
    eventually("the trail tells the approval", || async {
        let trail = event_types(&t.trail(KEY_A, &id, 20).await);
        trail.starts_with(&["approval.created".to_owned()])
            && trail.contains(&"approval.approved".to_owned())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_callback_is_delivered_as_the_executor() {
    let receiver = CallbackReceiver::start(CALLBACK_SECRET, 0);
    let subscriptions = subscription(&receiver.url, Some(&["approval.approved"]));
    let t = TestApp::start_jobs(&[("EVENT_SUBSCRIPTIONS", &subscriptions)]).await;
    let id = t.create_ok(KEY_A, "iam-callback", &deploy(&[ALICE])).await;
    t.approve(&id, ALICE).await;
    eventually("the callback is delivered and recorded", || async {
        event_types(&t.trail(KEY_A, &id, 50).await).contains(&"callback.delivered".to_owned())
    })
    .await;
    let accepted = receiver
        .lines()
        .iter()
        .filter(|l| l["type"] == "approval.approved" && l["answer"] == 204)
        .count();
    assert_eq!(accepted, 1, "{:#?}", receiver.lines());
}

/// A stack deployed without one grant (the API role's Query of the events table): the trail
/// is refused by the local AWS, and the route answers what AWS would make it answer — a 500,
/// the store's error logged — while the routes whose grants it has answer as ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_route_whose_role_lacks_a_grant_fails_as_on_aws() {
    let withheld = [["CreateRole", "dynamodb:Query", "EventsTable.Arn"]];
    let t = TestApp::build_deployed(
        &[],
        None,
        &[],
        Deployment {
            without: &withheld,
            ..Default::default()
        },
    )
    .await;
    t.app.store.ensure_tables().await.expect("the tables");
    let id = t.create_ok(KEY_A, "iam-refused", &deploy(&[ALICE])).await;
    assert_eq!(t.get(KEY_A, &id).await.status, 200);
    let trail = t
        .send_any(
            t.http
                .get(t.url(&format!("/approvals/{id}/events")))
                .bearer_auth(KEY_A),
        )
        .await;
    assert_eq!(trail.status, 500, "{}", trail.text());
    assert_eq!(trail.json()["code"], "internal_error");
}

/// `make run`'s runner against a local AWS that withholds the same grant: the trail answers
/// 500 and the runner logs AWS's refusal (the action, the resource, the role).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_local_runner_refuses_what_its_roles_do_not_allow() {
    let aws = another_local_aws(&[(
        "MOTO_IAM_WITHOUT",
        "CreateRole dynamodb:Query EventsTable.Arn",
    )]);
    let runner = LocalRunner::start_against(Some(aws.endpoint.clone()), &[]).await;
    let demo_key = "cs_demo_key_0123456789";
    let created = runner
        .http
        .post(runner.url("/approvals"))
        .bearer_auth(demo_key)
        .header("idempotency-key", "iam-runner")
        .json(
            &json!({"action": {"type": "echo", "payload": {}}, "approvers": ["alice@example.com"]}),
        )
        .send()
        .await
        .expect("create");
    assert_eq!(created.status(), 201);
    let id = created.json::<serde_json::Value>().await.expect("json")["id"]
        .as_str()
        .expect("an id")
        .to_owned();
    let trail = runner
        .http
        .get(runner.url(&format!("/approvals/{id}/events")))
        .bearer_auth(demo_key)
        .send()
        .await
        .expect("the trail");
    assert_eq!(trail.status(), 500);
    // Its JSON log lines go to standard output, as a Lambda's do.
    eventually("the refusal is logged", || async {
        runner
            .stdout_lines_with("AccessDeniedException")
            .iter()
            .any(|l| l.contains("dynamodb:Query") && l.contains("CreateRole/api"))
    })
    .await;
}

/// Review of v6, finding 8: an optional read the dispatcher makes (the delegations of the
/// approvers a notification tells, for their delegates' copies) used to fail the whole stream
/// batch — execute and resume jobs included — for as long as it failed. Here the dispatcher's
/// role lacks that read: the approved action still executes, once, and the approvers are told;
/// only the copies wait for the batch to come again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_optional_read_that_fails_holds_back_no_execution() {
    let withheld = [["DispatchRole", "dynamodb:BatchGetItem", "ApiKeysTable.Arn"]];
    let t = TestApp::jobs_deployed(
        &[],
        None,
        Deployment {
            without: &withheld,
            ..Default::default()
        },
    )
    .await;
    t.start_runner();
    let id = t
        .create_approved("optional-read", &deploy(&[ALICE]), ALICE)
        .await;
    let done = t
        .wait_for_execution(KEY_A, &id, std::time::Duration::from_secs(30))
        .await;
    assert_eq!(done["execution"]["status"], "succeeded", "{done}");
    let key = countersign_tests::execute_key("optional-read", &id);
    assert_eq!(t.downstream().effects(&key), 1, "executed once");
    eventually("the approver told", || async {
        t.downstream()
            .calls_to("/notify")
            .iter()
            .any(|(_, body)| body["approval_id"] == id.as_str())
    })
    .await;
}

/// Only the dispatch function may `kms:Sign`, and only with the certificate key: the other
/// functions' roles are refused by the local AWS (as AWS refuses them, from the template's
/// grants), and the dispatch role is refused on any other key. (A stack that withholds the
/// read role's public-key grant, so that the coverage check expects its refusals: the read
/// function reads the public key in `certificates.rs`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_dispatch_function_signs_and_only_with_the_certificate_key() {
    use aws_sdk_kms::primitives::Blob;
    use aws_sdk_kms::types::{MessageType, SigningAlgorithmSpec};
    use countersign::Function;
    let withheld = [["ReadRole", "kms:GetPublicKey", "CertificateKey.Arn"]];
    let t = TestApp::build_deployed(
        &[],
        None,
        &[],
        Deployment {
            without: &withheld,
            ..Default::default()
        },
    )
    .await;
    let key = t
        .app
        .config
        .certificate_key_arn
        .clone()
        .expect("the stack's certificate key");
    let other = countersign::runner::create_certificate_key(&countersign_tests::sdk_config().await)
        .await
        .expect("another key");
    let sign = |function: Function, key: String| {
        let kms = aws_sdk_kms::Client::new(t.functions.sdk(function));
        async move {
            kms.sign()
                .key_id(key)
                .message(Blob::new(vec![7u8; 32]))
                .message_type(MessageType::Digest)
                .signing_algorithm(SigningAlgorithmSpec::EcdsaSha256)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| {
                    aws_sdk_kms::error::ProvideErrorMetadata::code(&e)
                        .unwrap_or_default()
                        .to_owned()
                })
        }
    };
    assert_eq!(sign(Function::Dispatch, key.clone()).await, Ok(()));
    assert_eq!(
        sign(Function::Dispatch, other).await,
        Err("AccessDeniedException".to_owned()),
        "another key"
    );
    for function in Function::ALL
        .into_iter()
        .filter(|f| *f != Function::Dispatch)
    {
        assert_eq!(
            sign(function, key.clone()).await,
            Err("AccessDeniedException".to_owned()),
            "{function:?} may not sign"
        );
    }
    let read = aws_sdk_kms::Client::new(t.functions.sdk(Function::Read));
    assert!(
        read.get_public_key().key_id(&key).send().await.is_err(),
        "withheld here"
    );
}
