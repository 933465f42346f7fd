//! An approval's notifications, one job since v5 (issue 38): the executor calls each approver
//! not yet notified at once, so a job takes its slowest call, not the sum of its calls.
//! Measured on the local chain with a notifier that answers each call after 200 ms: how far
//! apart the three calls of one job arrive (one after another, they would be at least 200 ms
//! apart, 400 ms from first to last).

use std::time::{Duration, Instant};

use countersign_tests::{KEY_A, TestApp, deploy_body};

const APPROVERS: [&str; 3] = [
    "slow-a@example.com",
    "slow-b@example.com",
    "slow-c@example.com",
];

pub async fn run(approvals: usize) {
    let t = TestApp::start_jobs(&[]).await;
    let mut ids = Vec::new();
    for i in 0..approvals {
        let created = t
            .create(
                KEY_A,
                &format!("notify-bench-{i}"),
                &deploy_body(i as u64, &APPROVERS),
            )
            .await;
        assert_eq!(created.status, 201, "{}", created.text());
        ids.push(created.json()["id"].as_str().expect("an id").to_owned());
    }
    let downstream = t.downstream();
    let key = |id: &str, approver: &str| format!("{id}:notify:{approver}");
    let deadline = Instant::now() + Duration::from_secs(300);
    while !ids.iter().all(|id| {
        APPROVERS
            .iter()
            .all(|a| downstream.first_arrival(&key(id, a)).is_some())
    }) {
        assert!(Instant::now() < deadline, "the notifications never came");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut spreads: Vec<Duration> = ids
        .iter()
        .map(|id| {
            let arrivals: Vec<Instant> = APPROVERS
                .iter()
                .filter_map(|a| downstream.first_arrival(&key(id, a)))
                .collect();
            let first = arrivals.iter().min().expect("arrivals");
            let last = arrivals.iter().max().expect("arrivals");
            *last - *first
        })
        .collect();
    spreads.sort();
    let at = |q: f64| spreads[((spreads.len() as f64 * q) as usize).min(spreads.len() - 1)];
    let calls: usize = ids
        .iter()
        .map(|id| {
            APPROVERS
                .iter()
                .map(|a| downstream.calls(&key(id, a)))
                .sum::<usize>()
        })
        .sum();
    println!(
        "\nA notify job's three calls, each answered in 200 ms ({approvals} approvals, {calls} calls): \
         first to last arrival p50 {:.1} ms, max {:.1} ms (one after another: at least 400 ms)",
        at(0.5).as_secs_f64() * 1000.0,
        spreads.last().expect("spreads").as_secs_f64() * 1000.0,
    );
}
