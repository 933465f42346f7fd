//! No lost webhook leaves a job waiting (docs/GITHUB.md): GitHub never
//! redelivers a failed delivery by itself, so every `GITHUB_REDELIVERY_SECONDS` the scheduled
//! sweep lists each tenant App's deliveries of the last 3 days (GitHub's window) and asks once
//! for each failed attempt of a delivery Countersign acts on that neither the inbox holds nor
//! any later attempt delivered: a redelivery that fails too is asked for again next period (it
//! is another attempt), an ask that fails is released and tried again, and an ask cut off (the
//! sweeper killed between its claim and its record) is taken back by the next period's sweep.
//! A sweep stops at its deadline, before it claims what it cannot ask.

use std::collections::{BTreeMap, HashSet};

use crate::App;
use crate::domain::{EpochSeconds, TenantId};
use crate::github::GithubApp;
use crate::github::api::{Delivery, GithubApi};
use crate::store::StoreError;

/// GitHub keeps (and redelivers) deliveries of the last 3 days.
const WINDOW_SECONDS: EpochSeconds = 3 * 86_400;
/// Pages of 100 read at most per sweep: 10,000 deliveries in 3 days.
const MAX_PAGES: usize = 100;
/// How long one tenant's listing may take: the sweeper's invocation lasts 60 s, and expiry and
/// the asks need their share. A listing cut short resumes from the newest next period, which
/// is where lost deliveries that matter most are.
const LISTING_BUDGET: std::time::Duration = std::time::Duration::from_secs(20);
/// How long one sweep may take, every tenant's listing and asks together: inside the sweeper's
/// 60 s, after expiry. Past it, nothing more is claimed; the rest is next period's.
const SWEEP_BUDGET: std::time::Duration = std::time::Duration::from_secs(40);

/// How long a sweep's claim of an attempt holds before another sweep may take it back: a
/// period, and never less than a sweep may run (its deadline, with room for the ask in flight),
/// so that no two live sweeps ask for one attempt.
fn claim_lease_seconds(app: &App) -> EpochSeconds {
    let least = i64::try_from(SWEEP_BUDGET.as_secs()).unwrap_or(40) + 20;
    app.config.github_redelivery_seconds.max(least)
}

/// What one sweep of the App's deliveries did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Redelivered {
    /// Deliveries asked for again.
    pub asked: usize,
    /// Tenants whose deliveries could not be listed or asked for (tried again next period).
    pub failures: usize,
}

/// Sweeps every tenant's App whose period is due (one sweep per period, however many run at
/// once: the store's claim).
pub async fn sweep(app: &App, api: &GithubApi) -> Result<Redelivered, StoreError> {
    let now = app.clock.now();
    let deadline = std::time::Instant::now() + SWEEP_BUDGET;
    let mut done = Redelivered::default();
    let secrets = app.secrets();
    for (tenant, github) in &secrets.github {
        if std::time::Instant::now() >= deadline {
            tracing::warn!("GitHub deliveries' sweep at its deadline; the rest next period");
            break;
        }
        if !app
            .store
            .claim_github_sweep(tenant, app.config.github_redelivery_seconds, now)
            .await?
        {
            continue;
        }
        match sweep_tenant(app, api, (tenant, github), now, deadline).await {
            Ok(asked) => done.asked += asked,
            Err(problem) => {
                tracing::error!(
                    tenant = tenant.as_str(),
                    problem,
                    "GitHub deliveries not swept; again next period"
                );
                done.failures += 1;
            }
        }
    }
    Ok(done)
}

async fn sweep_tenant(
    app: &App,
    api: &GithubApi,
    (tenant, github): (&TenantId, &GithubApp),
    now: EpochSeconds,
    deadline: std::time::Instant,
) -> Result<usize, String> {
    // GitHub's window is in its own time: the wall clock, not the app's.
    let since = time::OffsetDateTime::now_utc().unix_timestamp() - WINDOW_SECONDS;
    let mut deliveries: Vec<Delivery> = Vec::new();
    let mut cursor: Option<String> = None;
    let started = std::time::Instant::now();
    for _ in 0..MAX_PAGES {
        if started.elapsed() > LISTING_BUDGET {
            tracing::warn!(
                tenant = tenant.as_str(),
                "GitHub deliveries listed in part; the rest next period"
            );
            break;
        }
        let page = api.deliveries(github, cursor.as_deref()).await?;
        let past_window = page.deliveries.iter().any(|d| d.delivered_at < since);
        deliveries.extend(
            page.deliveries
                .into_iter()
                .filter(|d| d.delivered_at >= since),
        );
        match page.next {
            Some(next) if !past_window => cursor = Some(next),
            _ => break,
        }
    }
    let lost = lost(&deliveries);
    if lost.is_empty() {
        return Ok(0);
    }
    let guids: Vec<String> = lost.keys().cloned().collect();
    let held: HashSet<String> = app
        .store
        .github_deliveries_held(tenant, &guids)
        .await
        .map_err(|e| e.to_string())?;
    let mut asked = 0;
    for (guid, delivery) in lost {
        if held.contains(&guid) {
            continue;
        }
        if std::time::Instant::now() >= deadline {
            tracing::warn!(
                tenant = tenant.as_str(),
                "GitHub deliveries' sweep at its deadline; the rest next period"
            );
            break;
        }
        // Once per failed attempt: of any number of sweeps, one asks. The claim lasts a period
        // (a minute at least): if this sweep dies before it records the ask, the next period's
        // sweep asks.
        if !app
            .store
            .claim_github_redelivery(tenant, delivery, (now, claim_lease_seconds(app)))
            .await
            .map_err(|e| e.to_string())?
        {
            continue;
        }
        fail::fail_point!("redelivery::after_claim", |_| Err(
            "the sweep was cut off after its claim".to_owned()
        ));
        if let Err(problem) = api.redeliver(github, delivery).await {
            // Not asked: released, so that the next sweep asks.
            if let Err(e) = app.store.release_github_redelivery(tenant, delivery).await {
                tracing::warn!(tenant = tenant.as_str(), error = %e, "a redelivery's claim not released");
            }
            return Err(problem);
        }
        tracing::info!(
            tenant = tenant.as_str(),
            delivery = guid,
            attempt = delivery,
            "GitHub delivery asked for again"
        );
        // Not recorded (the sweep dies here, or the write fails): the lease ends and the next
        // period asks again, which GitHub answers with one more attempt of the same delivery
        // id — the inbox takes it once.
        if let Err(e) = app
            .store
            .github_redelivery_asked(tenant, delivery, now)
            .await
        {
            tracing::warn!(tenant = tenant.as_str(), error = %e, "a redelivery's ask not recorded; asked again next period");
        }
        asked += 1;
    }
    Ok(asked)
}

/// The deliveries lost: by guid, those with no successful attempt, each with its newest failed
/// attempt's id (the one asked for again).
fn lost(deliveries: &[Delivery]) -> BTreeMap<String, u64> {
    let delivered: HashSet<&str> = deliveries
        .iter()
        .filter(|d| d.succeeded())
        .map(|d| d.guid.as_str())
        .collect();
    let mut lost: BTreeMap<String, (EpochSeconds, u64)> = BTreeMap::new();
    for d in deliveries.iter().filter(|d| !d.succeeded() && d.acted_on()) {
        if delivered.contains(d.guid.as_str()) {
            continue;
        }
        let newest = lost.entry(d.guid.clone()).or_insert((d.delivered_at, d.id));
        if (d.delivered_at, d.id) > *newest {
            *newest = (d.delivered_at, d.id);
        }
    }
    lost.into_iter().map(|(g, (_, id))| (g, id)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery(id: u64, guid: &str, at: EpochSeconds, status_code: u16) -> Delivery {
        Delivery {
            id,
            guid: guid.into(),
            delivered_at: at,
            redelivery: false,
            status_code,
            event: "deployment_protection_rule".into(),
            action: Some("requested".into()),
        }
    }

    #[test]
    fn a_delivery_is_lost_only_while_none_of_its_attempts_succeeded() {
        let deliveries = [
            delivery(1, "a", 10, 500),
            delivery(2, "a", 20, 0),
            delivery(3, "b", 10, 502),
            delivery(4, "b", 30, 200),
            delivery(5, "c", 15, 200),
            Delivery {
                event: "workflow_run".into(),
                action: Some("in_progress".into()),
                ..delivery(6, "d", 15, 500)
            },
            Delivery {
                event: "workflow_run".into(),
                action: Some("completed".into()),
                ..delivery(7, "e", 15, 500)
            },
        ];
        let lost = lost(&deliveries);
        assert_eq!(
            lost.into_iter().collect::<Vec<_>>(),
            [("a".to_owned(), 2), ("e".to_owned(), 7)],
            "a workflow run's progress is not worth asking for; its end is"
        );
    }
}
