//! An approval's email: the subject (one line, at most 200 characters), a text part and an
//! HTML part with what the approver needs to decide — the summary, action type, requester, each
//! rule's progress, the expiry — and one link to the review page. The HTML is maud's, which
//! escapes every value as the review page's does; it names no remote content (no images, fonts
//! or styles from elsewhere) and tracks nothing.

use maud::{DOCTYPE, html};

use crate::domain::rfc3339;
use crate::jobs::{EmailJob, NotifyReason};

/// The longest subject, in characters.
pub const SUBJECT_CHARS: usize = 200;

/// What one email says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Composed {
    pub subject: String,
    pub text: String,
    pub html: String,
}

/// How the link in an email may be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkUse {
    /// The tenant's approvers sign in (`OIDC`): the link only points at the approval.
    SignIn,
    /// The link is the credential: whoever holds it decides as the approver.
    Bearer,
}

/// `text` with every control character (a newline included) turned into a space: one line,
/// with nothing a mail client or a header could read as structure.
fn one_line(text: &str) -> String {
    let spaced: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    spaced.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` cut to `max` characters, with an ellipsis when cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut kept: String = text.chars().take(max.saturating_sub(1)).collect();
    kept.push('…');
    kept
}

/// The email of `job`, whose review page is at `link`.
pub fn compose(job: &EmailJob, link: &str, link_use: LinkUse) -> Composed {
    let state = &job.message;
    let what = one_line(state.summary.as_deref().unwrap_or(&state.action_type));
    let opening = match (job.reason, &job.in_place_of) {
        (_, Some(delegator)) => format!("On behalf of {}", one_line(delegator.as_str())),
        (Some(NotifyReason::Reminder { number }), None) => format!("Reminder {number}"),
        (Some(NotifyReason::Escalation { .. }), None) => "You were added".to_owned(),
        (None, None) => "Approval requested".to_owned(),
    };
    let subject = cut(&format!("{opening}: {what}"), SUBJECT_CHARS);
    let why = match (job.reason, &job.in_place_of) {
        (_, Some(delegator)) => format!(
            "{} delegated their approvals to you: you may decide this one in their place.",
            one_line(delegator.as_str())
        ),
        (Some(NotifyReason::Reminder { number }), None) => {
            format!("Reminder {number}: this approval still waits on your decision.")
        }
        (Some(NotifyReason::Escalation { number }), None) => {
            format!("The approval was escalated (step {number}): you can now decide it.")
        }
        (None, None) => "Your approval is requested.".to_owned(),
    };
    let requester = state
        .requested_by
        .as_deref()
        .map_or_else(|| "not named".to_owned(), one_line);
    let rules: Vec<String> = state
        .rules
        .iter()
        .map(|rule| {
            format!(
                "{}: {} of {} ({})",
                one_line(&rule.name),
                rule.approvals,
                rule.needed,
                rule.approvers
                    .iter()
                    .map(|a| one_line(a))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
        .collect();
    let expires = rfc3339(state.expires_at);
    let action_type = one_line(&state.action_type);
    let link_note = match link_use {
        LinkUse::SignIn => "You will be asked to sign in before you decide.",
        LinkUse::Bearer => {
            "This link lets whoever holds it decide as you: do not forward this email."
        }
    };
    let mut text =
        format!("{why}\n\n{what}\n\nAction: {action_type}\nRequested by: {requester}\nRules:\n");
    for rule in &rules {
        text.push_str(&format!("  - {rule}\n"));
    }
    text.push_str(&format!(
        "Expires: {expires}\n\nReview it: {link}\n\n{link_note}\n"
    ));
    let html = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { (subject) }
            }
            body style="font-family: sans-serif; color: #1a1a1a; max-width: 40em" {
                p { (why) }
                h1 style="font-size: 1.25em" { (what) }
                table {
                    tr { th align="left" { "Action" } td { code { (action_type) } } }
                    tr { th align="left" { "Requested by" } td { (requester) } }
                    tr { th align="left" { "Expires" } td { (expires) } }
                }
                p { strong { "Rules" } }
                ul { @for rule in &rules { li { (rule) } } }
                p { a href=(link) { "Review it" } }
                p style="color: #555" { (link_note) }
            }
        }
    }
    .into_string();
    Composed {
        subject,
        text,
        html,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ApprovalId, Approver, TenantId};
    use crate::slack::{MessageState, RuleLine};

    fn job(summary: &str) -> EmailJob {
        EmailJob {
            to: Approver::parse("alice@example.com").unwrap(),
            reason: None,
            in_place_of: None,
            message: MessageState {
                approval_id: ApprovalId::parse("apr_01JABCDEFGHJKMNPQRSTVWXYZ0").unwrap(),
                tenant: TenantId::parse("acme").unwrap(),
                summary: Some(summary.to_owned()),
                action_type: "deploy".to_owned(),
                payload_digest: "0123456789ab".to_owned(),
                requested_by: Some("ci".to_owned()),
                rules: vec![RuleLine {
                    name: "sre".to_owned(),
                    approvers: vec!["alice@example.com".to_owned(), "bob@example.com".to_owned()],
                    approvals: 1,
                    needed: 2,
                }],
                votes: Vec::new(),
                status: "pending".to_owned(),
                execution: "not_started".to_owned(),
                expires_at: 1_800_000_000,
            },
            after: String::new(),
            trace: None,
        }
    }

    #[test]
    fn the_summary_is_escaped_in_the_html_and_the_subject_is_one_line() {
        let nasty = "Deploy <script>alert(1)</script> & \"quoted\" 'single'\u{7}\nSubject: forged";
        let email = compose(
            &job(nasty),
            "https://approvals.example/approvals/apr_1/review?token=t&place=x",
            LinkUse::Bearer,
        );
        assert!(!email.subject.contains('\n') && !email.subject.contains('\u{7}'));
        assert_eq!(
            email.subject,
            "Approval requested: Deploy <script>alert(1)</script> & \"quoted\" 'single' Subject: forged"
        );
        assert!(!email.html.contains("<script>"), "{}", email.html);
        assert!(
            email
                .html
                .contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;quoted&quot;")
        );
        assert!(!email.html.contains('\u{7}') && !email.text.contains('\u{7}'));
        // One link, its `&` escaped as an attribute; nothing fetched from elsewhere.
        assert_eq!(email.html.matches("href=").count(), 1);
        assert!(email.html.contains("review?token=t&amp;place=x"));
        assert!(!email.html.contains("src=") && !email.html.contains("url("));
        assert!(email.text.contains(
            "Review it: https://approvals.example/approvals/apr_1/review?token=t&place=x"
        ));
        assert!(email.text.contains("do not forward"));
        assert!(
            email
                .text
                .contains("sre: 1 of 2 (alice@example.com, bob@example.com)")
        );
        assert!(email.text.contains("Requested by: ci") && email.text.contains("Action: deploy"));
        assert!(email.text.contains("Expires: 2027-01-15T08:00:00Z"));
    }

    #[test]
    fn the_subject_says_why_and_is_at_most_200_characters() {
        let long = "x".repeat(500);
        let email = compose(&job(&long), "https://a.example/r", LinkUse::SignIn);
        assert_eq!(email.subject.chars().count(), SUBJECT_CHARS);
        assert!(email.subject.ends_with('…'));
        assert!(email.text.contains("sign in before you decide"));
        assert!(!email.text.contains("do not forward"));
        let mut reminder = job("Deploy");
        reminder.reason = Some(NotifyReason::Reminder { number: 2 });
        assert_eq!(
            compose(&reminder, "https://a.example/r", LinkUse::SignIn).subject,
            "Reminder 2: Deploy"
        );
        let mut added = job("Deploy");
        added.reason = Some(NotifyReason::Escalation { number: 1 });
        assert_eq!(
            compose(&added, "https://a.example/r", LinkUse::SignIn).subject,
            "You were added: Deploy"
        );
        let mut copy = job("Deploy");
        copy.in_place_of = Some(Approver::parse("bob@example.com").unwrap());
        assert_eq!(
            compose(&copy, "https://a.example/r", LinkUse::SignIn).subject,
            "On behalf of bob@example.com: Deploy"
        );
    }
}
