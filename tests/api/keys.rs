//! Table API keys (docs/KEYS.md): a key works on its first request, costs one
//! `GetItem` on a cold cache and none warm, a typo never reaches DynamoDB, revocation reaches a
//! warm function within `KEY_CACHE_SECONDS`, expiry holds to the second, a roll overlaps, one id
//! is created once however many race, and `last_used_at` is written at most hourly.

use std::time::Duration;

use countersign::domain::{Approver, KeyId, KeyRecord, TableKey, TenantId};
use countersign::store::KeyRefusal;
use countersign_tests::{
    ALICE, BOB, TENANT_A, TestApp, decision_body, deploy_body, eventually, table_key,
};
use futures::StreamExt;

/// Any route behind a key: a malformed approval id is 404 once the key is accepted, with no
/// DynamoDB call of its own, so what is counted is the key's.
async fn status_with(t: &TestApp, key: &str) -> u16 {
    t.send(t.http.get(t.url("/approvals/nope")).bearer_auth(key))
        .await
        .status
}

/// The key's `last_used_at` writes settle after the answer; wait for them before counting.
async fn settled(t: &TestApp) -> Vec<String> {
    tokio::time::sleep(Duration::from_millis(300)).await;
    t.calls.take()
}

#[tokio::test]
async fn a_created_key_works_at_once_and_a_mistyped_one_never_reaches_dynamodb() {
    let t = TestApp::start().await;
    let key = table_key(&t.app.store, TENANT_A, "ci@tenant-a", &["requester"], None).await;
    t.calls.take();
    assert_eq!(
        status_with(&t, key.expose()).await,
        404,
        "accepted on its first request"
    );
    let first = settled(&t).await;
    assert_eq!(
        first.iter().filter(|c| *c == "GetItem").count(),
        1,
        "{first:?}"
    );

    let text = key.expose();
    let changed_secret = format!(
        "{}{}{}",
        &text[..30],
        if &text[30..31] == "a" { "b" } else { "a" },
        &text[31..]
    );
    let bad_check = format!(
        "{}{}",
        &text[..text.len() - 1],
        if text.ends_with('0') { "1" } else { "0" }
    );
    let unknown = TableKey::generate(KeyId::random());
    for (what, presented) in [
        ("a changed character", changed_secret.as_str()),
        ("a bad checksum", &bad_check),
    ] {
        assert_eq!(status_with(&t, presented).await, 401, "{what}");
        assert!(
            t.calls.take().is_empty(),
            "{what}: refused without a DynamoDB call"
        );
    }
    // Well formed but never created: one GetItem, nothing cached (asked again next time).
    for _ in 0..2 {
        assert_eq!(status_with(&t, unknown.expose()).await, 401);
        assert_eq!(t.calls.take(), ["GetItem"], "no negative caching");
    }
    // The same id with another secret: the hash differs.
    let impostor = TableKey::generate(key.id().clone());
    assert_eq!(status_with(&t, impostor.expose()).await, 401);
    let text = t
        .send(
            t.http
                .get(t.url("/approvals/nope"))
                .bearer_auth(impostor.expose()),
        )
        .await;
    text.assert_problem(401, "unauthorized");
}

#[tokio::test]
async fn a_revoked_key_stops_within_the_cache_time_and_an_expired_one_at_the_second() {
    let t = TestApp::start_with(&[("KEY_CACHE_SECONDS", "5")]).await;
    let now = t.clock.now();
    let revoked = table_key(&t.app.store, TENANT_A, "ci@tenant-a", &["reader"], None).await;
    let expiring = table_key(
        &t.app.store,
        TENANT_A,
        "bot@tenant-a",
        &["reader"],
        Some(now + 20),
    )
    .await;
    assert_eq!(status_with(&t, revoked.expose()).await, 404);
    assert_eq!(status_with(&t, expiring.expose()).await, 404);

    t.app.store.revoke_key(revoked.id(), now).await.unwrap();
    // Warm and cached: still served for at most KEY_CACHE_SECONDS...
    assert_eq!(status_with(&t, revoked.expose()).await, 404, "cached");
    // The test clock is the real one plus an offset: the margins leave room for the
    // real seconds a slow machine spends between two requests.
    t.clock.advance(15);
    assert_eq!(
        status_with(&t, revoked.expose()).await,
        401,
        "refused once the cache time is over"
    );
    assert_eq!(
        status_with(&t, expiring.expose()).await,
        404,
        "seconds before its expiry"
    );
    t.clock.advance(5);
    assert_eq!(
        status_with(&t, expiring.expose()).await,
        401,
        "at its expiry, cached or not"
    );
    assert!(matches!(
        t.app.store.revoke_key(revoked.id(), now).await,
        Err(KeyRefusal::Revoked(_))
    ));
    assert!(matches!(
        t.app.store.revoke_key(&KeyId::random(), now).await,
        Err(KeyRefusal::Unknown(_))
    ));
}

#[tokio::test]
async fn a_rolled_key_overlaps_its_successor_then_ends() {
    let t = TestApp::start_with(&[("KEY_CACHE_SECONDS", "0")]).await;
    let now = t.clock.now();
    let old = table_key(
        &t.app.store,
        TENANT_A,
        "ci@tenant-a",
        &["requester", "reader"],
        None,
    )
    .await;
    let record = t.app.store.key(old.id()).await.unwrap().unwrap();
    let new = TableKey::generate(KeyId::random());
    let successor = KeyRecord {
        id: new.id().clone(),
        key_hash: new.digest(),
        ..record
    };
    t.app
        .store
        .roll_key(old.id(), &successor, (now, now + 60))
        .await
        .unwrap();
    for key in [&old, &new] {
        assert_eq!(
            status_with(&t, key.expose()).await,
            404,
            "both work during the overlap"
        );
    }
    let id = t
        .create_ok(new.expose(), "rolled", &deploy_body(1, &[ALICE]))
        .await;
    assert_eq!(t.get(old.expose(), &id).await.status, 200);
    t.clock.advance(60);
    assert_eq!(
        status_with(&t, old.expose()).await,
        401,
        "the old key ended"
    );
    assert_eq!(
        status_with(&t, new.expose()).await,
        404,
        "the new one goes on"
    );
    // A revoked key has no successor.
    t.app
        .store
        .revoke_key(new.id(), t.clock.now())
        .await
        .unwrap();
    let again = TableKey::generate(KeyId::random());
    let record = t.app.store.key(new.id()).await.unwrap().unwrap();
    let refused = KeyRecord {
        id: again.id().clone(),
        key_hash: again.digest(),
        revoked_at: None,
        ..record
    };
    assert!(matches!(
        t.app
            .store
            .roll_key(new.id(), &refused, (t.clock.now(), t.clock.now() + 60))
            .await,
        Err(KeyRefusal::Revoked(_))
    ));
    assert_eq!(
        t.app.store.key(again.id()).await.unwrap(),
        None,
        "nothing written"
    );
    // Review of v5, finding 8: an expired key has no successor either (rolling it would
    // revive it), and its expiry stays.
    let (expired, now) = (old.id(), t.clock.now());
    let revived = TableKey::generate(KeyId::random());
    let record = t.app.store.key(expired).await.unwrap().unwrap();
    let ended_at = record.expires_at;
    let refused = KeyRecord {
        id: revived.id().clone(),
        key_hash: revived.digest(),
        expires_at: None,
        ..record
    };
    assert!(matches!(
        t.app
            .store
            .roll_key(expired, &refused, (now, now + 3600))
            .await,
        Err(KeyRefusal::Expired(_))
    ));
    assert_eq!(t.app.store.key(revived.id()).await.unwrap(), None);
    assert_eq!(
        t.app.store.key(expired).await.unwrap().unwrap().expires_at,
        ended_at
    );
    assert_eq!(status_with(&t, old.expose()).await, 401, "still ended");
}

/// A key that expires sooner than the roll's overlap keeps its expiry: the successor is put
/// beside a check of the old key (still live, still unexpired, still that expiry) in one
/// transaction.
#[tokio::test]
async fn rolling_a_key_that_expires_sooner_keeps_its_expiry() {
    let t = TestApp::start_with(&[("KEY_CACHE_SECONDS", "0")]).await;
    let now = t.clock.now();
    let old = table_key(
        &t.app.store,
        TENANT_A,
        "ci@tenant-a",
        &["requester", "reader"],
        Some(now + 30),
    )
    .await;
    let record = t.app.store.key(old.id()).await.unwrap().unwrap();
    let new = TableKey::generate(KeyId::random());
    let successor = KeyRecord {
        id: new.id().clone(),
        key_hash: new.digest(),
        expires_at: None,
        ..record
    };
    t.app
        .store
        .roll_key(old.id(), &successor, (now, now + 3600))
        .await
        .unwrap();
    assert_eq!(
        t.app.store.key(old.id()).await.unwrap().unwrap().expires_at,
        Some(now + 30),
        "the sooner expiry kept"
    );
    assert_eq!(
        status_with(&t, new.expose()).await,
        404,
        "the successor works"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_creates_of_one_key_id_make_one_key() {
    let t = TestApp::start().await;
    let id = KeyId::random();
    let attempts = futures::stream::iter(0..200)
        .map(|i| {
            let store = t.app.store.clone();
            let id = id.clone();
            async move {
                let key = TableKey::generate(id.clone());
                let record = KeyRecord {
                    id,
                    tenant: TenantId::parse(TENANT_A).unwrap(),
                    principal: Approver::parse(&format!("p{i}@tenant-a")).unwrap(),
                    roles: vec!["reader".into()],
                    key_hash: key.digest(),
                    created_at: 0,
                    created_by: "race".into(),
                    description: None,
                    expires_at: None,
                    revoked_at: None,
                    last_used_at: None,
                };
                (store.create_key(&record).await, key)
            }
        })
        .buffer_unordered(200)
        .collect::<Vec<_>>()
        .await;
    let winners: Vec<_> = attempts.iter().filter(|(r, _)| r.is_ok()).collect();
    let refused = attempts
        .iter()
        .filter(|(r, _)| matches!(r, Err(KeyRefusal::Exists(_))))
        .count();
    assert_eq!(
        (winners.len(), refused),
        (1, 199),
        "one key, every other create refused"
    );
    assert_eq!(
        status_with(&t, winners[0].1.expose()).await,
        404,
        "the winner's key works"
    );
    let losers_work = attempts
        .iter()
        .filter(|(r, _)| r.is_err())
        .take(5)
        .map(|(_, k)| k.expose().to_owned())
        .collect::<Vec<_>>();
    for key in losers_work {
        assert_eq!(
            status_with(&t, &key).await,
            401,
            "a refused create's key never works"
        );
    }
}

/// 1,000 keys of 100 tenants: one `GetItem` each on a cold cache, none warm.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_keys_cost_one_get_item_each_cold_and_none_warm() {
    let t = TestApp::start_with(&[("KEY_CACHE_SECONDS", "300")]).await;
    let keys: Vec<TableKey> = futures::stream::iter(0..1000)
        .map(|i| {
            let store = t.app.store.clone();
            async move {
                let tenant = format!("tenant-{}", i % 100);
                table_key(
                    &store,
                    &tenant,
                    &format!("p{i}@{tenant}"),
                    &["reader"],
                    None,
                )
                .await
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    t.calls.take();
    let authenticate = |keys: Vec<TableKey>| {
        let t = &t;
        async move {
            futures::stream::iter(keys)
                .map(|k| async move { status_with(t, k.expose()).await })
                .buffer_unordered(8)
                .collect::<Vec<u16>>()
                .await
        }
    };
    let started = std::time::Instant::now();
    let cold = authenticate(keys.clone()).await;
    let cold_time = started.elapsed();
    assert!(cold.iter().all(|s| *s == 404), "every key accepted");
    // The last_used_at writes land after the answers: gather the calls until they have.
    let mut calls = Vec::new();
    for _ in 0..300 {
        calls.extend(t.calls.take());
        if calls.iter().filter(|c| *c == "UpdateItem").count() >= 1000 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    calls.extend(settled(&t).await);
    let count = |op: &str| calls.iter().filter(|c| *c == op).count();
    assert_eq!(count("GetItem"), 1000, "one GetItem per key, cold");
    assert_eq!(count("UpdateItem"), 1000, "last_used_at once per key");
    assert_eq!(calls.len(), 2000, "nothing else: {:?}", &calls[..10]);
    let started = std::time::Instant::now();
    let warm = authenticate(keys).await;
    let warm_time = started.elapsed();
    assert!(warm.iter().all(|s| *s == 404));
    assert_eq!(
        settled(&t).await,
        Vec::<String>::new(),
        "no DynamoDB call on a warm cache"
    );
    // Figures, not pass marks: the cold pass pays one GetItem per key (and sends the
    // last_used_at writes beside it), the warm pass none. Seconds for 1000 requests
    // read as milliseconds of wall time per request.
    println!(
        "keys: 1000 keys, 100 tenants, 8 at a time: cold {:.2} ms wall per request (1000 GetItem), warm {:.2} ms (0)",
        cold_time.as_secs_f64(),
        warm_time.as_secs_f64()
    );
}

#[tokio::test]
async fn last_used_at_is_written_at_most_once_an_hour() {
    // No cache: every request reads the item, and the hour is kept by the item's own time.
    let t = TestApp::start_with(&[("KEY_CACHE_SECONDS", "0")]).await;
    let key = table_key(&t.app.store, TENANT_A, "ci@tenant-a", &["reader"], None).await;
    t.calls.take();
    let mut writes = 0;
    for round in 0..3 {
        let started = t.clock.now();
        for _ in 0..10 {
            assert_eq!(status_with(&t, key.expose()).await, 404);
        }
        let calls = settled(&t).await;
        writes += calls.iter().filter(|c| *c == "UpdateItem").count();
        assert_eq!(writes, round + 1, "round {round}: {calls:?}");
        let stored = t.app.store.key(key.id()).await.unwrap().unwrap();
        let used = stored.last_used_at.expect("written");
        assert!((started..=t.clock.now()).contains(&used), "{used}");
        t.clock.advance(3600);
    }
}

/// The approval records which table key asked, and the trail's actors which key acted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_trail_names_the_table_key_that_acted() {
    // The trail is derived from the approvals stream, by dispatch.
    let t = TestApp::start_jobs(&[]).await;
    let ci = table_key(
        &t.app.store,
        TENANT_A,
        "ci@tenant-a",
        &["requester", "reader"],
        None,
    )
    .await;
    let portal = table_key(
        &t.app.store,
        TENANT_A,
        "portal@tenant-a",
        &["decider"],
        None,
    )
    .await;
    let id = t
        .create_ok(ci.expose(), "by-key", &deploy_body(2, &[ALICE, BOB]))
        .await;
    let approval = t.get(ci.expose(), &id).await.json();
    assert_eq!(approval["requested_by"], "ci@tenant-a");
    assert_eq!(approval["requested_by_key_id"], ci.id().as_str());
    let voted = t
        .decide(portal.expose(), &id, decision_body("approve", ALICE))
        .await;
    assert_eq!(voted.status, 200, "{}", voted.text());
    eventually("the vote in the trail", || async {
        let trail = t.trail(ci.expose(), &id, 10).await;
        trail.iter().any(|e| e["type"] == "approval.vote_recorded")
    })
    .await;
    let trail = t.trail(ci.expose(), &id, 10).await;
    let created = &trail[0];
    assert_eq!(created["type"], "approval.created");
    assert_eq!(created["actor"]["key_id"], ci.id().as_str());
    let vote = trail
        .iter()
        .find(|e| e["type"] == "approval.vote_recorded")
        .expect("the vote");
    assert_eq!(vote["actor"]["key_id"], portal.id().as_str());
    assert_eq!(vote["actor"]["approver"], ALICE);
}
