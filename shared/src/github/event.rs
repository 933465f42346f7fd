//! The GitHub events Countersign acts on, read from a verified delivery: a job waiting on an
//! environment (`deployment_protection_rule` / `requested`) and a run that ended
//! (`workflow_run` / `completed`). Everything else — `ping` included — is unused.

use serde_json::Value;

use crate::domain::FieldError;

/// The header naming the event.
pub const EVENT_HEADER: &str = "x-github-event";
/// The header naming the delivery: the same on every redelivery of it.
pub const DELIVERY_HEADER: &str = "x-github-delivery";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GithubEvent {
    /// A job waits on an environment with Countersign's rule.
    DeploymentRequested(DeploymentRequest),
    /// A workflow run ended: whatever of it still waits, waits for nothing.
    RunCompleted(RunCompleted),
    /// `ping`, another event, or another action: answered 200, nothing recorded.
    Unused,
}

/// `deployment_protection_rule` / `requested`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeploymentRequest {
    pub environment: String,
    /// What triggered the deployment (`push`, `workflow_dispatch`, …).
    pub event: String,
    pub sha: String,
    pub git_ref: String,
    /// Where the answer goes: checked to be `{api_url}/repos/{owner}/{repo}/actions/runs/{run
    /// id}/deployment_protection_rule`, on the tenant's `api_url`.
    pub callback_url: String,
    /// `owner/name`.
    pub repository: String,
    pub repository_id: u64,
    pub run_id: u64,
    pub installation_id: u64,
    pub sender_login: String,
    pub sender_id: u64,
    /// The deployment GitHub created for the waiting job (`deployment.id`), when it sends one:
    /// one per job attempt, so a second delivery naming it is a replay.
    pub deployment_id: Option<u64>,
}

/// `workflow_run` / `completed`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunCompleted {
    pub repository_id: u64,
    pub run_id: u64,
    /// `success`, `failure`, `cancelled`, … (`null` is told as `completed`).
    pub conclusion: String,
    /// When it ended (`workflow_run.updated_at`), if GitHub says: a re-run keeps the run's id,
    /// so only the rounds opened before this end are the ended attempt's.
    pub completed_at: Option<crate::domain::EpochSeconds>,
    /// Which attempt of the run ended (`workflow_run.run_attempt`), when GitHub says: a run's
    /// attempt ends once, so a second delivery naming it is a replay.
    pub run_attempt: Option<u64>,
}

impl DeploymentRequest {
    /// What makes this event one of a kind, beside its delivery id (which is not signed): its
    /// deployment. `None` when GitHub sent no deployment.
    pub fn replay_key(&self) -> Option<String> {
        self.deployment_id
            .map(|id| format!("deployment#{}#{id}", self.repository_id))
    }
}

impl RunCompleted {
    /// What makes this event one of a kind, beside its delivery id: the run's attempt.
    pub fn replay_key(&self) -> Option<String> {
        self.run_attempt
            .map(|attempt| format!("run-ended#{}#{}#{attempt}", self.repository_id, self.run_id))
    }
}

/// Reads a verified delivery of `event` (the `X-GitHub-Event` header). An event Countersign acts
/// on that is not as GitHub documents it is refused, naming each field (a 400: GitHub shows it
/// as a failed delivery).
pub fn parse(event: &str, body: &[u8], api_url: &str) -> Result<GithubEvent, Vec<FieldError>> {
    let action = |payload: &Value| payload["action"].as_str().map(str::to_owned);
    match event {
        "deployment_protection_rule" | "workflow_run" => {}
        _ => return Ok(GithubEvent::Unused),
    }
    let payload: Value = serde_json::from_slice(body)
        .map_err(|_| vec![FieldError::new("", "the body is not JSON")])?;
    if !payload.is_object() {
        return Err(vec![FieldError::new("", "the body must be a JSON object")]);
    }
    let mut errors = Vec::new();
    let parsed = match (event, action(&payload).as_deref()) {
        ("deployment_protection_rule", Some("requested")) => {
            deployment(&payload, api_url, &mut errors).map(GithubEvent::DeploymentRequested)
        }
        ("workflow_run", Some("completed")) => {
            run_completed(&payload, &mut errors).map(GithubEvent::RunCompleted)
        }
        _ => Some(GithubEvent::Unused),
    };
    match parsed {
        Some(event) if errors.is_empty() => Ok(event),
        _ => Err(errors),
    }
}

fn text(payload: &Value, path: &[&str], errors: &mut Vec<FieldError>) -> Option<String> {
    let mut value = payload;
    for key in path {
        value = &value[*key];
    }
    match value.as_str() {
        Some(s) if !s.is_empty() && s.chars().count() <= 1024 => Some(s.to_owned()),
        _ => {
            errors.push(FieldError::new(
                path.join("."),
                "must be a non-empty string",
            ));
            None
        }
    }
}

fn id(payload: &Value, path: &[&str], errors: &mut Vec<FieldError>) -> Option<u64> {
    let mut value = payload;
    for key in path {
        value = &value[*key];
    }
    match value.as_u64() {
        Some(id) if id > 0 => Some(id),
        _ => {
            errors.push(FieldError::new(
                path.join("."),
                "must be a positive integer",
            ));
            None
        }
    }
}

fn deployment(
    payload: &Value,
    api_url: &str,
    errors: &mut Vec<FieldError>,
) -> Option<DeploymentRequest> {
    let environment = text(payload, &["environment"], errors);
    let repository = text(payload, &["repository", "full_name"], errors);
    let repository_id = id(payload, &["repository", "id"], errors);
    let installation_id = id(payload, &["installation", "id"], errors);
    let sender_login = text(payload, &["sender", "login"], errors);
    let sender_id = id(payload, &["sender", "id"], errors);
    // `deployment` may be null: the commit is then the event's own.
    let sha = payload["sha"]
        .as_str()
        .or_else(|| payload["deployment"]["sha"].as_str())
        .filter(|s| !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_owned);
    if sha.is_none() {
        errors.push(FieldError::new("sha", "must be a commit (hex)"));
    }
    let git_ref = payload["ref"]
        .as_str()
        .or_else(|| payload["deployment"]["ref"].as_str())
        .unwrap_or_default()
        .chars()
        .take(1024)
        .collect();
    let event = payload["event"]
        .as_str()
        .unwrap_or_default()
        .chars()
        .take(100)
        .collect();
    let callback = text(payload, &["deployment_callback_url"], errors);
    let run_id = match (&callback, &repository) {
        (Some(url), Some(repository)) => match callback_run(url, api_url, repository) {
            Ok(run_id) => Some(run_id),
            Err(problem) => {
                errors.push(FieldError::new("deployment_callback_url", problem));
                None
            }
        },
        _ => None,
    };
    Some(DeploymentRequest {
        environment: environment?,
        event,
        sha: sha?,
        git_ref,
        callback_url: callback?,
        repository: repository?,
        repository_id: repository_id?,
        run_id: run_id?,
        installation_id: installation_id?,
        sender_login: sender_login?,
        sender_id: sender_id?,
        deployment_id: payload["deployment"]["id"].as_u64(),
    })
}

fn run_completed(payload: &Value, errors: &mut Vec<FieldError>) -> Option<RunCompleted> {
    let repository_id = id(payload, &["repository", "id"], errors);
    let run_id = id(payload, &["workflow_run", "id"], errors);
    let conclusion = payload["workflow_run"]["conclusion"]
        .as_str()
        .unwrap_or("completed")
        .chars()
        .take(100)
        .collect();
    let completed_at = payload["workflow_run"]["updated_at"]
        .as_str()
        .and_then(|at| {
            time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339).ok()
        })
        .map(time::OffsetDateTime::unix_timestamp);
    Some(RunCompleted {
        repository_id: repository_id?,
        run_id: run_id?,
        conclusion,
        completed_at,
        run_attempt: payload["workflow_run"]["run_attempt"].as_u64(),
    })
}

/// The run a callback URL names, if it is `{api_url}/repos/{repository}/actions/runs/{run
/// id}/deployment_protection_rule` — on `api_url`'s origin and under its path, for the event's
/// own repository. Countersign sends its answer (with the App's token) nowhere else.
pub fn callback_run(callback: &str, api_url: &str, repository: &str) -> Result<u64, String> {
    let refused = || {
        format!(
            "must be {api_url}/repos/{repository}/actions/runs/<run id>/deployment_protection_rule"
        )
    };
    let (Ok(url), Ok(api)) = (url::Url::parse(callback), url::Url::parse(api_url)) else {
        return Err(refused());
    };
    if url.origin() != api.origin()
        || url.query().is_some()
        || url.fragment().is_some()
        || !url.username().is_empty()
        || url.password().is_some()
    {
        return Err(refused());
    }
    let base = api.path().trim_end_matches('/');
    let rest = url.path().strip_prefix(base).ok_or_else(refused)?;
    let segments: Vec<&str> = rest.split('/').collect();
    match segments.as_slice() {
        [
            "",
            "repos",
            owner,
            name,
            "actions",
            "runs",
            run,
            "deployment_protection_rule",
        ] if format!("{owner}/{name}").eq_ignore_ascii_case(repository) => run
            .parse::<u64>()
            .ok()
            .filter(|r| *r > 0 && !run.starts_with('0'))
            .ok_or_else(refused),
        _ => Err(refused()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const API: &str = "https://api.github.com";

    fn requested() -> Value {
        json!({
            "action": "requested",
            "environment": "production",
            "event": "push",
            "sha": "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d",
            "ref": "refs/heads/main",
            "deployment_callback_url": "https://api.github.com/repos/acme/api/actions/runs/123/deployment_protection_rule",
            "deployment": null,
            "repository": {"id": 77, "full_name": "acme/api"},
            "installation": {"id": 42},
            "sender": {"login": "octocat", "id": 1001}
        })
    }

    fn parsed(event: &str, payload: &Value) -> Result<GithubEvent, Vec<FieldError>> {
        parse(event, payload.to_string().as_bytes(), API)
    }

    #[test]
    fn a_waiting_job_is_read_with_its_run_from_the_callback_url() {
        let GithubEvent::DeploymentRequested(d) =
            parsed("deployment_protection_rule", &requested()).unwrap()
        else {
            panic!("a deployment");
        };
        assert_eq!(
            (d.run_id, d.repository_id, d.installation_id, d.sender_id),
            (123, 77, 42, 1001)
        );
        assert_eq!(
            (d.environment.as_str(), d.repository.as_str()),
            ("production", "acme/api")
        );
        // `deployment` given instead of the top-level sha and ref.
        let mut old = requested();
        old.as_object_mut().unwrap().remove("sha");
        old.as_object_mut().unwrap().remove("ref");
        old["deployment"] = json!({"sha": "abcdef1", "ref": "v1"});
        let GithubEvent::DeploymentRequested(d) =
            parsed("deployment_protection_rule", &old).unwrap()
        else {
            panic!("a deployment");
        };
        assert_eq!((d.sha.as_str(), d.git_ref.as_str()), ("abcdef1", "v1"));
    }

    #[test]
    fn a_callback_anywhere_but_the_api_for_the_events_repository_is_refused() {
        for url in [
            "https://evil.example/repos/acme/api/actions/runs/123/deployment_protection_rule",
            "http://api.github.com/repos/acme/api/actions/runs/123/deployment_protection_rule",
            "https://api.github.com:8443/repos/acme/api/actions/runs/123/deployment_protection_rule",
            "https://api.github.com/repos/acme/other/actions/runs/123/deployment_protection_rule",
            "https://api.github.com/repos/acme/api/actions/runs/123/deployment_protection_rule?x=1",
            "https://api.github.com/repos/acme/api/actions/runs/0123/deployment_protection_rule",
            "https://api.github.com/repos/acme/api/actions/runs/x/deployment_protection_rule",
            "https://api.github.com/repos/acme/api/actions/runs/123/approve",
            "https://u:p@api.github.com/repos/acme/api/actions/runs/123/deployment_protection_rule",
        ] {
            let mut payload = requested();
            payload["deployment_callback_url"] = json!(url);
            let errors = parsed("deployment_protection_rule", &payload).unwrap_err();
            assert_eq!(errors[0].field, "deployment_callback_url", "{url}");
        }
        // GitHub Enterprise Server: the API under a path.
        assert_eq!(
            callback_run(
                "https://ghe.acme.internal/api/v3/repos/acme/api/actions/runs/9/deployment_protection_rule",
                "https://ghe.acme.internal/api/v3",
                "acme/api"
            ),
            Ok(9)
        );
    }

    #[test]
    fn other_events_and_actions_are_unused_and_a_broken_one_names_its_fields() {
        assert_eq!(
            parsed("ping", &json!({"zen": "x"})),
            Ok(GithubEvent::Unused)
        );
        assert_eq!(parse("push", b"not json", API), Ok(GithubEvent::Unused));
        let mut other = requested();
        other["action"] = json!("approved");
        assert_eq!(
            parsed("deployment_protection_rule", &other),
            Ok(GithubEvent::Unused)
        );
        let run = json!({"action": "completed", "repository": {"id": 77},
            "workflow_run": {"id": 123, "conclusion": "cancelled", "updated_at": "2026-12-04T10:00:00Z"}});
        assert_eq!(
            parsed("workflow_run", &run),
            Ok(GithubEvent::RunCompleted(RunCompleted {
                repository_id: 77,
                run_id: 123,
                conclusion: "cancelled".into(),
                completed_at: Some(1_796_378_400),
                run_attempt: None,
            }))
        );
        let mut broken = requested();
        broken["installation"] = json!(null);
        broken["sender"]["id"] = json!("1001");
        let fields: Vec<String> = parsed("deployment_protection_rule", &broken)
            .unwrap_err()
            .into_iter()
            .map(|e| e.field)
            .collect();
        assert_eq!(fields, ["installation.id", "sender.id"]);
        assert!(parse("deployment_protection_rule", b"[1]", API).is_err());
    }
}
