//! `make bench`: Countersign's hot paths against the raw DynamoDB operations they are made of,
//! side by side in one run, on the local AWS (moto, serialized — or `AWS_ENDPOINT_URL`).
//!
//! For each operation and concurrency (1, 8, 32) it measures throughput and p50/p99 latency of
//! the raw SDK calls (no Countersign code), of the real router in-process, and of the router
//! over loopback HTTP; with the DynamoDB round trips per operation counted by an SDK
//! interceptor. Then the cold start of each function binary (release) under a loopback Runtime
//! API, the binary and zip sizes, the per-request CPU work, and the decision-to-effect latency
//! through the whole chain on one local runner, a listing page beside the requests it is made
//! of (`--listing` runs only that), how far apart a notify job's calls go out (`--notify`), and
//! a create's approval-policy evaluation and overhead (`--policy`), and what a passkey vote and
//! a 3-of-5 certificate cost (`--passkeys`). The last line is `overhead-ratio: …`
//! (in-process ops/s ÷ raw ops/s at concurrency 8; the router writes its metrics, as in Lambda,
//! into memory here). `--effect` runs only the last part, `--paths` only the first, `--cpu`
//! only the per-request CPU work.

mod cold_start;
mod cpu;
mod effect;
mod listing;
mod notify;
mod passkeys;
mod paths;
mod policy;

use std::time::{Duration, Instant};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    println!("Countersign benchmark — {}", machine());
    if std::env::args().any(|a| a == "--effect") {
        effects(quick).await;
        return;
    }
    if std::env::args().any(|a| a == "--cpu") {
        cpu::run();
        return;
    }
    if std::env::args().any(|a| a == "--listing") {
        listing::run(if quick { 40 } else { 150 }).await;
        return;
    }
    if std::env::args().any(|a| a == "--policy") {
        policy::run(if quick { 40 } else { 150 }).await;
        return;
    }
    if std::env::args().any(|a| a == "--passkeys") {
        passkeys::run(quick);
        return;
    }
    if std::env::args().any(|a| a == "--notify") {
        notify::run(if quick { 10 } else { 40 }).await;
        return;
    }
    let ratios = paths::run(if quick { 40 } else { 150 }).await;
    // `--paths`: the request paths and their ratios alone.
    if !std::env::args().any(|a| a == "--paths") {
        listing::run(if quick { 40 } else { 150 }).await;
        notify::run(if quick { 10 } else { 40 }).await;
        policy::run(if quick { 40 } else { 150 }).await;
        cold_start::run(if quick { 5 } else { 20 }).await;
        cpu::run();
        effects(quick).await;
    }
    println!(
        "table-size-ratio: create first on 20,000 approvals / on empty tables = {:.2}",
        ratios.table_size
    );
    println!(
        "overhead-ratio: create={:.2} decide={:.2} vote={:.2} vote-completing={:.2} webhook={:.2} github-event={:.2} reminder={:.2} resume={:.2}",
        ratios.create,
        ratios.decide,
        ratios.vote,
        ratios.vote_completing,
        ratios.webhook,
        ratios.github,
        ratios.reminder,
        ratios.resume
    );
}

/// Decision to effect: one at a time (the chain's own latency), then 200 at concurrency 8 (with
/// the queueing a burst of decisions meets).
async fn effects(quick: bool) {
    effect::run(if quick { 10 } else { 30 }, 1).await;
    effect::run(if quick { 50 } else { 200 }, 8).await;
}

fn machine() -> String {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    format!("{cpus} CPUs ({model})")
}

/// Latency figures of one run.
#[derive(Clone)]
pub struct Stats {
    pub ops_per_s: f64,
    pub p50: Duration,
    pub p99: Duration,
}

impl Stats {
    pub fn from(mut latencies: Vec<Duration>, wall: Duration) -> Self {
        latencies.sort();
        let at =
            |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
        Self {
            ops_per_s: latencies.len() as f64 / wall.as_secs_f64(),
            p50: at(0.50),
            p99: at(0.99),
        }
    }
}

/// Runs `ops` operations, `concurrency` at a time; each returns its own latency.
pub async fn drive<F, Fut>(ops: usize, concurrency: usize, op: F) -> Stats
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    use futures::StreamExt;
    let started = Instant::now();
    let latencies: Vec<Duration> = futures::stream::iter(0..ops)
        .map(|i| {
            let fut = op(i);
            async move {
                let t = Instant::now();
                fut.await;
                t.elapsed()
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    Stats::from(latencies, started.elapsed())
}
