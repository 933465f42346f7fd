//! One identity, one spelling (issue 36): a name with a hidden, private-use, unassigned or
//! compatibility character is refused naming its field, and every other spelling of a listed
//! approver (case, composed accents) votes as the one listed — once, even when they race.

use countersign_tests::{
    ApiKeys, CI, CI_KEY, CreateBody, PORTAL, PORTAL_KEY, TestApp, decision_body,
};
use futures::future::join_all;
use serde_json::json;

const ALICE_LISTED: &str = "alice@example.com";
const JOSE_LISTED: &str = "jos\u{e9}@example.com";

async fn start() -> TestApp {
    let keys = ApiKeys::new()
        .key(CI, &["requester"], CI_KEY)
        .key(PORTAL, &["decider", "reader"], PORTAL_KEY)
        .to_string();
    TestApp::start_with(&[("API_KEYS", &keys)]).await
}

fn two_of(approvers: &[&str]) -> String {
    CreateBody::new("deploy", approvers)
        .payload(json!({"build": 1}))
        .policy(json!({"rules": [{"name": "two", "approvers": approvers, "min_approvals": 2}]}))
        .to_string()
}

#[tokio::test]
async fn a_hidden_or_compatibility_character_is_refused_naming_its_field() {
    let t = start().await;
    let tricks = [
        ("ci@acme\u{200b}", "zero-width space"),
        ("bob@x\u{2060}", "word joiner"),
        ("\u{feff}bob@x", "byte order mark"),
        ("bob@x\u{202e}", "right-to-left override"),
        ("jose\u{301}@example.com", "decomposed accent"),
        ("\u{ff42}ob@x", "full-width Latin"),
        ("\u{212a}elvin@x", "Kelvin sign"),
    ];
    for (i, (trick, why)) in tricks.iter().enumerate() {
        // The requester listing itself in a hidden spelling; one person twice for a 2-of-n.
        for (j, body) in [
            CreateBody::new("deploy", &[trick, "bob@x"]).to_string(),
            two_of(&["bob@x", trick]),
        ]
        .into_iter()
        .enumerate()
        {
            let refused = t.create(CI_KEY, &format!("trick-{i}-{j}"), &body).await;
            refused.assert_problem(400, "invalid_request");
            let fields = refused.json()["errors"].to_string();
            assert!(
                fields.contains(&format!("approvers[{j}]")),
                "{why}: {fields}"
            );
        }
    }
    assert_eq!(
        t.approval_count().await,
        0,
        "a refused create writes nothing"
    );

    let id = t
        .create_ok(CI_KEY, "plain", &two_of(&[ALICE_LISTED, "bob@x"]))
        .await;
    for (trick, why) in tricks {
        let refused = t
            .decide(PORTAL_KEY, &id, decision_body("approve", trick))
            .await;
        refused.assert_problem(400, "invalid_request");
        assert!(refused.text().contains("approver"), "{why}");
    }
    let approval = t.get(PORTAL_KEY, &id).await.json();
    assert_eq!(approval["votes"], json!([]), "no vote recorded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_spelling_of_one_listed_approver_votes_once_as_listed() {
    let t = start().await;
    let id = t
        .create_ok(
            CI_KEY,
            "spellings",
            &two_of(&[ALICE_LISTED, JOSE_LISTED, "bob@x"]),
        )
        .await;
    // Eight spellings of Alice at once: one vote, in the listed spelling; the rest are
    // repeats of it, never a second approval towards the 2-of-3.
    let spellings = [
        "Alice@Example.com",
        "ALICE@EXAMPLE.COM",
        " alice@example.com",
        "alice@example.com ",
        "aLiCe@eXaMpLe.CoM",
        ALICE_LISTED,
        "Alice@example.com",
        "alice@EXAMPLE.com",
    ];
    let replies = join_all(spellings.iter().map(|who| {
        let t = &t;
        let id = &id;
        async move {
            t.decide(PORTAL_KEY, id, decision_body("approve", who))
                .await
        }
    }))
    .await;
    // A repeat of the same vote is answered as the vote was (200), never counted again.
    for reply in &replies {
        assert_eq!(reply.status, 200, "{}", reply.text());
        assert_eq!(reply.json()["votes"].as_array().map(Vec::len), Some(1));
    }
    let approval = t.get(PORTAL_KEY, &id).await.json();
    assert_eq!(
        approval["status"], "pending",
        "one person is not two of three"
    );
    assert_eq!(approval["votes"].as_array().unwrap().len(), 1);
    assert_eq!(approval["votes"][0]["approver"], ALICE_LISTED);

    // José in capitals, accent composed: listed, counted, and it completes the quorum.
    let jose = t
        .decide(
            PORTAL_KEY,
            &id,
            decision_body("approve", "JOS\u{c9}@EXAMPLE.COM"),
        )
        .await;
    assert_eq!(jose.status, 200, "{}", jose.text());
    let approval = t.get(PORTAL_KEY, &id).await.json();
    assert_eq!(approval["status"], "approved");
    assert_eq!(approval["votes"][1]["approver"], JOSE_LISTED);
}
