//! The ledger item of an approval's Slack message (`{approval_id}#slack`): where the message is
//! once posted, the newest state shown (`shown`, the stream position of the change it shows),
//! and who draws it now (a token and a lease, as for every job). One worker at a time draws
//! the message, and never a state older than one already shown or being shown: that is what
//! keeps a late, older render from overwriting a newer one (Slack's `chat.update` has no
//! condition of its own). `chat.postMessage` has no idempotency key, so a post whose outcome is
//! unknown leaves `post_doubt`, and whoever draws next looks for the message before posting.

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, TransactWriteItem, Update};

use super::{LedgerKey, values};
use crate::domain::{EpochSeconds, SlackMessage};
use crate::store::attr::{Item, epoch, get_n, n, opt_s, s};
use crate::store::client::{ConditionalUpdate, Store, Transaction, condition_failed_item};
use crate::store::codec::slack_message_to_attr;
use crate::store::conditions::ONLY_IF_EXISTS;
use crate::store::error::StoreError;
use crate::store::expr::names;
use crate::store::keys::approval_key;
use crate::store::size::{MAX_REPORT_CHARS, cut};

/// only_if_claimable: nobody drew the message yet, or this state is newer than the one shown
/// and not older than the last one claimed (the same one again, after its worker stopped),
/// nobody holds a lease — a lease its worker never released counts until it ended a settling
/// time ago (`:abandoned_before`), as its last call may still reach Slack — and the last hold
/// (Slack's `Retry-After`, or a call whose outcome is unknown settling) has passed.
const ONLY_IF_CLAIMABLE: &str = "attribute_not_exists(#pk) \
     OR ((attribute_not_exists(#shown) OR #shown < :version) \
     AND (attribute_not_exists(#claimed) OR #claimed <= :version) \
     AND (attribute_not_exists(#lease_until) OR #lease_until <= :abandoned_before) \
     AND (attribute_not_exists(#not_before) OR #not_before <= :now_ms))";

const CLAIM: &str = "SET #claimed = :version, #token = :token, #lease_until = :lease_until, \
     #kind = :kind, #approval_id = :approval_id, #tenant = :tenant, #updated_at = :now \
     ADD #claims :one";

/// only_if_holder: the worker still holds the lease it claimed.
const ONLY_IF_HOLDER: &str = "#token = :token";

/// How a claim to draw the message ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlackClaim {
    /// This worker draws the message until its lease ends.
    Claimed {
        /// Where the message is, if it was posted.
        message: Option<SlackMessage>,
        /// Not posted as far as the ledger knows, but a post may have reached Slack (its
        /// answer was lost, or its worker stopped): look before posting.
        doubt: bool,
    },
    /// A state as new or newer is shown, or being shown: nothing to draw.
    Stale,
    /// Another worker draws the message now, or Slack asked for a pause until `not_before_ms`.
    Busy { not_before_ms: Option<i64> },
}

/// Why a claim ends without the state shown, and what it learnt.
#[derive(Debug, Clone, Copy)]
pub struct SlackRelease<'a> {
    pub error: &'a str,
    /// A post was sent whose outcome is unknown: the doubt stays until the message is found
    /// or posted.
    pub posted_in_doubt: bool,
    /// Where the message is, if a lookup found it.
    pub learnt: Option<&'a SlackMessage>,
    /// No claim before then (epoch ms): Slack answered `ratelimited`, or a call whose outcome
    /// is unknown may still land.
    pub not_before_ms: Option<i64>,
}

fn message_of(item: &Item) -> Option<SlackMessage> {
    Some(SlackMessage {
        channel: opt_s(item, "channel")?,
        ts: opt_s(item, "ts")?,
    })
}

impl Store {
    /// Claims the drawing of the message, for the state at stream position `version`.
    pub async fn claim_slack_message(
        &self,
        key: &LedgerKey,
        version: &str,
        token: &str,
        (now, now_ms): (EpochSeconds, i64),
        lease_until_ms: i64,
        settle_ms: i64,
    ) -> Result<SlackClaim, StoreError> {
        let mut vals = values(&[
            (":version", s(version)),
            (":token", s(token)),
            (":lease_until", n(lease_until_ms)),
            (":now_ms", n(now_ms)),
            (":abandoned_before", n(now_ms - settle_ms)),
            (":kind", s(key.kind())),
            (":approval_id", s(key.approval_id.as_str())),
            (":tenant", s(key.tenant.as_str())),
            (":now", epoch(now)),
            (":one", n(1)),
        ]);
        let update = self.job_retained(CLAIM, &mut vals, (now, key.expires_at));
        let claim = ConditionalUpdate {
            table: &self.tables.execution_ledger,
            key: s(key.pk()),
            update: &update,
            condition: ONLY_IF_CLAIMABLE,
            names: names(&[&update, ONLY_IF_CLAIMABLE]),
            values: vals,
            returning: ReturnValue::AllOld,
        };
        match self.conditional_update(claim).await? {
            Ok(None) => Ok(SlackClaim::Claimed {
                message: None,
                doubt: false,
            }),
            Ok(Some(old)) => {
                let message = message_of(&old);
                // A lease never released: its worker stopped, perhaps after posting.
                let unreleased = old.contains_key("lease_until");
                let doubt = message.is_none()
                    && (unreleased || old.get("post_doubt") == Some(&AttributeValue::Bool(true)));
                Ok(SlackClaim::Claimed { message, doubt })
            }
            Err(None) => Err(StoreError::corrupt("the claim's refused item")),
            Err(Some(old)) => {
                // Our own claim: it applied, its answer was lost, and the SDK's retry met it.
                // What the item held before is gone: look before posting.
                if opt_s(&old, "token").as_deref() == Some(token) {
                    let message = message_of(&old);
                    let doubt = message.is_none();
                    return Ok(SlackClaim::Claimed { message, doubt });
                }
                let newer = |name: &str| opt_s(&old, name).is_some_and(|v| v.as_str() >= version);
                let claimed_newer = opt_s(&old, "claimed").is_some_and(|v| v.as_str() > version);
                if newer("shown") || claimed_newer {
                    return Ok(SlackClaim::Stale);
                }
                // A live lease ends soon (its holder releases it); one that ended unreleased, and
                // a hold, are waited out.
                let abandoned_until = get_n::<i64>(&old, "lease_until")
                    .ok()
                    .filter(|end| *end <= now_ms)
                    .map(|end| end + settle_ms);
                let held_until = get_n::<i64>(&old, "not_before").ok();
                let not_before_ms = abandoned_until.max(held_until).filter(|at| *at > now_ms);
                Ok(SlackClaim::Busy { not_before_ms })
            }
        }
    }

    /// Records that the state at `version` is shown, by the holder `token`; the message's place,
    /// when this worker posted or found it (`learnt`), is kept on the ledger and on the
    /// approval in the same transaction. Returns false when the lease was lost (another worker
    /// draws it now).
    pub async fn slack_message_shown(
        &self,
        key: &LedgerKey,
        token: &str,
        version: &str,
        learnt: Option<&SlackMessage>,
        now: EpochSeconds,
    ) -> Result<bool, StoreError> {
        let vals = values(&[(":version", s(version)), (":now", epoch(now))]);
        let own_write = |old: &Item| {
            opt_s(old, "shown").as_deref() == Some(version) && !old.contains_key("token")
        };
        self.end_slack_claim(
            key,
            token,
            ("SET #shown = :version, #updated_at = :now", vals),
            learnt,
            own_write,
        )
        .await
    }

    /// Gives the message up without showing this state (rate limited, Slack refused, a lookup
    /// that could not tell): the next claim may draw it, from `not_before_ms` if set.
    pub async fn release_slack_message(
        &self,
        key: &LedgerKey,
        token: &str,
        release: SlackRelease<'_>,
        now: EpochSeconds,
    ) -> Result<bool, StoreError> {
        let mut sets = "SET #updated_at = :now, #last_error = :error".to_owned();
        let mut vals = values(&[
            (":now", epoch(now)),
            (":error", s(cut(release.error, MAX_REPORT_CHARS))),
        ]);
        // A message found is no longer in doubt (and a path is set or removed, never both).
        if release.posted_in_doubt && release.learnt.is_none() {
            sets.push_str(", #post_doubt = :doubt");
            vals.insert(":doubt".to_owned(), AttributeValue::Bool(true));
        }
        if let Some(at) = release.not_before_ms {
            sets.push_str(", #not_before = :not_before");
            vals.insert(":not_before".to_owned(), n(at));
        }
        self.end_slack_claim(key, token, (&sets, vals), release.learnt, |_| false)
            .await
    }

    /// Ends the claim `token`: `sets` (a `SET` clause and its values), the lease removed, and
    /// the message's place if learnt (then no doubt is left).
    async fn end_slack_claim(
        &self,
        key: &LedgerKey,
        token: &str,
        (sets, mut vals): (&str, std::collections::HashMap<String, AttributeValue>),
        learnt: Option<&SlackMessage>,
        own_write: impl Fn(&Item) -> bool,
    ) -> Result<bool, StoreError> {
        let mut update = sets.to_owned();
        vals.insert(":token".to_owned(), s(token));
        let Some(message) = learnt else {
            update.push_str(" REMOVE #token, #lease_until");
            return self.write_slack_item(key, &update, vals, own_write).await;
        };
        update
            .push_str(", #channel = :channel, #ts = :ts REMOVE #token, #lease_until, #post_doubt");
        vals.insert(":channel".to_owned(), s(&message.channel));
        vals.insert(":ts".to_owned(), s(&message.ts));
        let ledger = self.ledger_update(key, &update, ONLY_IF_HOLDER, vals)?;
        let on_approval = "SET #slack = :slack";
        let approval = Update::builder()
            .table_name(&self.tables.approvals)
            .key("pk", approval_key(&key.tenant, &key.approval_id))
            .update_expression(on_approval)
            .condition_expression(ONLY_IF_EXISTS)
            .set_expression_attribute_names(Some(names(&[on_approval, ONLY_IF_EXISTS])))
            .expression_attribute_values(":slack", slack_message_to_attr(message))
            .build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))?;
        let items = vec![
            TransactWriteItem::builder().update(ledger).build(),
            TransactWriteItem::builder().update(approval).build(),
        ];
        match self.transact(items, token).await? {
            Transaction::Committed => Ok(true),
            // Our own write, applied, whose answer was lost: the SDK's retry met it.
            Transaction::Cancelled(reasons) => {
                Ok(condition_failed_item(&reasons, 0).is_some_and(own_write))
            }
        }
    }

    /// One conditional update of the message's ledger item by its holder (`:token` in
    /// `vals`); false when the holder no longer holds it, unless the item as it was shows the
    /// write itself (`own_write`: applied, its answer lost, and the SDK's retry met it).
    async fn write_slack_item(
        &self,
        key: &LedgerKey,
        update: &str,
        vals: std::collections::HashMap<String, AttributeValue>,
        own_write: impl Fn(&Item) -> bool,
    ) -> Result<bool, StoreError> {
        let write = ConditionalUpdate {
            table: &self.tables.execution_ledger,
            key: s(key.pk()),
            update,
            condition: ONLY_IF_HOLDER,
            names: names(&[update, ONLY_IF_HOLDER]),
            values: vals,
            returning: ReturnValue::None,
        };
        Ok(match self.conditional_update(write).await? {
            Ok(_) => true,
            Err(old) => old.as_ref().is_some_and(own_write),
        })
    }
}
