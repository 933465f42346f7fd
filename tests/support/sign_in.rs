//! A test stack whose tenant A signs in at a real OpenID Provider (oidc-provider, see
//! [`crate::oidc`]): the app's `OIDC` names the provider, the provider knows the app's redirect
//! URI, and [`SignInStack::sign_in`] goes through the app's login route, the provider's own
//! login and consent pages, and the app's callback, as a browser would — handing back the
//! session cookie. Tenant B has no `OIDC`: its review links stay bearer credentials.

use reqwest::header::{COOKIE, LOCATION, ORIGIN, SET_COOKIE};
use serde_json::{Value, json};
use url::Url;

use crate::oidc::{TestProvider, form_body};
use crate::{CreateBody, KEY_A, Reply, TENANT_A, TestApp};

pub const CLIENT_ID: &str = "countersign";
pub const CLIENT_SECRET: &str = "countersign-client-secret-0123456789";
pub const SESSION_COOKIE: &str = "__Host-countersign-session";
/// Each sign-in's cookie is this, a dash and the start of its `state`.
pub const SIGN_IN_COOKIE: &str = "__Host-countersign-sign-in";

/// The provider's people: `sub`s are `<name>-1`. Eve's email is not verified; Mallory is
/// listed on no approval.
pub fn accounts() -> Value {
    let person = |name: &str, verified: bool| {
        json!({"sub": format!("{name}-1"), "email": format!("{name}@example.com"),
               "email_verified": verified})
    };
    json!([
        person("alice", true),
        person("bob", true),
        person("carol", true),
        person("mallory", true),
        person("eve", false),
    ])
}

/// A `deploy` of `build` (summary "Deploy api build {build}") that needs both `approvers`
/// (rule `both`).
pub fn two_of_two(build: u64, approvers: &[&str]) -> String {
    CreateBody::new("deploy", approvers)
        .payload(json!({"service": "api", "build": build}))
        .context(json!({"summary": format!("Deploy api build {build}")}))
        .policy(json!({"rules": [{"name": "both", "approvers": approvers, "min_approvals": 2}]}))
        .to_string()
}

pub struct SignInStack {
    pub t: TestApp,
    provider: Option<TestProvider>,
    port: u16,
    /// Follows no redirect: each step is looked at.
    pub http: reqwest::Client,
    /// `PUBLIC_BASE_URL`'s origin: the app's address, or (for passkeys) the same by name.
    public_origin: String,
}

/// A session: the cookie's value, and where the callback sent its person.
#[derive(Debug, Clone)]
pub struct SignedIn {
    pub cookie: String,
    pub location: String,
}

impl SignInStack {
    /// Tenant A signs in at a provider of its own; `oidc` adds to its `OIDC` entry (e.g.
    /// `max_auth_age_seconds`); `overrides` as [`TestApp::start_with`].
    pub async fn start(oidc: Value, overrides: &[(&str, &str)]) -> Self {
        Self::start_as(oidc, overrides, false).await
    }

    /// [`SignInStack::start`] without the jobs, its `OIDC` in a Secrets Manager secret (as the
    /// template gives it: `OIDC_SECRET_ARN`, which only the decide function's role may read).
    pub async fn start_from_secret(oidc: Value) -> Self {
        Self::start_as(oidc, &[], true).await
    }

    async fn start_as(oidc: Value, overrides: &[(&str, &str)], from_secret: bool) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port for the provider");
        let mut entry = json!({"issuer": format!("http://127.0.0.1:{port}"),
                               "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET});
        for (key, value) in oidc.as_object().into_iter().flatten() {
            entry[key] = value.clone();
        }
        let config = json!({ TENANT_A: entry }).to_string();
        let mut all = vec![("PUBLIC_BASE_URL", "{base}")];
        all.extend_from_slice(overrides);
        let t = if from_secret {
            TestApp::start_with_secrets(&all, &[("OIDC", config.as_str())]).await
        } else {
            all.push(("OIDC", config.as_str()));
            // With the jobs running: the inbox reads the approval index dispatch keeps.
            TestApp::start_jobs(&all).await
        };
        let public_origin = match overrides
            .iter()
            .any(|(k, v)| *k == "PUBLIC_BASE_URL" && v.contains("{localhost}"))
        {
            true => t.base.replace("127.0.0.1", "localhost"),
            false => t.base.clone(),
        };
        let mut stack = Self {
            t,
            provider: None,
            port,
            public_origin,
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("an HTTP client"),
        };
        stack.start_provider().await;
        stack
    }

    fn provider_config(&self) -> Value {
        let mut redirect_uris = vec![self.t.url(&format!("/auth/{TENANT_A}/callback"))];
        let by_name = format!("{}/auth/{TENANT_A}/callback", self.public_origin);
        if !redirect_uris.contains(&by_name) {
            redirect_uris.push(by_name);
        }
        json!({
            // Registered to always state `auth_time` (which the trail records), as Okta does.
            "clients": [{"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
                         "redirect_uris": redirect_uris,
                         "require_auth_time": true}],
            "accounts": accounts(),
        })
    }

    async fn start_provider(&mut self) {
        self.provider = Some(TestProvider::start_on(self.port, self.provider_config()).await);
    }

    /// The provider stops and starts again on its port, as the same issuer with a new signing
    /// key (a key rotation).
    pub async fn rotate_provider_keys(&mut self) {
        self.provider.take();
        self.start_provider().await;
    }

    pub fn provider(&self) -> &TestProvider {
        self.provider.as_ref().expect("the provider runs")
    }

    pub fn issuer(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// This app's origin (what its own pages' posts carry as `Origin`).
    pub fn origin(&self) -> String {
        self.public_origin.clone()
    }

    /// [`SignInStack::start`] with `PUBLIC_BASE_URL` naming the app `localhost` (WebAuthn's
    /// relying party must be a domain, not an IP address).
    pub async fn start_for_passkeys(oidc: Value, overrides: &[(&str, &str)]) -> Self {
        let mut all = vec![("PUBLIC_BASE_URL", "{localhost}")];
        all.extend_from_slice(overrides);
        Self::start_as(oidc, &all, false).await
    }

    /// `GET /auth/{tenant}/login?return_to=…`: the provider's authorize URL and the sign-in's
    /// cookie, as a `Cookie` header sends it (`name=value`).
    pub async fn begin(&self, return_to: &str, step_up: bool) -> (Url, String) {
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        query.append_pair("return_to", return_to);
        if step_up {
            query.append_pair("step_up", "1");
        }
        let reply = self
            .get(&format!("/auth/{TENANT_A}/login?{}", query.finish()), None)
            .await;
        assert_eq!(reply.status, 302, "login: {}", reply.text());
        let to = Url::parse(location(&reply)).expect("the provider's URL");
        let cookie = sign_in_cookie_of(&reply).expect("the sign-in cookie");
        (to, cookie)
    }

    /// The callback the provider sent the person to, requested with `sign_in_cookie`
    /// (`name=value`).
    pub async fn finish(&self, callback: &Url, sign_in_cookie: Option<&str>) -> Reply {
        let path = format!(
            "{}?{}",
            callback.path(),
            callback.query().unwrap_or_default()
        );
        let cookie = sign_in_cookie.map(str::to_owned);
        self.get_with(&path, cookie.as_deref()).await
    }

    /// Signs in as `login` (an account's email), coming back to `return_to`.
    pub async fn sign_in(&self, login: &str, return_to: &str) -> SignedIn {
        self.sign_in_with(login, return_to, false).await
    }

    pub async fn sign_in_with(&self, login: &str, return_to: &str, step_up: bool) -> SignedIn {
        let (authorize, cookie) = self.begin(return_to, step_up).await;
        let back = self.provider().sign_in(authorize.as_str(), login).await;
        let reply = self.finish(&back, Some(&cookie)).await;
        assert_eq!(reply.status, 303, "callback: {}", reply.text());
        SignedIn {
            cookie: set_cookie(&reply, SESSION_COOKIE).expect("the session cookie"),
            location: location(&reply).to_owned(),
        }
    }

    /// The inbox page once it lists `expected` approvals (dispatch indexes them from the
    /// stream, soon after they are made).
    pub async fn inbox_listing(&self, path: &str, session: &str, expected: usize) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let html = self.get(path, Some(session)).await.text();
            if html.matches("class=\"card approval\"").count() == expected {
                return html;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "timed out: the inbox lists {expected}:\n{html}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }

    /// Tenant A's approval `id`, as the API answers it.
    pub async fn approval(&self, id: &str) -> Value {
        let t = &self.t;
        let reply = t
            .send(
                t.http
                    .get(t.url(&format!("/approvals/{id}")))
                    .bearer_auth(KEY_A),
            )
            .await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        reply.json()
    }

    /// GET `path` (or a whole URL) with the session cookie `session`, if any.
    pub async fn get(&self, path: &str, session: Option<&str>) -> Reply {
        let cookie = session.map(|s| format!("{SESSION_COOKIE}={s}"));
        self.get_with(path, cookie.as_deref()).await
    }

    async fn get_with(&self, path: &str, cookie: Option<&str>) -> Reply {
        let url = if path.starts_with("http") {
            path.to_owned()
        } else {
            self.t.url(path)
        };
        let mut request = self.http.get(url);
        if let Some(cookie) = cookie {
            request = request.header(COOKIE, cookie);
        }
        self.t.send(request).await
    }

    /// The review page's Approve on approval `id`, as a browser on this origin posts it: the
    /// link's `token`, the form's `csrf`, in `session`.
    pub async fn approve(&self, id: &str, token: &str, csrf: &str, session: &str) -> Reply {
        let fields = [("token", token), ("csrf", csrf), ("decision", "approve")];
        let path = format!("/approvals/{id}/decision");
        self.post_form(&path, &fields, Some(session), Some(&self.origin()))
            .await
    }

    /// POSTs `fields` as a form to `path`, with the session cookie and `Origin` given.
    pub async fn post_form(
        &self,
        path: &str,
        fields: &[(&str, &str)],
        session: Option<&str>,
        origin: Option<&str>,
    ) -> Reply {
        let mut request = self
            .http
            .post(self.t.url(path))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form_body(fields));
        if let Some(session) = session {
            request = request.header(COOKIE, format!("{SESSION_COOKIE}={session}"));
        }
        if let Some(origin) = origin {
            request = request.header(ORIGIN, origin);
        }
        self.t.send(request).await
    }
}

/// The `Location` of a redirect.
pub fn location(reply: &Reply) -> &str {
    reply
        .headers
        .get(LOCATION)
        .and_then(|l| l.to_str().ok())
        .unwrap_or_else(|| panic!("no Location ({}): {}", reply.status, reply.text()))
}

/// The value a reply sets cookie `name` to (`None`: it sets none, or clears it).
pub fn set_cookie(reply: &Reply, name: &str) -> Option<String> {
    reply
        .headers
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.split(';').next()?.split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, value)| value.to_owned())
        .filter(|value| !value.is_empty())
}

/// The sign-in cookie a reply sets, as `name=value` (its name is the sign-in's own).
pub fn sign_in_cookie_of(reply: &Reply) -> Option<String> {
    reply
        .headers
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.split(';').next())
        .find(|pair| pair.starts_with(&format!("{SIGN_IN_COOKIE}-")))
        .map(str::to_owned)
}

/// The value of the hidden input `name` on a page.
pub fn hidden(html: &str, name: &str) -> Option<String> {
    let at = html.find(&format!("name=\"{name}\""))?;
    let tag_start = html[..at].rfind('<')?;
    let tag = &html[tag_start..tag_start + html[tag_start..].find('>')?];
    let value = tag.split("value=\"").nth(1)?;
    Some(value[..value.find('"')?].replace("&amp;", "&"))
}

/// The `href` of the first link whose text contains `text`.
pub fn link(html: &str, text: &str) -> Option<String> {
    let at = html.find(text)?;
    let anchor = html[..at].rfind("<a ")?;
    let href = html[anchor..].split("href=\"").nth(1)?;
    Some(href[..href.find('"')?].replace("&amp;", "&"))
}
