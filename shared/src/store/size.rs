//! How large an approval item can grow. DynamoDB refuses any write that would take an item past
//! 400 KB, so an approval that could outgrow it would, some day, refuse a vote, an attempt's end
//! or an operator's resolve — a stuck approval. Everything that grows on the item after its
//! create is bounded (votes by the approvers and the comment limit, status queries, late
//! reports, retry keys and errors by the caps here), and a create whose
//! approval could pass the limit once all of it has grown is refused.

use aws_sdk_dynamodb::types::AttributeValue;

use super::attr::{Item, s};
use super::codec::{
    approval_to_item, cancellation_to_attr, decision_to_attr, status_check_to_attr,
};
use crate::domain::{
    Approval, Approver, Cancellation, Channel, Completion, DecideRequest, Decision, EpochSeconds,
    KeyId, Outcome, SignIn, StatusCheck, delegation::Delegation,
};

/// DynamoDB's item size limit (400 KB, counted as 1,024-byte KB).
pub const MAX_ITEM_BYTES: usize = 400 * 1024;
/// What an approval may take, growth included: below the limit by a margin for the rounding
/// of this count and for what later versions add to an item.
pub const APPROVAL_BUDGET_BYTES: usize = MAX_ITEM_BYTES - 8 * 1024;

/// The most characters of an error kept on the ledger and the execution (a target's reason
/// inside it included).
pub const MAX_ERROR_CHARS: usize = 1_000;
/// The status queries one execution generation keeps on the approval (an operator's retry
/// starts a new list); one asked beyond them still decides the attempt, and is logged.
pub const MAX_STATUS_CHECKS: usize = 20;
/// Reports of attempts taken over that an approval keeps, and the characters of each.
pub const MAX_LATE_REPORTS: usize = 10;
pub const MAX_REPORT_CHARS: usize = 1_000;
/// The most characters of a status query's detail kept on the execution.
pub const MAX_CHECK_DETAIL_CHARS: usize = 500;
/// A webhook's event id (`webhook-id`), as the webhook route accepts it.
const MAX_WEBHOOK_ID_BYTES: usize = 256;
/// A GitHub delivery's id (`X-GitHub-Delivery`), as the GitHub route accepts it.
pub const MAX_GITHUB_DELIVERY_BYTES: usize = 100;
/// The longest resolve note (characters).
const MAX_NOTE_CHARS: usize = DecideRequest::MAX_COMMENT_CHARS;
/// The longest retry key: `key:` and an Idempotency-Key.
const MAX_RETRY_KEY_BYTES: usize = 4 + 255;
/// Numbers, statuses and names the execution and the indexes carry besides the above.
const SMALL_ATTRIBUTES_BYTES: usize = 1024;
/// The execution's ledger on the approval (`lg_*`, v5; its error is the execution's own): a
/// status, a generation, a token, a lease, attempts, times and the writer that ended it.
const LEDGER_ATTRIBUTES_BYTES: usize = 512;

/// An item's size as DynamoDB counts it: the UTF-8 bytes of every attribute name and value,
/// with every number counted at its largest (21 bytes) and 3 bytes for each list or map and 1
/// for each of its elements (an over-estimate, as a budget should be).
pub fn item_bytes(item: &Item) -> usize {
    item.iter().map(|(k, v)| k.len() + value_bytes(v)).sum()
}

fn value_bytes(value: &AttributeValue) -> usize {
    match value {
        AttributeValue::S(v) => v.len(),
        AttributeValue::N(_) => 21,
        AttributeValue::B(v) => v.as_ref().len(),
        AttributeValue::Ss(v) => v.iter().map(String::len).sum(),
        AttributeValue::Ns(v) => v.len() * 21,
        AttributeValue::Bs(v) => v.iter().map(|b| b.as_ref().len()).sum(),
        AttributeValue::L(list) => 3 + list.iter().map(|v| 1 + value_bytes(v)).sum::<usize>(),
        AttributeValue::M(map) => {
            3 + map
                .iter()
                .map(|(k, v)| 1 + k.len() + value_bytes(v))
                .sum::<usize>()
        }
        _ => 1,
    }
}

/// A string of `chars` characters of the widest UTF-8 encoding (4 bytes).
fn widest(chars: usize) -> String {
    "\u{10FFFF}".repeat(chars)
}

/// The largest vote `approver`'s place can take, and what it adds to the approval's voters: the
/// longest comment, through a webhook with its longest event id, after sign-in with the longest
/// issuer and subject, or in their place by a delegate of the longest name (who joins the
/// voters too), whichever is larger.
fn largest_vote(
    approval: &Approval,
    approver: &Approver,
    comment_cap: Option<u32>,
) -> (Decision, usize) {
    // The longest comment: its characters at their widest, or the approval's cap in bytes.
    let comment = match comment_cap {
        None => widest(DecideRequest::MAX_COMMENT_CHARS),
        Some(cap) => "x".repeat(cap as usize),
    };
    let webhook = Decision {
        outcome: Outcome::Rejected,
        approver: approver.clone(),
        decided_at: 0,
        channel: Channel::ReviewPage,
        comment: Some(comment),
        webhook_event_id: Some("x".repeat(MAX_WEBHOOK_ID_BYTES)),
        key_id: KeyId::parse("abcdefghijklmnop"),
        signed_in: None,
        by: None,
        delegation_set_by: None,
        passkey: None,
    };
    let signed_in = Decision {
        webhook_event_id: None,
        key_id: None,
        signed_in: Some(SignIn {
            issuer: "x".repeat(SignIn::MAX_ISSUER_BYTES),
            sub: "x".repeat(SignIn::MAX_SUB_BYTES),
            auth_time: Some(EpochSeconds::MAX),
        }),
        ..webhook.clone()
    };
    let delegated = Decision {
        channel: Channel::Api,
        webhook_event_id: None,
        by: Approver::from_stored(&"x".repeat(Delegation::MAX_DELEGATE_BYTES)).ok(),
        delegation_set_by: None,
        passkey: None,
        ..webhook.clone()
    };
    let own = approver.identity().len();
    // A passkey-only approval's vote: signed in, in a delegate's place, with its evidence at
    // the bounds the vote's checks keep.
    let passkey = approval.assurance.map(|_| {
        let by = "x".repeat(Delegation::MAX_DELEGATE_BYTES);
        let statement = crate::domain::passkey::Statement {
            tenant: approval.tenant.as_str().to_owned(),
            approval_id: approval.id.as_str().to_owned(),
            action_type: approval.action_type.clone(),
            payload_sha256: "0".repeat(64),
            vote: "reject".to_owned(),
            approver: approver.as_str().to_owned(),
            by: Some(by.clone()),
            policy_version: Some(u32::MAX),
            nonce: "x".repeat(96),
        };
        let b64_of = |bytes: usize| "x".repeat(bytes.div_ceil(3) * 4);
        let evidence = crate::domain::PasskeyEvidence {
            statement: statement.canonical(),
            credential_id: b64_of(crate::domain::passkey::MAX_CREDENTIAL_ID_BYTES),
            authenticator_data: b64_of(crate::domain::passkey::MAX_AUTHENTICATOR_DATA_BYTES),
            client_data_json: b64_of(crate::domain::passkey::MAX_CLIENT_DATA_BYTES),
            signature: b64_of(crate::domain::passkey::MAX_SIGNATURE_BYTES),
            public_key: crate::domain::passkey::Jwk {
                kty: "EC".to_owned(),
                crv: "P-256".to_owned(),
                x: "x".repeat(43),
                y: "x".repeat(43),
                kid: None,
                alg: None,
                use_: None,
            },
            iss: "x".repeat(SignIn::MAX_ISSUER_BYTES),
            sub: "x".repeat(SignIn::MAX_SUB_BYTES),
            registered_at: EpochSeconds::MAX,
        };
        let vote = Decision {
            by: Approver::from_stored(&by).ok(),
            passkey: Some(Box::new(evidence)),
            ..signed_in.clone()
        };
        (vote, own + Delegation::MAX_DELEGATE_BYTES)
    });
    [
        (webhook, own),
        (signed_in, own),
        (delegated, own + Delegation::MAX_DELEGATE_BYTES),
    ]
    .into_iter()
    .chain(passkey)
    .max_by_key(|(vote, voters)| value_bytes(&decision_to_attr(vote)) + voters)
    .unwrap_or_else(|| unreachable!("three candidates at least"))
}

/// The most bytes the approval's item can reach once everything that grows on it has grown to
/// its bound: every approver's vote (list element and voter-set entry), the decision, a
/// cancellation, and the execution's status queries, late reports, error, note, retry keys and
/// ledger.
pub fn largest_item_bytes(approval: &Approval) -> usize {
    let created = item_bytes(&approval_to_item(approval));
    // Escalation steps' approvers are listed when their step applies, and vote as the others
    // do; the counts of reminders sent and steps applied take a few bytes each.
    let joined = approval.stall.escalation.iter().flat_map(|s| &s.approvers);
    let listed: usize = joined.clone().map(|a| 1 + a.as_str().len()).sum::<usize>()
        + usize::from(!approval.stall.is_empty()) * 32;
    let voters = || approval.approvers.iter().chain(joined.clone());
    let votes: usize = listed
        + voters()
            .map(|a| {
                let (vote, voters) = largest_vote(approval, a, approval.comment_cap);
                1 + value_bytes(&decision_to_attr(&vote)) + voters
            })
            .sum::<usize>();
    let decision = voters()
        .map(|a| {
            value_bytes(&decision_to_attr(
                &largest_vote(approval, a, approval.comment_cap).0,
            ))
        })
        .max()
        .unwrap_or(0);
    // A cancel is the requester's or any operator's: a principal of the longest name.
    // Read back as stored: the widest character is one a request may no longer spell, but an
    // item may hold it.
    let cancellation = Approver::from_stored(&widest(Approver::MAX_CHARS)).map_or(0, |by| {
        value_bytes(&cancellation_to_attr(&Cancellation {
            by,
            at: 0,
            reason: Some(widest(DecideRequest::MAX_COMMENT_CHARS)),
            channel: Some(crate::domain::Channel::ReviewPage),
        }))
    });
    let check = value_bytes(&status_check_to_attr(&StatusCheck {
        at: 0,
        answer: "not_found".to_owned(),
        detail: Some(widest(MAX_CHECK_DETAIL_CHARS)),
    }));
    let execution = MAX_STATUS_CHECKS * (1 + check)
        + MAX_LATE_REPORTS * (1 + value_bytes(&s(widest(MAX_REPORT_CHARS))))
        + 4 * MAX_ERROR_CHARS
        + 4 * MAX_NOTE_CHARS
        + (super::operator::MAX_RETRIES as usize + 1) * (1 + MAX_RETRY_KEY_BYTES)
        + SMALL_ATTRIBUTES_BYTES
        + LEDGER_ATTRIBUTES_BYTES;
    // A GitHub deployment names the deliveries that join its round, up to its bound.
    let deliveries = approval.github.as_ref().map_or(0, |gate| {
        let one = super::codec::github_delivery_to_attr(&crate::domain::GithubDelivery {
            id: "x".repeat(MAX_GITHUB_DELIVERY_BYTES),
            at: 0,
        });
        crate::domain::MAX_DELIVERIES.saturating_sub(gate.deliveries.len())
            * (1 + value_bytes(&one))
    });
    // A waiting workflow's answer keeps its last error (widest characters) and counts.
    let resume = approval
        .resume
        .as_ref()
        .map_or(0, |_| 4 * MAX_ERROR_CHARS + SMALL_ATTRIBUTES_BYTES);
    created + votes + decision + cancellation + execution + deliveries + resume
}

/// What a vote's passkey evidence adds to its item (bytes, as DynamoDB counts them).
pub fn passkey_evidence_bytes(vote: &Decision) -> usize {
    let plain = Decision {
        passkey: None,
        ..vote.clone()
    };
    value_bytes(&decision_to_attr(vote)).saturating_sub(value_bytes(&decision_to_attr(&plain)))
}

/// The shortest comment cap an approval may be given (bytes): below it, the approval lists too
/// many people for its item, and the create is refused.
pub const MIN_COMMENT_CAP: u32 = 140;

/// The comment cap (UTF-8 bytes of a vote's comment) `approval` needs for everything that grows
/// on its item to fit ([`APPROVAL_BUDGET_BYTES`]): `Ok(None)` when the usual limit fits (2,000
/// characters), `Ok(Some(cap))` the largest cap that does, `Err(bytes)` when not even
/// [`MIN_COMMENT_CAP`] does (the most the item could reach with it). Only an approval listing
/// many people — a deployment's groups — needs one: the votes' write refuses a longer comment
/// (`store/votes.rs`), so the item never outgrows DynamoDB's 400 KB.
pub fn comment_cap_for(approval: &Approval) -> Result<Option<u32>, usize> {
    let with = |cap: Option<u32>| {
        let mut capped = approval.clone();
        capped.comment_cap = cap;
        largest_item_bytes(&capped)
    };
    if with(None) <= APPROVAL_BUDGET_BYTES {
        return Ok(None);
    }
    let most = (DecideRequest::MAX_COMMENT_CHARS * 4) as u32;
    if with(Some(MIN_COMMENT_CAP)) > APPROVAL_BUDGET_BYTES {
        return Err(with(Some(MIN_COMMENT_CAP)));
    }
    // The largest cap that fits: the item's bound only grows with the cap.
    let (mut fits, mut too_big) = (MIN_COMMENT_CAP, most);
    while too_big - fits > 1 {
        let mid = fits + (too_big - fits) / 2;
        if with(Some(mid)) <= APPROVAL_BUDGET_BYTES {
            fits = mid;
        } else {
            too_big = mid;
        }
    }
    Ok(Some(fits))
}

/// Cuts `text` to `chars` characters.
pub(crate) fn cut(text: &str, chars: usize) -> String {
    text.chars().take(chars).collect()
}

/// An attempt's end as the ledger and the execution keep it: its error (which may quote the one
/// before it, and a target's reason) cut to its first [`MAX_ERROR_CHARS`]. The trail event of
/// the end is made from this, so that it says what was kept.
pub fn kept(completion: &Completion) -> Completion {
    completion.with_error(completion.error().map(|e| cut(e, MAX_ERROR_CHARS)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::approval::tests::pending;

    #[test]
    fn a_small_approval_has_room_to_grow_and_a_large_one_does_not() {
        let small = pending(1_000);
        let bytes = largest_item_bytes(&small);
        assert!(bytes < APPROVAL_BUDGET_BYTES, "{bytes}");
        let mut large = pending(1_000);
        large.approvers = (0..20)
            .map(|i| Approver::parse(&format!("approver-{i}@example.com")).unwrap())
            .collect();
        large.payload.insert(
            "blob".into(),
            serde_json::Value::String("x".repeat(190 * 1024)),
        );
        assert!(largest_item_bytes(&large) > APPROVAL_BUDGET_BYTES);
        // Growth counts: 20 approvers' longest votes alone are about 160 KB.
        assert!(largest_item_bytes(&large) - item_bytes(&approval_to_item(&large)) > 160_000);
    }

    /// What docs/API.md ("Limits") says: with 20 approvers (names of 25 characters), payload and context
    /// get about 110 KB; with up to 10, the whole 192 KiB create allows.
    #[test]
    fn the_room_left_for_payload_and_context_is_as_documented() {
        let room = |approvers: usize| {
            let mut approval = pending(1_000);
            approval.requested_by = Some(Approver::parse("ci@acme.example.com").unwrap());
            approval.approvers = (0..approvers)
                .map(|i| Approver::parse(&format!("approver-{i:02}@example.com")).unwrap())
                .collect();
            APPROVAL_BUDGET_BYTES as i64 - largest_item_bytes(&approval) as i64
        };
        let max_written = crate::domain::CreateRequest::MAX_WRITTEN_BYTES as i64;
        assert!((105_000..120_000).contains(&room(20)), "{}", room(20));
        assert!(room(10) > max_written, "{}", room(10));
        assert!(room(12) < max_written, "{}", room(12));
    }

    #[test]
    fn sizes_count_names_values_and_nesting() {
        let item = Item::from([
            ("ab".to_owned(), s("xyz")),
            ("n".to_owned(), AttributeValue::N("1".into())),
            (
                "l".to_owned(),
                AttributeValue::L(vec![s("é"), AttributeValue::Bool(true)]),
            ),
        ]);
        assert_eq!(
            item_bytes(&item),
            (2 + 3) + (1 + 21) + (1 + 3 + (1 + 2) + (1 + 1))
        );
    }
}
