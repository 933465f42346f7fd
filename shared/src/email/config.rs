//! `EMAIL`: the tenants whose approvers are emailed through Amazon SES, each with its sender;
//! and `EMAIL_SENDERS`, the From addresses the executor's role may send with (the template's
//! `EmailSenders`, its grant's `ses:FromAddress` condition: addresses, or patterns such as
//! `*@acme.example`), against which every sender is checked at start: a sender the role may not
//! use would fail every email with AccessDenied, so it is refused before the first one.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::domain::{Approver, TenantId, parse_config_json};

/// One tenant's sender.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmailSender {
    /// The `From` address: a verified SES identity (the address, or its domain).
    pub from: String,
    pub reply_to: Option<String>,
    /// An SES configuration set (bounces and complaints reach its event destinations).
    pub configuration_set: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSender {
    from: String,
    reply_to: Option<String>,
    configuration_set: Option<String>,
}

/// Parses `EMAIL` (`{"<tenant>": {"from", "reply_to"?, "configuration_set"?}}`).
pub fn parse_email(raw: &str) -> Result<BTreeMap<TenantId, EmailSender>, String> {
    let raw: BTreeMap<String, RawSender> = parse_config_json(
        raw,
        "each tenant maps to {\"from\": \"approvals@acme.example\", \"reply_to\"?, \"configuration_set\"?}",
    )?;
    let mut parsed = BTreeMap::new();
    for (tenant, sender) in raw {
        let tenant_id =
            TenantId::parse(&tenant).map_err(|e| format!("a key that is not a tenant id: {e}"))?;
        let from = address(&sender.from).map_err(|e| format!("{tenant}: from: {e}"))?;
        let reply_to = sender
            .reply_to
            .map(|r| address(&r).map_err(|e| format!("{tenant}: reply_to: {e}")))
            .transpose()?;
        let configuration_set = sender
            .configuration_set
            .map(|c| configuration_set(&c).map_err(|e| format!("{tenant}: configuration_set: {e}")))
            .transpose()?;
        parsed.insert(
            tenant_id,
            EmailSender {
                from,
                reply_to,
                configuration_set,
            },
        );
    }
    Ok(parsed)
}

/// Parses `EMAIL_SENDERS` (comma-separated addresses or patterns).
pub fn parse_senders(raw: &str) -> Vec<String> {
    raw.split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Whether `from` matches `pattern` as IAM's `StringLike` matches it: `*` any run of
/// characters, `?` one; case-sensitive.
fn like(pattern: &str, from: &str) -> bool {
    let (p, f): (Vec<char>, Vec<char>) = (pattern.chars().collect(), from.chars().collect());
    // The classic two-pointer glob match, backtracking to the last `*`.
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < f.len() {
        if i < p.len() && (p[i] == '?' || p[i] == f[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|c| *c == '*')
}

/// The first sender of `senders` that none of `allowed` matches, with its tenant.
pub fn uncovered<'a>(
    senders: &'a BTreeMap<TenantId, EmailSender>,
    allowed: &[String],
) -> Option<(&'a TenantId, &'a str)> {
    senders
        .iter()
        .find(|(_, sender)| !allowed.iter().any(|p| like(p, &sender.from)))
        .map(|(tenant, sender)| (tenant, sender.from.as_str()))
}

/// An address SES can send to or from, as SES takes it: the local part 7-bit ASCII without
/// spaces or controls (SES has no SMTPUTF8), one `@`, a domain of letters, digits and hyphens in
/// dot-separated labels (an internationalised domain is given in Punycode), 320 characters at
/// most. Never quoted in the error: it may be a secret put in the wrong variable.
pub fn address(raw: &str) -> Result<String, &'static str> {
    let Some((local, domain)) = raw.rsplit_once('@') else {
        return Err("must be an email address (local@domain)");
    };
    if raw.len() > 320 || local.is_empty() || local.len() > 64 {
        return Err("must be an email address of at most 320 characters, its local part 1 to 64");
    }
    let local_ok = local.bytes().all(|b| {
        b.is_ascii_graphic()
            && !matches!(
                b,
                b'@' | b'"' | b'(' | b')' | b'<' | b'>' | b',' | b';' | b':' | b'[' | b']' | b'\\'
            )
    });
    if !local_ok {
        return Err(
            "its local part must be 7-bit ASCII without spaces, quotes or brackets (SES takes no SMTPUTF8)",
        );
    }
    let labels_ok = domain.len() <= 253
        && domain.contains('.')
        && domain.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    if !labels_ok {
        return Err(
            "its domain must be dot-separated labels of letters, digits and hyphens (Punycode for an internationalised domain)",
        );
    }
    Ok(raw.to_owned())
}

/// An SES configuration set's name: 1 to 64 letters, digits, hyphens and underscores.
fn configuration_set(raw: &str) -> Result<String, &'static str> {
    if (1..=64).contains(&raw.len())
        && raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        Ok(raw.to_owned())
    } else {
        Err("must be 1 to 64 letters, digits, hyphens and underscores")
    }
}

/// The address an approver is emailed at: their identity, when it is an address SES can send
/// to; `None` for any other identity (a Slack user, a name), who is not emailed.
pub fn recipient(approver: &Approver) -> Option<String> {
    address(approver.as_str().trim()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sender_is_parsed_and_checked() {
        let parsed = parse_email(
            r#"{"acme": {"from": "approvals@acme.example", "reply_to": "ops@acme.example", "configuration_set": "countersign_1"}}"#,
        )
        .unwrap();
        let acme = &parsed[&TenantId::parse("acme").unwrap()];
        assert_eq!(acme.from, "approvals@acme.example");
        assert_eq!(acme.reply_to.as_deref(), Some("ops@acme.example"));
        assert_eq!(acme.configuration_set.as_deref(), Some("countersign_1"));
        for (bad, says) in [
            (r#"{"acme": {}}"#, "from"),
            (r#"{"acme": {"from": "nobody"}}"#, "acme: from"),
            (r#"{"acme": {"from": "a@b.example", "cc": "x"}}"#, "cc"),
            (r#"{"acme": {"from": "ünï@acme.example"}}"#, "SMTPUTF8"),
            (r#"{"acme": {"from": "a@acme"}}"#, "domain"),
            (
                r#"{"acme": {"from": "a@acme.example", "configuration_set": "a b"}}"#,
                "configuration_set",
            ),
            (
                r#"{"acme": {"from": "a@acme.example", "reply_to": "a b@x.example"}}"#,
                "reply_to",
            ),
        ] {
            let error = parse_email(bad).unwrap_err();
            assert!(error.contains(says), "{bad}: {error}");
        }
    }

    #[test]
    fn every_sender_must_be_an_identity_the_role_may_send_from() {
        let senders = parse_email(
            r#"{"acme": {"from": "approvals@acme.example"}, "beta": {"from": "Ops@Beta.example"}}"#,
        )
        .unwrap();
        let allowed = parse_senders("*@acme.example, Ops@Beta.example");
        assert_eq!(uncovered(&senders, &allowed), None);
        let only_acme = parse_senders("*@acme.example");
        assert_eq!(
            uncovered(&senders, &only_acme).map(|(t, f)| (t.as_str(), f)),
            Some(("beta", "Ops@Beta.example"))
        );
        // Case-sensitive, as IAM's StringLike is; a domain alone is no pattern of an address.
        assert!(uncovered(&senders, &parse_senders("*@acme.example,ops@beta.example")).is_some());
        assert!(uncovered(&senders, &parse_senders("acme.example,Ops@Beta.example")).is_some());
        assert!(uncovered(&senders, &[]).is_some());
        assert!(like("a?c*", "abcdef") && !like("a?c", "abcd") && like("*", ""));
    }

    #[test]
    fn only_addresses_ses_can_reach_are_emailed() {
        let approver = |s: &str| Approver::parse(s).unwrap();
        assert_eq!(
            recipient(&approver("alice@example.com")).as_deref(),
            Some("alice@example.com")
        );
        assert_eq!(recipient(&approver("U024BE7LH")), None);
        assert_eq!(recipient(&approver("Alice Smith")), None);
        assert_eq!(recipient(&approver("jörg@example.com")), None);
    }
}
