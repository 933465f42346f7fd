//! A real OpenID Provider for the sign-in tests: panva's oidc-provider from npm (OpenID
//! Certified), run by Node.js as `infra/oidc/provider.mjs` on a free loopback port, from the copy
//! `make test` installs into `.local/oidc` (`infra/setup-oidc.sh`). A test gives it its clients and
//! accounts; [`TestProvider::sign_in`] then plays the browser on the provider's own login and
//! consent pages and hands back the redirect to the client, unrequested.
//!
//! Nothing is skipped: without Node.js or the installed package, [`TestProvider::start`] panics
//! saying which is missing and how to install it.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, COOKIE, LOCATION, SET_COOKIE};
use url::Url;

use crate::workspace_root;

/// How long the provider may take to print its `listening on` line (it starts in about half a
/// second; a loaded machine building the workspace beside it is slower).
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Page loads one sign-in may take (the authorize request, the login and consent pages, their
/// posts and the provider's own redirects between them take 7).
const MAX_STEPS: usize = 20;

/// One OpenID Provider of one test's own: its issuer is `http://127.0.0.1:<port>`. Stopped when
/// dropped (and, its stdin closing, when the test process ends however it ends).
pub struct TestProvider {
    /// The issuer, with no trailing slash: discovery is at
    /// `{issuer}/.well-known/openid-configuration`.
    pub issuer: String,
    /// A client that follows no redirects (the sign-in follows the provider's own by hand).
    pub http: reqwest::Client,
    child: Child,
    _stdin: ChildStdin,
}

impl TestProvider {
    /// Starts a provider configured by `config`:
    /// `{"clients": [{"client_id", "client_secret", "redirect_uris": [...]}],
    ///   "accounts": [{"sub", "email", "email_verified"}], "keys": [private JWK...]}` (`keys`
    /// optional: one fresh RS256 key by default; a client may add any client metadata, e.g.
    /// `"token_endpoint_auth_method": "client_secret_post"`). See `infra/oidc/provider.mjs`.
    pub async fn start(config: serde_json::Value) -> TestProvider {
        Self::start_on(0, config).await
    }

    /// [`TestProvider::start`] on `port` (0: any free one): a provider started again on the
    /// port of one stopped is the same issuer with new keys (a key rotation).
    pub async fn start_on(port: u16, config: serde_json::Value) -> TestProvider {
        let root = workspace_root();
        let script = root.join("infra/oidc/provider.mjs");
        let package = root.join(".local/oidc/node_modules/oidc-provider/package.json");
        assert!(
            package.is_file(),
            "the OpenID provider the sign-in tests run is not installed ({} is missing): run \
             infra/setup-oidc.sh (`make test` and `make oidc` do)",
            package.display()
        );
        let mut child = Command::new("node")
            .arg(&script)
            .arg(port.to_string())
            .arg(config.to_string())
            .arg("--exit-with-stdin")
            .env_remove("OIDC_TEST_CONFIG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run `node` ({e}): the sign-in tests need Node.js (20 or newer) and \
                     npm for their OpenID provider: apt install nodejs npm"
                )
            });
        let stdin = child.stdin.take().expect("stdin was piped");
        let stdout = child.stdout.take().expect("stdout was piped");
        let stderr = child.stderr.take().expect("stderr was piped");

        // Its stderr (only errors) goes on to the test's, and is kept for a failed start's panic.
        let stderr_lines = std::thread::spawn(move || {
            let mut kept = String::new();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("oidc-provider: {line}");
                if kept.len() < 8192 {
                    kept.push_str(&line);
                    kept.push('\n');
                }
            }
            kept
        });
        let first_line = tokio::time::timeout(
            START_TIMEOUT,
            tokio::task::spawn_blocking(move || {
                let mut reader = BufReader::new(stdout);
                let mut line = String::new();
                let read = reader.read_line(&mut line);
                // Anything more it prints is drained, so it never blocks on a full pipe.
                std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
                read.map(|_| line)
            }),
        )
        .await;
        let (line, what) = match first_line {
            Ok(Ok(Ok(line))) => (line, "did not start"),
            Ok(Ok(Err(e))) => panic!("reading the OpenID provider's stdout: {e}"),
            Ok(Err(e)) => panic!("reading the OpenID provider's stdout: {e}"),
            Err(_) => (String::new(), "did not print `listening on` in time"),
        };
        let Some(issuer) = line.trim_end().strip_prefix("listening on ") else {
            let _ = child.kill();
            let status = child
                .wait()
                .map_or_else(|e| e.to_string(), |s| s.to_string());
            panic!(
                "the OpenID provider ({}) {what} ({status}); it printed {line:?} and on \
                 stderr:\n{}",
                script.display(),
                stderr_lines.join().unwrap_or_default()
            );
        };
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(30))
            .build()
            .expect("a reqwest client");
        TestProvider {
            issuer: issuer.to_owned(),
            http,
            child,
            _stdin: stdin,
        }
    }

    /// The provider's discovery document.
    pub async fn discovery(&self) -> serde_json::Value {
        let url = format!("{}/.well-known/openid-configuration", self.issuer);
        let reply = self.http.get(&url).send().await.expect("GET discovery");
        assert_eq!(reply.status(), 200, "GET {url}");
        reply.json().await.expect("discovery is JSON")
    }

    /// Signs in as `login` (an account's sub or email; any other login is a subject of that name
    /// with no email) the way a browser would: GETs `authorize_url` (on this provider), follows
    /// the provider's redirects by hand with its cookies, posts its login form (`login`, any
    /// `password`) and its consent form ("Continue"), and returns the redirect that leaves the
    /// provider — to the client's redirect_uri, with `code` and `state` (or `error`) — without
    /// requesting it. Panics on any other page (the provider's error page: its text is in the
    /// message) or after [`MAX_STEPS`] requests.
    pub async fn sign_in(&self, authorize_url: &str, login: &str) -> Url {
        let issuer = Url::parse(&self.issuer).expect("the issuer is a URL");
        let mut url = Url::parse(authorize_url).expect("the authorize URL is a URL");
        assert_eq!(
            url.origin(),
            issuer.origin(),
            "sign_in drives this provider's pages: {authorize_url} is not on {}",
            self.issuer
        );
        let mut jar = CookieJar::default();
        let mut form: Option<Vec<(String, String)>> = None;
        for _ in 0..MAX_STEPS {
            let mut request = match form.take() {
                Some(fields) => self
                    .http
                    .post(url.clone())
                    .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
                    .body(form_body(&fields)),
                None => self.http.get(url.clone()),
            };
            if let Some(cookies) = jar.header_for(url.path()) {
                request = request.header(COOKIE, cookies);
            }
            let reply = request
                .send()
                .await
                .unwrap_or_else(|e| panic!("sign-in: {url}: {e}"));
            let status = reply.status();
            for set in reply.headers().get_all(SET_COOKIE) {
                jar.store(set.to_str().expect("a Set-Cookie header is ASCII"));
            }
            if status.is_redirection() {
                let location = reply
                    .headers()
                    .get(LOCATION)
                    .and_then(|l| l.to_str().ok())
                    .unwrap_or_else(|| panic!("sign-in: {url} answered {status} without Location"));
                let next = url
                    .join(location)
                    .unwrap_or_else(|e| panic!("sign-in: {url} redirected to {location:?}: {e}"));
                if next.origin() != issuer.origin() {
                    return next;
                }
                url = next;
                continue;
            }
            let body = reply.text().await.unwrap_or_default();
            assert!(
                status.is_success(),
                "sign-in: {url} answered {status}:\n{}",
                page_text(&body)
            );
            let page = Form::parse(&body)
                .unwrap_or_else(|| panic!("sign-in: {url} served a page with no form:\n{body}"));
            let mut fields = page.hidden;
            match fields
                .iter()
                .find(|(n, _)| n == "prompt")
                .map(|(_, v)| v.as_str())
            {
                Some("login") => {
                    fields.push(("login".to_owned(), login.to_owned()));
                    fields.push(("password".to_owned(), "any password".to_owned()));
                }
                Some("consent") => {}
                other => {
                    panic!("sign-in: {url} served an unknown form (prompt {other:?}):\n{body}")
                }
            }
            url = url
                .join(&page.action)
                .unwrap_or_else(|e| panic!("sign-in: the form's action {:?}: {e}", page.action));
            form = Some(fields);
        }
        panic!("sign-in did not leave the provider within {MAX_STEPS} requests (last: {url})")
    }
}

impl Drop for TestProvider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `fields`, as an HTML form posts them (application/x-www-form-urlencoded).
pub fn form_body<K: AsRef<str>, V: AsRef<str>>(fields: &[(K, V)]) -> String {
    let mut body = url::form_urlencoded::Serializer::new(String::new());
    for (name, value) in fields {
        body.append_pair(name.as_ref(), value.as_ref());
    }
    body.finish()
}

/// The cookies the provider sets, by name and path, sent back as a browser would (to paths under
/// theirs). One host, so no domains; a cookie set empty or expired is deleted.
#[derive(Default)]
struct CookieJar {
    cookies: Vec<(String, String, String)>,
}

impl CookieJar {
    fn store(&mut self, set_cookie: &str) {
        let mut parts = set_cookie.split(';').map(str::trim);
        let Some((name, value)) = parts.next().and_then(|p| p.split_once('=')) else {
            return;
        };
        let mut path = "/".to_owned();
        let mut expired = value.is_empty();
        for attribute in parts {
            let (key, val) = attribute.split_once('=').unwrap_or((attribute, ""));
            match key.to_ascii_lowercase().as_str() {
                "path" => path = val.to_owned(),
                "expires" => expired |= val.contains("1970"),
                "max-age" => expired |= val.parse::<i64>().is_ok_and(|age| age <= 0),
                _ => {}
            }
        }
        self.cookies.retain(|(n, _, p)| !(n == name && *p == path));
        if !expired {
            self.cookies.push((name.to_owned(), value.to_owned(), path));
        }
    }

    fn header_for(&self, request_path: &str) -> Option<String> {
        let cookies: Vec<String> = self
            .cookies
            .iter()
            .filter(|(_, _, path)| {
                request_path == path
                    || request_path.starts_with(&format!("{}/", path.trim_end_matches('/')))
            })
            .map(|(name, value, _)| format!("{name}={value}"))
            .collect();
        (!cookies.is_empty()).then(|| cookies.join("; "))
    }
}

/// The first form of a page: its action and its hidden inputs.
struct Form {
    action: String,
    hidden: Vec<(String, String)>,
}

impl Form {
    fn parse(html: &str) -> Option<Form> {
        let start = html.find("<form")?;
        let end = html[start..]
            .find("</form>")
            .map_or(html.len(), |e| start + e);
        let form = &html[start..end];
        let tag_end = form.find('>')?;
        let action = attribute(&form[..tag_end], "action")?;
        let hidden = form
            .match_indices("<input")
            .filter_map(|(at, _)| {
                let tag = &form[at..at + form[at..].find('>')?];
                (attribute(tag, "type").as_deref() == Some("hidden")).then(|| {
                    Some((
                        attribute(tag, "name")?,
                        attribute(tag, "value").unwrap_or_default(),
                    ))
                })?
            })
            .collect();
        Some(Form { action, hidden })
    }
}

/// A double-quoted attribute of one tag, unescaped.
fn attribute(tag: &str, name: &str) -> Option<String> {
    let needle = format!(" {name}=\"");
    let start = tag.find(&needle)? + needle.len();
    let len = tag[start..].find('"')?;
    Some(unescape(&tag[start..start + len]))
}

fn unescape(text: &str) -> String {
    text.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// An error page's text, without its markup and style (the provider's error pages name the
/// `error` and `error_description`).
fn page_text(html: &str) -> String {
    let body = html.find("<body").map_or(html, |at| &html[at..]);
    let mut text = String::new();
    let mut in_tag = false;
    for c in body.chars() {
        match c {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                text.push(' ');
            }
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    unescape(&text.split_whitespace().collect::<Vec<_>>().join(" "))
}
