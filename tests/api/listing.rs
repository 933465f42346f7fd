//! `GET /approvals` (docs/API.md "Listing"): every filter combination, page by page,
//! against what the test made — through the real router, dispatcher and indexes on the local AWS.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use countersign_tests::{
    ALICE, ALICE_KEY, ApiKeys, BOB, CAROL, KEY_A, KEY_B, OPS, OPS_KEY, PORTAL, PORTAL_KEY,
    TENANT_A, TENANT_B, TestApp, decision_body, eventually,
};
use futures::StreamExt;
use serde_json::{Value, json};

const APPROVERS: [&str; 3] = [ALICE, BOB, CAROL];
/// Two pipelines of tenant A, each with its own key.
const CI_1: &str = "ci-1@acme";
const CI_2: &str = "ci-2@acme";
const CI_1_KEY: &str = "ci-1-key-0123456789abcdef";
const CI_2_KEY: &str = "ci-2-key-0123456789abcdef";
const PORTAL_B_KEY: &str = "portal-b-key-0123456789abcdef";

fn api_keys() -> String {
    ApiKeys::new()
        .key(CI_1, &["requester"], CI_1_KEY)
        .key(CI_2, &["requester"], CI_2_KEY)
        .key(OPS, &["operator"], OPS_KEY)
        .key(PORTAL, &["decider"], PORTAL_KEY)
        .key_in(TENANT_B, "tenant-b", &["requester", "operator"], KEY_B)
        .key_in(TENANT_B, "portal@b", &["decider"], PORTAL_B_KEY)
        .to_string()
}

/// What the test made: enough to know which listing must return it.
#[derive(Debug, Clone)]
struct Made {
    tenant: &'static str,
    id: String,
    requested_by: &'static str,
    approvers: Vec<&'static str>,
    status: &'static str,
}

async fn page(t: &TestApp, key: &str, query: &str) -> Value {
    let reply = t.get_path(key, &format!("/approvals?{query}")).await;
    assert_eq!(reply.status, 200, "{query}: {}", reply.text());
    reply.json()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_filter_combination_lists_exactly_its_approvals_newest_first() {
    let keys = api_keys();
    let t = TestApp::start_jobs(&[("API_KEYS", &keys)]).await;
    let mut made: Vec<Made> = Vec::new();
    for i in 0..120usize {
        let (tenant, key, requested_by) = match i % 4 {
            0 | 1 if i < 60 => (TENANT_A, CI_1_KEY, CI_1),
            2 | 3 if i < 60 => (TENANT_A, CI_2_KEY, CI_2),
            _ => (TENANT_B, KEY_B, "tenant-b"),
        };
        let approvers: Vec<&str> = match i % 5 {
            0 => vec![APPROVERS[0]],
            1 => vec![APPROVERS[0], APPROVERS[1]],
            2 => vec![APPROVERS[1], APPROVERS[2]],
            3 => vec![APPROVERS[2]],
            _ => APPROVERS.to_vec(),
        };
        let body =
            json!({"action": {"type": "deploy", "payload": {"n": i}}, "approvers": approvers})
                .to_string();
        let id = t.create_ok(key, &format!("list-{i}"), &body).await;
        made.push(Made {
            tenant,
            id,
            requested_by,
            approvers,
            status: "pending",
        });
    }
    // Decide or cancel some: every status is represented in both tenants.
    for (i, m) in made.iter_mut().enumerate() {
        let (decider, canceller) = if m.tenant == TENANT_A {
            (PORTAL_KEY, OPS_KEY)
        } else {
            (PORTAL_B_KEY, KEY_B)
        };
        let approver = m.approvers[0];
        let (path, body, status) = match i % 6 {
            1 | 4 => ("decision", decision_body("approve", approver), "approved"),
            2 => ("decision", decision_body("reject", approver), "rejected"),
            3 => ("cancel", json!({"reason": "not needed"}), "cancelled"),
            _ => continue,
        };
        let key = if path == "cancel" { canceller } else { decider };
        let reply = t
            .send(
                t.http
                    .post(t.url(&format!("/approvals/{}/{path}", m.id)))
                    .bearer_auth(key)
                    .json(&body),
            )
            .await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        m.status = status;
    }

    // The approver and requester filters read the index dispatch keeps from the stream.
    let index_items: usize = made.iter().map(|m| m.approvers.len() + 1).sum();
    eventually("the listing index has caught up", || async {
        let rows = t
            .dynamodb
            .scan()
            .table_name(&t.app.config.tables.approval_index)
            .consistent_read(true)
            .send()
            .await
            .expect("scan");
        // (at most 1 MB a page: far more than these items)
        rows.count() as usize == index_items
            && made.iter().all(|m| {
                rows.items()
                    .iter()
                    .filter(|item| countersign_tests::attr_s(item, "id") == m.id)
                    .all(|item| countersign_tests::attr_s(item, "pk").ends_with(m.status))
            })
    })
    .await;
    // Quiet: the runner's own DynamoDB calls would be counted with the listing's.
    tokio::time::sleep(Duration::from_secs(1)).await;
    t.stop_runner().await;

    let mut pages = 0;
    let statuses = [
        None,
        Some("pending"),
        Some("approved"),
        Some("rejected"),
        Some("cancelled"),
    ];
    let approvers = [
        None,
        Some(APPROVERS[0]),
        Some(APPROVERS[1]),
        Some(APPROVERS[2]),
    ];
    for (tenant, key, requesters) in [
        (TENANT_A, OPS_KEY, vec![None, Some(CI_1), Some("CI-2@acme")]),
        (TENANT_B, KEY_B, vec![None, Some("tenant-b")]),
    ] {
        for status in statuses {
            for approver in approvers {
                for requested_by in &requesters {
                    let mut expected: Vec<&str> = made
                        .iter()
                        .filter(|m| m.tenant == tenant)
                        .filter(|m| status.is_none_or(|s| m.status == s))
                        .filter(|m| approver.is_none_or(|a| m.approvers.contains(&a)))
                        .filter(|m| requested_by.is_none_or(|r| m.requested_by == r.to_lowercase()))
                        .map(|m| m.id.as_str())
                        .collect();
                    expected.sort_unstable_by(|a, b| b.cmp(a));
                    let mut query = String::from("limit=7");
                    for (name, value) in [
                        ("status", status),
                        ("approver", approver),
                        ("requested_by", *requested_by),
                    ] {
                        if let Some(value) = value {
                            query.push_str(&format!("&{name}={}", urlencode(value)));
                        }
                    }
                    let mut listed: Vec<String> = Vec::new();
                    let mut cursor: Option<String> = None;
                    loop {
                        let mut q = query.clone();
                        if let Some(c) = &cursor {
                            q.push_str(&format!("&cursor={c}"));
                        }
                        t.calls.take();
                        let page = page(&t, key, &q).await;
                        pages += 1;
                        let items = page["approvals"].as_array().expect("approvals");
                        assert!(items.len() <= 7);
                        let calls = t.calls.take();
                        assert_listing_calls(&calls, &q, items.len());
                        for item in items {
                            if let Some(s) = status {
                                assert_eq!(item["status"], s);
                            }
                            listed.push(item["id"].as_str().expect("id").to_owned());
                        }
                        match page["next_cursor"].as_str() {
                            Some(c) => cursor = Some(c.to_owned()),
                            None => break,
                        }
                    }
                    assert_eq!(listed, expected, "{tenant} {query}");
                    let unique: BTreeSet<&String> = listed.iter().collect();
                    assert_eq!(unique.len(), listed.len(), "no duplicates");
                }
            }
        }
    }
    println!("{pages} pages listed, each checked");

    // A cursor is bound to its tenant and filters.
    let first = page(&t, OPS_KEY, "limit=7&status=pending").await;
    let cursor = first["next_cursor"]
        .as_str()
        .expect("more than a page")
        .to_owned();
    for (key, query) in [
        (KEY_B, format!("limit=7&status=pending&cursor={cursor}")),
        (OPS_KEY, format!("limit=7&status=approved&cursor={cursor}")),
        (OPS_KEY, format!("limit=7&cursor={cursor}")),
        (
            OPS_KEY,
            format!(
                "limit=7&status=pending&cursor={}x",
                &cursor[..cursor.len() - 1]
            ),
        ),
        (OPS_KEY, "cursor=nonsense".to_owned()),
    ] {
        let reply = t.get_path(key, &format!("/approvals?{query}")).await;
        assert_eq!(reply.problem(), (400, "invalid_cursor".into()), "{query}");
    }
    for query in [
        "status=done",
        "limit=0",
        "limit=101",
        "approver=",
        "sort=asc",
        "status=pending&status=approved",
    ] {
        let reply = t.get_path(OPS_KEY, &format!("/approvals?{query}")).await;
        assert_eq!(reply.problem(), (400, "invalid_request".into()), "{query}");
    }
    let reply = t.send(t.http.get(t.url("/approvals"))).await;
    assert_eq!(reply.status, 401);
}

fn urlencode(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// `approver=me` and `requested_by=me` name the caller's own principal: an approver's inbox and a
/// requester's outbox without knowing how its key's principal is spelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn me_is_the_caller_s_own_principal() {
    let keys = ApiKeys::new()
        .key(CI_1, &["requester"], CI_1_KEY)
        .key(CI_2, &["requester"], CI_2_KEY)
        .key("Alice@Example.com", &["approver"], ALICE_KEY)
        .to_string();
    let t = TestApp::start_jobs(&[("API_KEYS", &keys)]).await;
    let body = |approvers: &[&str]| {
        json!({"action": {"type": "deploy", "payload": {}}, "approvers": approvers}).to_string()
    };
    let for_alice = t.create_ok(CI_1_KEY, "me-1", &body(&[ALICE])).await;
    let not_for_alice = t.create_ok(CI_1_KEY, "me-2", &body(&[BOB])).await;
    let by_ci_2 = t.create_ok(CI_2_KEY, "me-3", &body(&[ALICE])).await;
    let ids = |page: &Value| -> BTreeSet<String> {
        page["approvals"]
            .as_array()
            .expect("approvals")
            .iter()
            .map(|a| a["id"].as_str().expect("id").to_owned())
            .collect()
    };
    let expected_inbox: BTreeSet<String> = [for_alice.clone(), by_ci_2.clone()].into();
    let expected_outbox: BTreeSet<String> = [for_alice, not_for_alice].into();
    eventually("alice's inbox and ci-1's outbox are listed", || async {
        ids(&page(&t, ALICE_KEY, "status=pending&approver=me").await) == expected_inbox
            && ids(&page(&t, CI_1_KEY, "requested_by=me").await) == expected_outbox
    })
    .await;
}

/// What a listing page costs: index reads, each its queries sent together (one round trip),
/// then one BatchGetItem of the approvals they name (none when they found none). Without a
/// status filter a read queries each status's range (five); with an approver or requester
/// filter, also the approval index's items from before v5 (one). With both filters the
/// approver's approvals are read and the requester's kept: while a page is short for that and
/// more remain, the store reads on (at most five reads a page). Otherwise one read.
fn assert_listing_calls(calls: &[String], query: &str, listed: usize) {
    let statuses = if query.contains("status=") { 1 } else { 5 };
    let both = query.contains("approver=") && query.contains("requested_by=");
    let before_v5 = usize::from(query.contains("approver=") || query.contains("requested_by="));
    let read = vec!["Query"; statuses + before_v5];
    let mut reads: Vec<Vec<&str>> = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for call in calls {
        current.push(call.as_str());
        if call == "BatchGetItem" {
            reads.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        reads.push(current);
    }
    let most = if both { 5 } else { 1 };
    assert!(
        (1..=most).contains(&reads.len()),
        "{query}: {} reads: {calls:?}",
        reads.len()
    );
    for (i, got) in reads.iter().enumerate() {
        let mut want = read.clone();
        if got.last() == Some(&"BatchGetItem") || (listed > 0 && i + 1 == reads.len()) {
            want.push("BatchGetItem");
        }
        assert_eq!(got, &want, "{query}: read {i} of {calls:?}");
    }
}

/// Lambda's synchronous response limit (6 MB): a larger answer is API Gateway's 500.
const LAMBDA_RESPONSE_LIMIT: usize = 6 * 1024 * 1024;

/// A listing followed to its end: what it listed, and each page's body size.
struct Listing {
    ids: Vec<String>,
    bodies: Vec<usize>,
}

/// Follows `next_cursor` from the first page of `query` to the last, checking each page's size
/// (also as the Lambda response carries it: the body as one JSON string) and round trips
/// ([`assert_listing_calls`]).
async fn list_all(t: &TestApp, key: &str, query: &str) -> Listing {
    let mut listing = Listing {
        ids: Vec::new(),
        bodies: Vec::new(),
    };
    let mut cursor: Option<String> = None;
    loop {
        let mut q = query.to_owned();
        if let Some(c) = &cursor {
            q.push_str(&format!("&cursor={c}"));
        }
        t.calls.take();
        let reply = t.get_path(key, &format!("/approvals?{q}")).await;
        assert_eq!(reply.status, 200, "{q}: {}", reply.text());
        assert_listing_calls(&t.calls.take(), &q, 1);
        let carried = serde_json::to_string(&reply.text()).expect("text").len();
        assert!(
            reply.body.len() <= LAMBDA_RESPONSE_LIMIT && carried <= LAMBDA_RESPONSE_LIMIT,
            "{q}: a body of {} bytes, {carried} as the Lambda response carries it",
            reply.body.len()
        );
        listing.bodies.push(reply.body.len());
        let page = reply.json();
        for item in page["approvals"].as_array().expect("approvals") {
            listing
                .ids
                .push(item["id"].as_str().expect("id").to_owned());
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return listing,
        }
    }
}

/// Approvals as large as a create allows list in pages a Lambda can return: a page holds fewer
/// than `limit` of them, and following `next_cursor` lists each exactly once, newest first —
/// also where pending approvals past their expiry drop out of a `status=pending` page.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pages_of_large_approvals_fit_a_lambda_response_and_list_each_once() {
    use countersign::domain::{Approver, CreateRequest, IdempotencyKey, TenantId, fingerprint};
    use countersign::store::IdempotencyRecord;

    let t = TestApp::start().await;
    // The create route takes a body within its 64 KiB whose payload is written out at over
    // 190 KiB (of the 192 KiB allowed): `1e15` is written in full, `1000000000000000.0`.
    let numbers = vec!["1e15"; 10_300].join(",");
    let body = format!(
        r#"{{"action": {{"type": "deploy", "payload": {{"numbers": [{numbers}]}}}}, "approvers": ["{ALICE}"]}}"#
    );
    assert!(body.len() < countersign::http::CREATE_BODY_LIMIT);
    let id = t.create_ok(KEY_B, "large", &body).await;
    let written = t.get(KEY_B, &id).await.json()["action"]["payload"].to_string();
    assert!(written.len() > 190 * 1024, "{} bytes", written.len());

    // 50 in tenant A, each with a payload written out at over 190 KiB (a long text, quicker for
    // the test to read than numbers), written as the create route and dispatch write them: the
    // approval with its idempotency record, and the index items dispatch keeps from the stream.
    // Every fifth expires a minute after creation.
    let started = std::time::Instant::now();
    let tenant = TenantId::parse(TENANT_A).expect("tenant");
    let requester = Approver::parse("ci@acme").expect("requester");
    let now = t.clock.now();
    let short_lived = |i: usize| i.is_multiple_of(5);
    let text = "x".repeat(194_600);
    let made: Vec<(String, bool)> = futures::stream::iter(0..50)
        .map(|i| {
            let body = json!({
                "action": {"type": "deploy", "payload": {"n": i, "text": text}},
                "approvers": [ALICE],
                "expires_in_seconds": if short_lived(i) { 60 } else { 86_400 },
            });
            let (t, tenant, requester) = (&t, tenant.clone(), requester.clone());
            async move {
                let key = IdempotencyKey::parse(&format!("large-{i}")).expect("key");
                let approval = CreateRequest::parse(&body, |_| true)
                    .expect("a valid body")
                    .into_approval(tenant, requester, None, key.clone(), true, now);
                let record = IdempotencyRecord {
                    key,
                    fingerprint: fingerprint(&body),
                    approval_id: approval.id.clone(),
                    response_status: 201,
                    response_body: Vec::new(),
                    created_at: now,
                    expires_at: now + 86_400,
                };
                t.app
                    .store
                    .create_approval(&approval, &record, now)
                    .await
                    .expect("create");
                t.app
                    .store
                    .move_index_items(
                        &[countersign::store::StatusMove {
                            from: None,
                            approval: &approval,
                        }],
                        t.app.clock.now(),
                    )
                    .await
                    .expect("index");
                (approval.id.to_string(), short_lived(i))
            }
        })
        .buffer_unordered(4)
        .collect()
        .await;
    println!("50 large approvals written in {:?}", started.elapsed());
    // The short-lived ones are past their expiry; no sweeper has stored them expired.
    t.clock.advance(120);

    let newest_first = |pending_only: bool| -> Vec<String> {
        let mut ids: Vec<String> = made
            .iter()
            .filter(|(_, short_lived)| !(pending_only && *short_lived))
            .map(|(id, _)| id.clone())
            .collect();
        ids.sort_unstable_by(|a, b| b.cmp(a));
        ids
    };
    // (`limit=100`: more than a response holds; the page is cut by size.)
    for query in [
        format!("approver={ALICE}"),
        format!("approver={ALICE}&limit=100"),
        format!("status=pending&approver={ALICE}"),
        String::new(),
        "status=pending".to_owned(),
    ] {
        let listing = list_all(&t, KEY_A, &query).await;
        println!(
            "{query:?}: {} pages, bodies of {:?} bytes",
            listing.bodies.len(),
            listing.bodies
        );
        assert_eq!(
            listing.ids,
            newest_first(query.contains("status=pending")),
            "{query}: every approval once, newest first"
        );
    }
    println!("listed in {:?}", started.elapsed());
}

/// Each listed approval carries the key that resumes its query right after it — what DynamoDB
/// itself returns as LastEvaluatedKey when a page ends there — for every query a listing makes
/// (the approvals table's `by_status_keys`, one status or all of them merged, the approval index
/// and its `by_status`). A cursor given out before the upgrade to keys-only indexes (the dropped
/// `by_tenant`'s key) resumes the unfiltered listing too.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_listed_approval_resumes_its_query_right_after_it() {
    use countersign::domain::{ApprovalId, Status, TenantId};
    use countersign::store::ListQuery;

    let t = TestApp::start().await;
    let tenant = TenantId::parse(TENANT_A).expect("tenant");
    for i in 0..7 {
        let id = t
            .create_ok(
                KEY_A,
                &format!("resume-{i}"),
                &countersign_tests::deploy_body(i, &[ALICE]),
            )
            .await;
        let id = ApprovalId::parse(&id).expect("id");
        let approval = t
            .app
            .store
            .get_approval(&tenant, &id)
            .await
            .expect("read")
            .expect("made");
        // As dispatch indexes it from the stream.
        t.app
            .store
            .move_index_items(
                &[countersign::store::StatusMove {
                    from: None,
                    approval: &approval,
                }],
                t.app.clock.now(),
            )
            .await
            .expect("index");
    }
    for (status, approver) in [
        (None, None),
        (Some(Status::Pending), None),
        (None, Some(ALICE)),
        (Some(Status::Pending), Some(ALICE)),
    ] {
        let query = ListQuery {
            tenant: tenant.clone(),
            status,
            approver: approver.map(str::to_owned),
            requested_by: None,
        };
        let list = |start, limit| t.app.store.list_approvals(&query, start, limit);
        let all = list(None, 100).await.expect("list");
        let ids: Vec<&ApprovalId> = all.approvals.iter().map(|l| &l.approval.id).collect();
        assert_eq!(ids.len(), 7, "{query:?}");
        // A page that ends on an approval: DynamoDB's own key is the one the approval carries.
        let page = list(None, 3).await.expect("list");
        let last = page.approvals.last().expect("a page");
        assert_eq!(Some(&last.resume), page.next.as_ref(), "{query:?}");
        // Resumed after any of them, the query lists exactly the ones after it.
        for (i, listed) in all.approvals.iter().enumerate() {
            let rest = list(Some(listed.resume.clone()), 100).await.expect("list");
            let rest: Vec<&ApprovalId> = rest.approvals.iter().map(|l| &l.approval.id).collect();
            assert_eq!(rest, ids[i + 1..], "{query:?} after {}", ids[i]);
            if status.is_none() && approver.is_none() {
                let by_tenant = HashMap::from([
                    ("pk".to_owned(), format!("{TENANT_A}#{}", ids[i])),
                    ("tenant".to_owned(), TENANT_A.to_owned()),
                    ("id".to_owned(), ids[i].to_string()),
                ]);
                let rest = list(Some(by_tenant), 100).await.expect("list");
                let rest: Vec<&ApprovalId> =
                    rest.approvals.iter().map(|l| &l.approval.id).collect();
                assert_eq!(rest, ids[i + 1..], "a by_tenant cursor after {}", ids[i]);
            }
        }
    }
}
