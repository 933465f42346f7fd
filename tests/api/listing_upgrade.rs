//! Listings that stay true across the v5 upgrade and under two filters (review of v5, findings
//! 4 and 6): the approval index's items from before v5 are never moved when their approval's
//! status moves, so the store checks every listed approval's status itself and reads on while a
//! page is short; and under an approver and a requester, pages are full while more remain.

use std::collections::BTreeSet;

use aws_sdk_dynamodb::types::AttributeValue;
use countersign_tests::{ALICE, BOB, PORTAL_KEY, TestApp, decision_body, eventually};
use serde_json::{Value, json};

const SEP: char = '\u{1f}';
const CI: &str = "ci@acme";
const CI_KEY: &str = "ci-upgrade-key-0123456789abcdef";
const BOT: &str = "bot@acme";
const BOT_KEY: &str = "bot-upgrade-key-0123456789abcdef";

fn api_keys() -> String {
    countersign_tests::ApiKeys::new()
        .key(CI, &["requester"], CI_KEY)
        .key(BOT, &["requester"], BOT_KEY)
        .key(countersign_tests::PORTAL, &["decider"], PORTAL_KEY)
        .to_string()
}

/// Follows `query` page by page: each page's ids.
async fn pages(t: &TestApp, query: &str) -> Vec<Vec<String>> {
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut q = query.to_owned();
        if let Some(c) = &cursor {
            q.push_str(&format!("&cursor={c}"));
        }
        let reply = t.get_path(CI_KEY, &format!("/approvals?{q}")).await;
        assert_eq!(reply.status, 200, "{q}: {}", reply.text());
        let page: Value = reply.json();
        pages.push(
            page["approvals"]
                .as_array()
                .expect("approvals")
                .iter()
                .map(|a| a["id"].as_str().expect("an id").to_owned())
                .collect(),
        );
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return pages,
        }
        assert!(pages.len() < 50, "{query}: a listing that never ends");
    }
}

async fn index_rows(t: &TestApp) -> Vec<(String, String)> {
    let scan = t
        .dynamodb
        .scan()
        .table_name(&t.app.store.tables().approval_index)
        .send()
        .await
        .expect("scan the index");
    scan.items()
        .iter()
        .filter_map(|i| match (i.get("pk"), i.get("id")) {
            (Some(AttributeValue::S(pk)), Some(AttributeValue::S(id))) => {
                Some((pk.clone(), id.clone()))
            }
            _ => None,
        })
        .collect()
}

/// Finding 4: six approvals for alice, every other one "from before v5" (its index items as the
/// code before v5 wrote them: one per facet, its status in `facet_status`). Those three are
/// decided after the upgrade; their old items still say `pending`. Walked a page of one at a
/// time, `status=pending&approver=alice` lists exactly the three still pending, every page full
/// while more remain (before the fix, a page holding a stale item came back empty with a
/// cursor), and the stale items are gone once read.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_v4_era_pending_approval_decided_after_the_upgrade_leaves_every_pending_page() {
    let keys = api_keys();
    let t = TestApp::start_jobs(&[("API_KEYS", &keys)]).await;
    let mut made = Vec::new();
    for i in 0..6 {
        let body =
            json!({"action": {"type": "deploy", "payload": {"n": i}}, "approvers": [ALICE, BOB]})
                .to_string();
        made.push(t.create_ok(CI_KEY, &format!("v4-era-{i}"), &body).await);
    }
    let old_era: Vec<String> = made.iter().skip(1).step_by(2).cloned().collect();
    eventually("dispatch indexed every approval", || async {
        index_rows(&t).await.len() == 6 * 3
    })
    .await;
    // The old era's items, as before v5: the new ones removed, one per facet without status.
    let table = t.app.store.tables().approval_index.clone();
    for (pk, id) in index_rows(&t).await {
        if !old_era.contains(&id) {
            continue;
        }
        let facet = pk
            .rsplit_once(SEP)
            .map(|(facet, _)| facet.to_owned())
            .expect("facet and status");
        t.dynamodb
            .delete_item()
            .table_name(&table)
            .key("pk", AttributeValue::S(pk.clone()))
            .key("id", AttributeValue::S(id.clone()))
            .send()
            .await
            .expect("delete");
        t.dynamodb
            .put_item()
            .table_name(&table)
            .item("pk", AttributeValue::S(facet.clone()))
            .item("id", AttributeValue::S(id.clone()))
            .item(
                "facet_status",
                AttributeValue::S(format!("{facet}{SEP}pending")),
            )
            .send()
            .await
            .expect("put as before v5");
    }
    // Decided after the upgrade: dispatch moves the new format's items, not the old.
    for id in &old_era {
        let reply = t
            .send(
                t.http
                    .post(t.url(&format!("/approvals/{id}/decision")))
                    .bearer_auth(PORTAL_KEY)
                    .json(&decision_body("approve", ALICE)),
            )
            .await;
        assert_eq!(reply.status, 200, "{}", reply.text());
    }
    eventually("the decisions are indexed", || async {
        let rows = index_rows(&t).await;
        old_era.iter().all(|id| {
            rows.iter()
                .any(|(pk, i)| i == id && pk.ends_with(&format!("{SEP}approved")))
        })
    })
    .await;
    let stale_before = index_rows(&t)
        .await
        .iter()
        .filter(|(pk, id)| old_era.contains(id) && !pk.ends_with("approved"))
        .count();
    assert_eq!(stale_before, 3 * 3, "the old items were left under pending");

    let walked = pages(&t, &format!("status=pending&approver={ALICE}&limit=1")).await;
    println!("status=pending&approver=alice, a page of one: {walked:?}");
    let listed: Vec<String> = walked.iter().flatten().cloned().collect();
    let mut still_pending: Vec<String> = made.iter().step_by(2).cloned().collect();
    still_pending.reverse();
    assert_eq!(
        listed, still_pending,
        "exactly the pending ones, newest first"
    );
    assert!(
        walked.iter().all(|page| page.len() == 1),
        "every page full while more remain: {walked:?}"
    );
    // The stale items read are gone, and the approved ones list as approved.
    let rows = index_rows(&t).await;
    let stale_after: Vec<_> = rows
        .iter()
        .filter(|(pk, id)| {
            old_era.contains(id)
                && !pk.ends_with("approved")
                && pk.contains(&format!("{SEP}a{SEP}{}", ALICE.to_lowercase()))
        })
        .collect();
    assert!(stale_after.is_empty(), "{stale_after:?}");
    let approved: BTreeSet<String> =
        pages(&t, &format!("status=approved&approver={ALICE}&limit=10"))
            .await
            .into_iter()
            .flatten()
            .collect();
    assert_eq!(approved, old_era.iter().cloned().collect());
}

/// Finding 6: under `approver` and `requested_by` the store reads the approver's facet and
/// keeps the requester's approvals. Twelve approvals for bob, the bot's one in four; walked a
/// page of two, the bot's three list with every page full while more remain (before, a page
/// of the CI's approvals came back empty with a cursor).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn approver_and_requester_pages_are_full_while_more_remain() {
    let keys = api_keys();
    let t = TestApp::start_jobs(&[("API_KEYS", &keys)]).await;
    let mut bots = Vec::new();
    for i in 0..12 {
        let key = if i % 4 == 0 { BOT_KEY } else { CI_KEY };
        let body = json!({"action": {"type": "deploy", "payload": {"n": i}}, "approvers": [BOB]})
            .to_string();
        let id = t.create_ok(key, &format!("both-{i}"), &body).await;
        if key == BOT_KEY {
            bots.push(id);
        }
    }
    eventually("dispatch indexed every approval", || async {
        index_rows(&t).await.len() == 12 * 2
    })
    .await;
    let walked = pages(&t, &format!("approver={BOB}&requested_by={BOT}&limit=2")).await;
    println!("approver=bob&requested_by=bot, a page of two: {walked:?}");
    bots.reverse();
    assert_eq!(walked.iter().flatten().cloned().collect::<Vec<_>>(), bots);
    assert_eq!(
        walked.iter().map(Vec::len).collect::<Vec<_>>(),
        [2, 1],
        "full pages, then the last"
    );
}
