//! The integration tests that run against the local AWS (moto, or whatever `AWS_ENDPOINT_URL`
//! names), built as one binary: one link of the AWS SDK and one local AWS for all of them,
//! instead of one of each per suite. Each module is a suite; every test still gets its own
//! tables, queues and downstream (`TestApp`), so suites share the process, never state.
//!
//! Apart, as their own binaries: `crash` (failpoints are a process-global registry), `browser`
//! (a real Chromium), `long_lived` (the local runner as one long-lived process) and `cli` (the
//! CLI binary).

mod alarms;
mod certificates;
mod claims;
mod create;
mod decide;
mod delegation;
mod delegation_graphs;
mod delegation_places;
mod email;
mod faults;
mod github;
mod github_review;
mod governance;
mod health;
mod helpers;
mod iam;
mod identity;
mod indexes;
mod jobs;
mod keys;
mod lifecycle;
mod listing;
mod listing_upgrade;
mod metrics;
mod minimum;
mod oidc_provider;
mod oidc_sign_in;
mod openapi;
mod operator;
mod passkeys;
mod policy;
mod policy_github;
mod policy_versions;
mod quorum;
mod resume;
mod resume_retries;
mod retention;
mod review;
mod round_trips;
mod scheduled;
mod secrets;
mod sign_in;
mod sign_in_refusals;
mod slack;
mod smoke;
mod stall;
mod status_checks;
mod template;
mod template_functions;
mod template_grants;
mod tenancy;
mod traces;
mod upgrade;
mod upgrade_executors;
mod validation;
mod wait;
mod webhooks;
