//! Deciding in Slack (docs/SLACK.md): a tenant's Slack app ([`config`]), the
//! signature of its requests ([`signature`]), the message that follows each approval
//! ([`message`]), the clicks on its buttons ([`interaction`]) and the Web API calls ([`api`]).
//! The vote a click makes is the store's one conditional write, as on every channel; the
//! message is posted and updated by a job (the executor's Slack path).

pub mod api;
pub mod config;
pub mod interaction;
pub mod message;
pub mod signature;

pub use config::{SlackApp, SlackSecret, parse_slack, parse_slack_bot_tokens};
pub use interaction::{Click, parse_click};
pub use message::{MessageState, RuleLine};
