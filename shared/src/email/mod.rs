//! Email, a built-in channel (v7): the tenants of `EMAIL` have every approver whose identity is
//! an email address emailed through Amazon SES whenever a notification is due — the first
//! request, reminders, escalation steps, delegates' copies. Each email is its own job with its
//! own ledger item (`jobs::EmailJob`), sent at most once: SES takes no idempotency key, so an
//! email whose outcome is unknown is recorded so, never sent again.
//!
//! In parts: the configuration ([`config`]), what an email says ([`message`]) and the call to
//! SES ([`ses`]).

pub mod config;
pub mod message;
pub mod ses;

pub use config::{EmailSender, parse_email, recipient};
pub use message::{Composed, LinkUse, compose};
