//! What an approval costs on AWS (issue 24): four representative lives, each played on the
//! local stack the way Lambda runs it (`countersign_tests::chain`), every AWS request metered
//! and priced, written to `docs/COST.md`. The committed file must be what this test computes:
//! a change that makes an approval dearer (or cheaper) changes the file in the same commit.
//! `COUNTERSIGN_WRITE_COST=1 cargo test -p countersign-tests --test cost` rewrites it.
//!
//! Its parts, in `tests/cost/`: `prices` (each list price, its page and the day it was read),
//! `model` (a life's counts, and what they cost), `scenarios` (what is played on the stack),
//! `storage` (what a life leaves in the tables, and for how long), `deployment` (what the
//! template creates at its defaults), `bill` (a default deployment's month), `history` (the
//! target, and scenario (b) at each cut), `stall` (a reminder and an escalation step, counted
//! from the sweep that sends them), `agent_wait` (an MCP task's polls against held reads), and
//! `render` and `render_bill` (the file).

#[path = "cost/agent_wait.rs"]
mod agent_wait;
#[path = "cost/bill.rs"]
mod bill;
#[path = "cost/deployment.rs"]
mod deployment;
#[path = "cost/history.rs"]
mod history;
#[path = "cost/model.rs"]
mod model;
#[path = "cost/passkeys.rs"]
mod passkeys;
#[path = "cost/prices.rs"]
mod prices;
#[path = "cost/render.rs"]
mod render;
#[path = "cost/render_bill.rs"]
mod render_bill;
#[path = "cost/scenarios.rs"]
mod scenarios;
#[path = "cost/stall.rs"]
mod stall;
#[path = "cost/storage.rs"]
mod storage;

use countersign_tests::*;

use crate::history::CUTS;
use crate::render::{money, render};
use crate::scenarios::{idle_minute, lives};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_cost_of_an_approval_is_what_docs_cost_md_says() {
    let lives = lives().await;
    let idle = idle_minute().await;
    let stalls = stall::stalls().await;
    // Each request and its units, when asked for (COUNTERSIGN_COST_DETAIL=1): where to look
    // for the next cut.
    let detail = std::env::var_os("COUNTERSIGN_COST_DETAIL").is_some();
    let measured = [
        ("reminder", &stalls.reminder),
        ("escalation step", &stalls.escalation),
    ];
    for (name, life) in lives.iter().map(|(n, l)| (*n, l)).chain(measured) {
        for line in life.detail.iter().filter(|_| detail) {
            println!("{name} {line}");
        }
        let times: Vec<String> = life
            .measured_ms
            .iter()
            .map(|(function, ms)| {
                format!(
                    "{function} {ms:.0} ms (model {:.0})",
                    life.billed_ms[function]
                )
            })
            .collect();
        println!(
            "{name}: handler time on this machine, per function: {}",
            times.join(", ")
        );
    }
    let bill = bill::Bill {
        deployment: deployment::Deployment::read(),
        life: &lives[1].1,
        lives: &lives,
        idle: &idle,
    };
    let computed = render(&lives, &stalls, &bill);
    let path = workspace_root().join("docs/COST.md");
    if std::env::var_os("COUNTERSIGN_WRITE_COST").is_some() {
        std::fs::write(&path, &computed).expect("write docs/COST.md");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == computed,
        "docs/COST.md differs from what this test computes; rewrite it with \
         COUNTERSIGN_WRITE_COST=1 and commit it. Computed:\n{computed}"
    );
    // The cuts' table ends where the code is: a change that makes (b) dearer or cheaper adds
    // its row (and no figure in it is stale).
    let b = &lives[1].1;
    let (_, units, usd) = CUTS.last().expect("a first measurement");
    assert_eq!(
        (format!("{units:.0}"), money(*usd)),
        (format!("{:.0}", b.write_units), money(b.per_million())),
        "scenario (b) now; add a row to CUTS"
    );
}
