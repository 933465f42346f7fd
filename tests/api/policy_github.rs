//! The GitHub gate under a tenant's approval policy (docs/POLICY.md, docs/GITHUB.md): action
//! `github_deployment`, channel `github`; the environment's approvers and rules only add; an
//! environment needs no entry; a forbidden deployment is answered `rejected` (fail closed), and
//! one the policy approves itself is answered `approved` — through the fake GitHub, once.

use std::time::Duration;

use countersign::domain::approval_policy::Mode;
use countersign_tests::github::{
    FakeGithub, GH_DAVE, GH_NOBODY, PRODUCTION, deliver, deployment_event, opened_id,
};
use countersign_tests::{ALICE, CAROL, ERIN, KEY_A, TENANT_A, TestApp};
use serde_json::json;

use crate::policy::rules;

const GATES: &str = r#"
@id("gh-production")
@require("sre:1")
permit(principal, action == Countersign::Action::"github_deployment", resource)
when { context.channel == "github" && context.payload.environment == "production" };

@id("gh-previews-approve-themselves")
@require("none")
permit(principal, action == Countersign::Action::"github_deployment", resource)
when { context.payload.environment == "preview" };

@id("gh-no-friday-branch")
forbid(principal, action == Countersign::Action::"github_deployment", resource)
when { context.payload.ref == "refs/heads/friday" };
"#;

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_github_gate_obeys_the_tenant_s_policy() {
    let github = FakeGithub::start().await;
    let t = TestApp::start_jobs(&[("GITHUB", &github.config())]).await;
    t.set_group(TENANT_A, "sre", &[CAROL, ERIN]).await;
    t.push_policy(TENANT_A, GATES, Mode::Enforce).await;

    // Production: the environment's 2-of-3 stays, the policy's SRE is added.
    let run = 701;
    github.wait(run, PRODUCTION);
    let opened = deliver(
        &t,
        "deployment_protection_rule",
        "d-pol-1",
        &deployment_event(&github.base, run, PRODUCTION, GH_DAVE),
    )
    .await;
    let id = opened_id(&opened);
    let approval = t.get(KEY_A, &id).await.json();
    let found = rules(&approval);
    assert_eq!(found.len(), 2, "{approval}");
    assert_eq!(
        (found[0].1.as_deref(), found[0].3.clone()),
        (Some("sre"), vec![CAROL.to_owned(), ERIN.to_owned()])
    );
    assert_eq!(found[1].0, "two of three");
    assert_eq!(
        approval["policy"]["source"]["policies"],
        json!(["gh-production"])
    );
    assert_eq!(approval["action"]["type"], "github_deployment");

    // Preview has no entry in GITHUB: under the policy it needs none, and approves itself.
    let preview = 702;
    github.wait(preview, "preview");
    let auto = deliver(
        &t,
        "deployment_protection_rule",
        "d-pol-2",
        &deployment_event(&github.base, preview, "preview", GH_DAVE),
    )
    .await;
    assert_eq!(auto.json()["outcome"], "opened", "{}", auto.text());
    let reviews = github.wait_for_reviews(preview, 1, WAIT).await;
    assert_eq!(reviews.len(), 1, "{reviews:?}");
    assert_eq!(reviews[0].state, "approved");
    assert!(
        reviews[0]
            .comment
            .contains("gh-previews-approve-themselves"),
        "{}",
        reviews[0].comment
    );

    // An environment the policy does not permit: rejected, fail closed (Cedar's default deny).
    let staging = 703;
    github.wait(staging, "staging");
    let refused = deliver(
        &t,
        "deployment_protection_rule",
        "d-pol-3",
        &deployment_event(&github.base, staging, "staging", GH_DAVE),
    )
    .await;
    assert_eq!(refused.json()["outcome"], "refused", "{}", refused.text());
    let reviews = github.wait_for_reviews(staging, 1, WAIT).await;
    assert_eq!(reviews[0].state, "rejected");
    assert!(
        reviews[0].comment.contains("no approval policy permits"),
        "{}",
        reviews[0].comment
    );

    // An unmapped sender is still refused where the environment does not allow one: nobody
    // known asked, so separation of duties cannot hold.
    let unmapped = 704;
    github.wait(unmapped, "preview");
    let nobody = deliver(
        &t,
        "deployment_protection_rule",
        "d-pol-4",
        &deployment_event(&github.base, unmapped, "preview", GH_NOBODY),
    )
    .await;
    assert_eq!(nobody.json()["outcome"], "refused", "{}", nobody.text());

    // Sre votes count in production's group rule; the environment's rule still wants two.
    for (who, status) in [(CAROL, "pending"), (ALICE, "approved")] {
        let voted = t.approve(&id, who).await;
        assert_eq!(voted["status"], status, "after {who}: {voted}");
    }
    let reviews = github.wait_for_reviews(run, 1, WAIT).await;
    assert_eq!(reviews[0].state, "approved");
}
