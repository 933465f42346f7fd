//! `countersign delegate set|show|end`: a person's delegation through the API, in text and
//! `--json`, and a vote in their place as `vote --as` sends it.

use countersign_tests::{ALICE, ALICE_KEY, BOB, BOB_KEY, CI_KEY};
use serde_json::json;

use crate::harness::{assert_has, countersign, run, start, stderr, stdout, stdout_json};

#[tokio::test]
async fn a_person_sets_shows_and_ends_their_delegation() {
    let t = start().await;
    let set = run(countersign(
        &t,
        ALICE_KEY,
        &[
            "delegate", "set", ALICE, "--to", BOB, "--for", "7d", "--reason", "holiday", "--json",
        ],
    ))
    .await
    .code(0);
    let delegation = stdout_json(&set);
    assert_eq!(delegation["delegate"], BOB);
    assert_eq!(delegation["reason"], "holiday");

    let shown = run(countersign(&t, ALICE_KEY, &["delegate", "show", ALICE]))
        .await
        .code(0);
    assert_has(
        &stdout(&shown),
        &format!("{BOB} votes in {ALICE}'s place from "),
    );

    // Bob votes in alice's place, naming her as `vote --as` does.
    let id = t
        .create_ok(
            CI_KEY,
            "cli-delegate",
            &json!({"action": {"type": "deploy"}, "approvers": [ALICE]}).to_string(),
        )
        .await;
    let voted = run(countersign(
        &t,
        BOB_KEY,
        &["vote", &id, "approve", "--as", ALICE],
    ))
    .await
    .code(0);
    assert_has(
        &stdout(&voted),
        &format!("{ALICE}, in their place by {BOB}, approve"),
    );

    // Bob may not end it; alice may, and then there is nothing to show.
    let refused = run(countersign(&t, BOB_KEY, &["delegate", "end", ALICE]))
        .await
        .code(4);
    assert_has(&stderr(&refused), "forbidden");
    let ended = run(countersign(&t, ALICE_KEY, &["delegate", "end", ALICE]))
        .await
        .code(0);
    assert_has(&stderr(&ended), "ended");
    let gone = run(countersign(&t, ALICE_KEY, &["delegate", "show", ALICE]))
        .await
        .code(4);
    assert_has(&stderr(&gone), "not_found");
}
