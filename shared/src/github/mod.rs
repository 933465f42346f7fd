//! Gating a GitHub deployment (docs/GITHUB.md): a tenant's GitHub App
//! ([`config`]), the signature of its webhook deliveries ([`signature`]), the events acted on
//! ([`event`]) and the App's calls ([`api`]: its JWT, installation tokens, the answer to a
//! waiting rule, its deliveries). Opening and joining a round are the store's conditional
//! writes; the answer is a job with its ledger, like every call Countersign makes.

pub mod api;
pub mod config;
pub mod event;
pub mod round;
pub mod signature;

pub use config::{
    GithubApp, GithubEnvironment, GithubSecret, parse_github, parse_github_private_keys,
};
pub use event::{DeploymentRequest, GithubEvent, RunCompleted};
pub use round::round_approval;
