//! A delegate is told what the person they stand in for is told, while the delegation is in
//! force: for the notify jobs the dispatcher makes, one read of their approvers' delegations
//! (one eventually consistent `BatchGetItem` per tenant in the batch: a copy needs no fresher
//! answer), and a copy of the job for each delegate not listed already — its own job, ledger
//! item and keys, named by the delegate (one copy per delegate, however many of the listed
//! people they stand in for), its review link opening the page in the first of those places.

use std::collections::BTreeMap;

use super::job::{Job, NotifyJob};
use crate::App;
use crate::domain::{Approver, EpochSeconds, TenantId};
use crate::store::StoreError;

/// The delegates' copies of `jobs`' notifications at `now`.
pub(super) async fn copies(
    app: &App,
    jobs: &[Job],
    now: EpochSeconds,
) -> Result<Vec<Job>, StoreError> {
    let notify: Vec<&NotifyJob> = jobs
        .iter()
        .filter_map(|job| match job {
            Job::Notify(j) if j.in_place_of.is_none() && !j.per_approver => Some(j),
            _ => None,
        })
        .collect();
    let mut people: BTreeMap<&TenantId, Vec<&Approver>> = BTreeMap::new();
    for job in &notify {
        let listed = people.entry(&job.tenant).or_default();
        for approver in &job.approvers {
            if !listed.iter().any(|a| a.same_identity(approver)) {
                listed.push(approver);
            }
        }
    }
    let mut copies = Vec::new();
    for (tenant, listed) in people {
        let delegations = app.store.delegations_to_notify(tenant, &listed).await?;
        let in_force: Vec<_> = delegations
            .iter()
            .filter(|d| d.lets(&d.delegate, now))
            .collect();
        for job in notify.iter().filter(|j| j.tenant == *tenant) {
            // One copy per delegate (review of v6, finding 12): a delegate standing in for two
            // listed people is told once, in the place of the first of them the job lists.
            let mut told: Vec<&Approver> = Vec::new();
            for place in &job.approvers {
                for delegation in in_force.iter().filter(|d| d.delegator.same_identity(place)) {
                    let delegate = &delegation.delegate;
                    if job.approvers.iter().any(|a| a.same_identity(delegate))
                        || told.iter().any(|t| t.same_identity(delegate))
                    {
                        continue;
                    }
                    told.push(delegate);
                    copies.push(Job::Notify(NotifyJob {
                        approvers: vec![delegate.clone()],
                        in_place_of: Some(delegation.delegator.clone()),
                        ..(*job).clone()
                    }));
                }
            }
        }
    }
    Ok(copies)
}
