//! What every HTML page shares (the review page, the inbox, sign-in's pages): one stylesheet,
//! headers that cache nothing, leak no URL and run no script but our own, and the plain pages
//! that reveal nothing.

use std::sync::LazyLock;

use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use maud::{DOCTYPE, Markup, html};
use sha2::{Digest, Sha256};

use crate::domain::rfc3339;

const STYLE: &str = r#"
:root { color-scheme: light; --ink: #1d2433; --muted: #5b6475; --line: #e3e6ec; --ok: #1f7a4d; --no: #b42318; --link: #1b4fd1; }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink); background: #f5f6f8; }
main { max-width: 42rem; margin: 0 auto; padding: 1.5rem 1rem 3rem; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 12px; padding: 1.25rem; margin-bottom: 1rem; }
h1 { font-size: 1.35rem; margin: 0 0 .25rem; }
h2 { font-size: .8rem; text-transform: uppercase; letter-spacing: .06em; color: var(--muted); margin: 0 0 .5rem; }
.muted { color: var(--muted); font-size: .9rem; }
.badge { display: inline-block; padding: .1rem .6rem; border-radius: 999px; font-size: .85rem; font-weight: 600; background: #eef1f6; }
.badge.approved { background: #e3f4ea; color: var(--ok); }
.badge.rejected, .badge.expired { background: #fdecea; color: var(--no); }
pre { margin: 0; padding: .75rem; background: #f7f8fa; border-radius: 8px; overflow-x: auto; font-size: .85rem; white-space: pre-wrap; word-break: break-word; }
dl { margin: 0; display: grid; grid-template-columns: minmax(6rem, max-content) 1fr; gap: .35rem 1rem; }
dt { color: var(--muted); } dd { margin: 0; word-break: break-word; }
ul { margin: 0; padding-left: 1.2rem; }
a { color: var(--link); }
textarea { width: 100%; min-height: 4.5rem; padding: .6rem; border: 1px solid var(--line); border-radius: 8px; font: inherit; }
.actions { display: flex; gap: .75rem; margin-top: .75rem; flex-wrap: wrap; }
button, a.button { flex: 1 1 10rem; display: inline-block; text-align: center; text-decoration: none; padding: .8rem 1rem; border: 0; border-radius: 8px; font: inherit; font-weight: 600; color: #fff; background: var(--link); cursor: pointer; }
button.approve { background: var(--ok); } button.reject { background: var(--no); }
button.quiet { flex: 0 0 auto; padding: .3rem .8rem; background: #eef1f6; color: var(--ink); font-weight: 500; }
nav { display: flex; gap: 1rem; align-items: center; flex-wrap: wrap; margin-bottom: 1rem; }
nav .who { margin-left: auto; }
"#;

/// Our one script (WebAuthn on the passkeys page and a passkey-only approval's review page),
/// inline on the pages that use it and allowed by its hash.
pub(super) const PASSKEY_SCRIPT: &str = include_str!("assets/passkey.js");

/// The Content-Security-Policy: the one stylesheet, our one script (by hash), forms posting to
/// this origin (and `form_action`, the identity provider's origin, where a post may be sent to
/// sign in), nothing fetched.
fn content_security_policy(form_action: Option<&str>, script: bool) -> HeaderValue {
    static STYLE_HASH: LazyLock<String> = LazyLock::new(|| {
        base64::engine::general_purpose::STANDARD.encode(Sha256::digest(STYLE.as_bytes()))
    });
    static SCRIPT_HASH: LazyLock<String> = LazyLock::new(|| {
        base64::engine::general_purpose::STANDARD.encode(Sha256::digest(PASSKEY_SCRIPT.as_bytes()))
    });
    let extra = form_action.map(|o| format!(" {o}")).unwrap_or_default();
    // Our script, only on the pages that carry it: every other page runs none.
    let script = match script {
        true => format!(" script-src 'sha256-{}';", *SCRIPT_HASH),
        false => String::new(),
    };
    let csp = format!(
        "default-src 'none'; style-src 'sha256-{}';{script} form-action 'self'{extra}; base-uri 'none'; frame-ancestors 'none'",
        *STYLE_HASH
    );
    HeaderValue::from_str(&csp).unwrap_or_else(|_| HeaderValue::from_static("default-src 'none'"))
}

/// The headers of every page: no caching (a page may hold a live token or a CSRF token), no
/// referrer to another origin (a review URL holds its token; the identity provider is another
/// origin), and the policy above. Not `no-referrer`: under it a browser sends `Origin: null`
/// with a form post even to this origin, and a signed-in approver's post must show its origin.
pub(super) fn secured_for(response: Response, form_action: Option<&str>) -> Response {
    secured_with(response, form_action, false)
}

/// [`secured_for`], allowing our script when `script`.
fn secured_with(mut response: Response, form_action: Option<&str>, script: bool) -> Response {
    let headers: [(HeaderName, HeaderValue); 5] = [
        (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        (
            header::CONTENT_SECURITY_POLICY,
            content_security_policy(form_action, script),
        ),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("same-origin"),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
    ];
    for (name, value) in headers {
        response.headers_mut().insert(name, value);
    }
    response
}

pub(super) fn secured(response: Response) -> Response {
    secured_for(response, None)
}

/// A whole page.
pub(super) fn page(status: StatusCode, title: &str, body: Markup) -> Response {
    page_for(status, title, body, None)
}

/// [`page`], whose forms may lead to the identity provider at `form_action`.
pub(super) fn page_for(
    status: StatusCode,
    title: &str,
    body: Markup,
    form_action: Option<&str>,
) -> Response {
    // Only where a form of ours asks for a passkey (text on the page cannot spell the
    // attribute: maud escapes its quote).
    let scripted = body.0.contains("data-passkey=\"");
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="robots" content="noindex";
                title { (title) " · Countersign" }
                style { (maud::PreEscaped(STYLE)) }
            }
            body {
                main { (body) }
                @if scripted { script { (maud::PreEscaped(PASSKEY_SCRIPT)) } }
            }
        }
    };
    secured_with(
        (status, axum::response::Html(markup.into_string())).into_response(),
        form_action,
        scripted,
    )
}

/// A page of one message.
pub(super) fn notice(status: StatusCode, title: &str, heading: &str, text: &str) -> Response {
    page(
        status,
        title,
        html! { div.card { h1 { (heading) } p.muted { (text) } } },
    )
}

/// 303 See Other to `location` (post-redirect-get), with the pages' headers.
pub(super) fn see_other(location: &str) -> Response {
    redirect(StatusCode::SEE_OTHER, location)
}

pub(super) fn redirect(status: StatusCode, location: &str) -> Response {
    let mut response = status.into_response();
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    secured(response)
}

/// Invalid, tampered, expired or foreign link: the same page, which reveals nothing.
pub(super) fn forbidden() -> Response {
    notice(
        StatusCode::FORBIDDEN,
        "Link not valid",
        "This link is not valid",
        "It may have expired or been changed. Ask the requester for a new link.",
    )
}

pub(super) fn unavailable() -> Response {
    notice(
        StatusCode::SERVICE_UNAVAILABLE,
        "Try again",
        "Something went wrong",
        "Nothing was recorded. Please try again in a moment.",
    )
}

/// A time as people read it.
pub(super) fn when(at: i64) -> String {
    rfc3339(at).replace('T', " ").replace('Z', " UTC")
}

/// A span of seconds as people read it: "3 d", "5 h", "12 min", "40 s".
pub(super) fn span(seconds: i64) -> String {
    let seconds = seconds.max(0);
    match seconds {
        s if s >= 86_400 => format!("{} d", s / 86_400),
        s if s >= 3_600 => format!("{} h", s / 3_600),
        s if s >= 60 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_read_in_their_largest_whole_unit() {
        assert_eq!(span(-5), "0 s");
        assert_eq!(span(59), "59 s");
        assert_eq!(span(3_599), "59 min");
        assert_eq!(span(7_300), "2 h");
        assert_eq!(span(3 * 86_400 + 1), "3 d");
    }

    #[test]
    fn the_policy_names_the_provider_only_where_a_form_may_lead_there() {
        let plain = content_security_policy(None, false);
        assert!(plain.to_str().unwrap().contains("form-action 'self';"));
        assert!(!plain.to_str().unwrap().contains("script-src"), "no script");
        let signing_in = content_security_policy(Some("https://idp.example.com"), false);
        assert!(
            signing_in
                .to_str()
                .unwrap()
                .contains("form-action 'self' https://idp.example.com;")
        );
        // A page with our script allows it by its hash, and nothing else.
        let scripted = content_security_policy(None, true);
        let scripted = scripted.to_str().unwrap();
        let hash = base64::engine::general_purpose::STANDARD
            .encode(Sha256::digest(PASSKEY_SCRIPT.as_bytes()));
        assert!(
            scripted.contains(&format!("script-src 'sha256-{hash}';")),
            "{scripted}"
        );
        assert!(scripted.starts_with("default-src 'none';") && !scripted.contains("unsafe"));
    }
}
