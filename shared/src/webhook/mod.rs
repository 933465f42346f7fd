//! Webhook ingestion: Standard Webhooks signatures prove where an event came from; the inbox
//! (in the store) proves we have not handled it before.

mod inbound;
mod signature;

pub use inbound::{WebhookEvent, parse_event};
pub use signature::{SignatureError, TOLERANCE_SECONDS, WebhookSecret, verify};

/// The largest webhook body accepted; checked before any HMAC work.
pub const BODY_LIMIT: usize = 256 * 1024;
