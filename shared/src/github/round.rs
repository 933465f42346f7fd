//! The approval a waiting job's round opens (pure): the built-in action type
//! `github_deployment`, its approvers and policy from the environment's entry, and the job it
//! gates. A round Countersign cannot let anyone approve — an environment without an entry, a
//! policy only the requester could meet, a deployment's approval policy that forbids it or
//! cannot be evaluated — opens already rejected, with the reason: GitHub is told `rejected` as
//! for any other rejection (fail closed).
//!
//! Under an enforced approval policy (docs/POLICY.md) the policy decides, as for any create:
//! the environment's approvers and rules only add, and an environment needs no entry.

use serde_json::{Map, Value, json};

use super::{DeploymentRequest, GithubApp};
use crate::domain::approval_policy::{
    ActivePolicy, AskRequest, GovernRefusal, Groups, Mode, govern,
};
use crate::domain::{
    Approval, ApprovalId, Approver, Channel, Decision, EpochSeconds, Execution, GITHUB_DEPLOYMENT,
    GithubDelivery, GithubGate, IdempotencyKey, Outcome, Status, TenantId,
};

/// Who refuses a round Countersign itself rejects (the decision's approver).
pub const REFUSER: &str = "countersign";

/// The tenant's approval policy in force (if any) and its groups, as a round sees them.
pub type RoundPolicy<'a> = (Option<&'a ActivePolicy>, &'a Groups);

/// The approval that opens the round of `request` (delivery `delivery`, received `now`) for
/// `tenant`'s `app`, under the tenant's approval policy.
pub fn round_approval(
    app: &GithubApp,
    tenant: &TenantId,
    request: &DeploymentRequest,
    delivery: &str,
    (active, groups): RoundPolicy<'_>,
    now: EpochSeconds,
) -> Result<Approval, &'static str> {
    let enforced = active.is_some_and(|a| a.mode == Mode::Enforce);
    let requested_by = Approver::parse(&format!("github:{}", request.sender_login))
        .map_err(|_| "the sender's login is not a name")?;
    // Identity comes from `users` only: an unmapped sender is nobody's approver.
    let requester = app.user(request.sender_id).cloned();
    let short_sha: String = request.sha.chars().take(7).collect();
    // An unmapped sender an environment allows is named as such wherever the approval shows.
    let unmapped = if requester.is_none() {
        format!(", by unmapped GitHub sender {}", request.sender_login)
    } else {
        String::new()
    };
    let summary = format!(
        "Deploy {}@{short_sha} to {}, run {}{unmapped}",
        request.repository, request.environment, request.run_id
    );
    let payload = object(json!({
        "repository": request.repository,
        "repository_id": request.repository_id,
        "run_id": request.run_id,
        "environment": request.environment,
        "sha": request.sha,
        "ref": request.git_ref,
        "event": request.event,
    }));
    let context = json!({
        "summary": summary,
        "requested_by": requested_by.as_str(),
        "github": {
            "sender": request.sender_login,
            "sender_approver": requester.as_ref().map(Approver::as_str),
            "unmapped_sender": requester.is_none(),
        },
    });
    let environment = app.environment(&request.environment);
    let sod_requester = requester.clone().unwrap_or_else(|| requested_by.clone());
    let (approvers, policy, refusal) = match environment {
        // The deployment's policy decides who must approve: no entry is needed.
        None if enforced && requester.is_some() => (Vec::new(), None, None),
        None => (
            Vec::new(),
            None,
            Some(format!(
                "the environment {:?} has no entry in GITHUB for this tenant: deployments to it \
                 are refused (fail closed)",
                request.environment
            )),
        ),
        // Nobody known asked: separation of duties cannot hold, unless the environment says
        // its deployments may come from bots, merge queues or schedules.
        Some(environment) if requester.is_none() && !environment.allow_unmapped_senders => (
            environment.approvers.clone(),
            None,
            Some(format!(
                "the deployment's sender {} (GitHub user {}) is not mapped in users: nobody \
                 known asked for it, so it is refused (an environment whose deployments come \
                 from bots, merge queues or schedules sets \"unmapped_senders\": \"allow\")",
                request.sender_login, request.sender_id
            )),
        ),
        Some(environment) => {
            let only_requester = environment
                .approvers
                .iter()
                .all(|a| a.identity() == sod_requester.identity());
            match environment.policy_for(&sod_requester) {
                _ if only_requester && !enforced => (
                    environment.approvers.clone(),
                    None,
                    Some(format!(
                        "the environment's only approver is the deployment's requester ({})",
                        sod_requester.as_str()
                    )),
                ),
                Ok(policy) => (environment.approvers.clone(), policy, None),
                Err(why) => (environment.approvers.clone(), None, Some(why)),
            }
        }
    };
    let expires_in = environment.map_or(super::config::DEFAULT_EXPIRES_IN_SECONDS, |e| {
        e.expires_in_seconds
    });
    // The deployment's decision, on a round the environment lets open.
    let governance = match refusal {
        Some(why) => Err(why),
        None => {
            let ask = AskRequest {
                tenant: tenant.as_str(),
                requester: requested_by.as_str(),
                roles: Vec::new(),
                action_type: GITHUB_DEPLOYMENT,
                payload: &payload,
                summary: &summary,
                approvers: approvers.iter().map(Approver::as_str).collect(),
                channel: "github",
                resume: "",
                expires_in_seconds: expires_in,
            };
            govern(
                active,
                groups,
                &ask,
                &sod_requester,
                (&approvers, policy.as_ref()),
            )
            .map_err(refused_by_policy)
        }
    };
    let rules = policy.as_ref().map_or(0, |p| p.rules.len());
    let idempotency_key = IdempotencyKey::parse(&format!("github:{delivery}"))
        .map_err(|_| "the delivery id is not printable")?;
    let decision = governance.as_ref().err().map(|why| Decision {
        outcome: Outcome::Rejected,
        approver: Approver::parse(REFUSER).unwrap_or_else(|_| requested_by.clone()),
        decided_at: now,
        channel: Channel::Github,
        comment: Some(why.clone()),
        webhook_event_id: Some(delivery.to_owned()),
        key_id: None,
        signed_in: None,
        by: None,
        delegation_set_by: None,
        passkey: None,
    });
    let approval = Approval {
        tenant: tenant.clone(),
        id: ApprovalId::generate_hinting(rules, true),
        status: if decision.is_some() {
            Status::Rejected
        } else {
            Status::Pending
        },
        requested_by: Some(requested_by),
        requested_by_key_id: None,
        action_type: GITHUB_DEPLOYMENT.to_owned(),
        executes: true,
        payload,
        approvers,
        context: object(context),
        idempotency_key,
        execute_key_names_approval: true,
        created_at: now,
        expires_at: now + expires_in,
        policy,
        votes: Vec::new(),
        decision,
        cancellation: None,
        execution: Execution::not_started(now),
        slack: None,
        trace: None,
        stall: Default::default(),
        resume: None,
        policy_source: None,
        policy_evaluated: None,
        assurance: None,
        comment_cap: None,
        certificate: None,
        github: Some(GithubGate {
            installation_id: request.installation_id,
            repository: request.repository.clone(),
            repository_id: request.repository_id,
            run_id: request.run_id,
            environment: request.environment.clone(),
            callback_url: request.callback_url.clone(),
            sender_login: request.sender_login.clone(),
            sender_id: request.sender_id,
            requester,
            joined_requesters: Vec::new(),
            deliveries: vec![GithubDelivery {
                id: delivery.to_owned(),
                at: now,
            }],
        }),
    };
    Ok(match governance {
        Ok(governance) => approval.governed(governance, now),
        Err(_) => approval,
    })
}

/// Why an enforced approval policy refuses a round: what GitHub is told.
fn refused_by_policy(refusal: GovernRefusal) -> String {
    let fields = |errors: Vec<crate::domain::FieldError>| {
        errors
            .into_iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect::<Vec<_>>()
            .join("; ")
    };
    match refusal {
        GovernRefusal::Forbidden { policies } if policies.is_empty() => {
            "no approval policy permits this deployment (Cedar's default deny)".to_owned()
        }
        GovernRefusal::Forbidden { policies } => {
            format!("forbidden by approval policy {}", policies.join(", "))
        }
        GovernRefusal::Error { errors } => format!(
            "an approval policy could not be evaluated, so the deployment is refused (fail closed): {}",
            errors
                .into_iter()
                .map(|(id, message)| format!("{id}: {message}"))
                .collect::<Vec<_>>()
                .join("; ")
        ),
        GovernRefusal::Unsatisfiable(errors) | GovernRefusal::Invalid(errors) => fields(errors),
    }
}

/// What an unpoliced round is (no policy pushed), for the tests.
#[cfg(test)]
pub(crate) const UNPOLICED: RoundPolicy<'static> = (None, &EMPTY_GROUPS);
#[cfg(test)]
static EMPTY_GROUPS: Groups = Groups::empty();

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::github::config::tests::TEST_KEY;
    use crate::github::parse_github;

    fn app() -> GithubApp {
        let raw = json!({"acme": {
            "app_id": 1, "private_key": TEST_KEY, "webhook_secret": "s",
            "environments": {
                "production": {"approvers": ["alice@acme", "bob@acme", "carol@acme"],
                    "policy": {"rules": [{"name": "two", "approvers": ["alice@acme", "bob@acme", "carol@acme"], "min_approvals": 2}]},
                    "expires_in_seconds": 3600},
                "solo": {"approvers": ["alice@acme"]},
                "nightly": {"approvers": ["alice@acme"], "unmapped_senders": "allow"}
            },
            "users": {"1001": "alice@acme", "1002": "dave@acme"}
        }});
        parse_github(&raw.to_string())
            .unwrap()
            .into_values()
            .next()
            .unwrap()
    }

    fn request(environment: &str, sender_id: u64) -> DeploymentRequest {
        DeploymentRequest {
            environment: environment.into(),
            event: "push".into(),
            sha: "1a2b3c4d5e6f".into(),
            git_ref: "refs/heads/main".into(),
            callback_url:
                "https://api.github.com/repos/acme/api/actions/runs/123/deployment_protection_rule"
                    .into(),
            repository: "acme/api".into(),
            repository_id: 77,
            run_id: 123,
            installation_id: 42,
            sender_login: "octocat".into(),
            sender_id,
            deployment_id: Some(9),
        }
    }

    fn tenant() -> TenantId {
        TenantId::parse("acme").unwrap()
    }

    #[test]
    fn a_configured_environment_opens_a_pending_round_with_its_policy_and_expiry() {
        let approval = round_approval(
            &app(),
            &tenant(),
            &request("production", 1002),
            "d-1",
            UNPOLICED,
            100,
        )
        .unwrap();
        assert_eq!(approval.status, Status::Pending);
        assert_eq!(approval.expires_at, 3700);
        assert_eq!(approval.policy.as_ref().unwrap().rules[0].min_approvals, 2);
        assert_eq!(approval.id.rules_hint(), Some(1));
        assert_eq!(
            approval.context["summary"],
            "Deploy acme/api@1a2b3c4 to production, run 123"
        );
        assert_eq!(
            approval.requested_by.as_ref().unwrap().as_str(),
            "github:octocat"
        );
        let gate = approval.github.as_ref().unwrap();
        assert_eq!(gate.requester.as_ref().unwrap().as_str(), "dave@acme");
        assert_eq!(approval.payload["run_id"], 123);
    }

    #[test]
    fn a_round_nobody_but_the_requester_could_approve_is_refused_at_once() {
        // No entry for the environment.
        let none = round_approval(
            &app(),
            &tenant(),
            &request("staging", 1002),
            "d-2",
            UNPOLICED,
            100,
        )
        .unwrap();
        assert_eq!(none.status, Status::Rejected);
        let why = none.decision.as_ref().unwrap().comment.clone().unwrap();
        assert!(
            why.contains("\"staging\"") && why.contains("GITHUB"),
            "{why}"
        );
        let answer = none.github_answer(100).unwrap();
        assert!(
            !answer.approved && answer.comment.contains("refused"),
            "{answer:?}"
        );
        // Alice deploys where she alone approves.
        let solo = round_approval(
            &app(),
            &tenant(),
            &request("solo", 1001),
            "d-3",
            UNPOLICED,
            100,
        )
        .unwrap();
        assert_eq!(solo.status, Status::Rejected);
        // A 2-of-3 rule Alice sits in: Bob and Carol can still meet it.
        let two = round_approval(
            &app(),
            &tenant(),
            &request("production", 1001),
            "d-4",
            UNPOLICED,
            100,
        )
        .unwrap();
        assert_eq!(two.status, Status::Pending);
    }

    /// Review of v5, finding 9 (docs/GITHUB.md): a sender `users` does not map leaves no requester, so
    /// separation of duties cannot hold: the round is answered `rejected` naming the sender,
    /// unless the environment allows unmapped senders, which opens it as `github:{login}` and
    /// says so in its summary.
    #[test]
    fn an_unmapped_sender_is_refused_unless_the_environment_allows_it() {
        let refused = round_approval(
            &app(),
            &tenant(),
            &request("production", 4242),
            "d-5",
            UNPOLICED,
            100,
        )
        .unwrap();
        assert_eq!(refused.status, Status::Rejected);
        let why = refused.decision.as_ref().unwrap().comment.clone().unwrap();
        assert!(
            why.contains("octocat") && why.contains("4242") && why.contains("unmapped_senders"),
            "{why}"
        );
        let allowed = round_approval(
            &app(),
            &tenant(),
            &request("nightly", 4242),
            "d-6",
            UNPOLICED,
            100,
        )
        .unwrap();
        assert_eq!(allowed.status, Status::Pending);
        assert_eq!(
            allowed.requested_by.as_ref().unwrap().as_str(),
            "github:octocat"
        );
        assert!(
            allowed.context["summary"]
                .as_str()
                .unwrap()
                .ends_with("by unmapped GitHub sender octocat"),
            "{}",
            allowed.context["summary"]
        );
        assert_eq!(allowed.context["github"]["unmapped_sender"], true);
    }

    /// Review of v5, finding 9: GitHub's environment names are not case-sensitive.
    #[test]
    fn an_environment_is_found_in_any_case() {
        let approval = round_approval(
            &app(),
            &tenant(),
            &request("Production", 1002),
            "d-7",
            UNPOLICED,
            100,
        )
        .unwrap();
        assert_eq!(approval.status, Status::Pending);
        assert_eq!(approval.policy.as_ref().unwrap().rules[0].min_approvals, 2);
        let twice = json!({"acme": {
            "app_id": 1, "private_key": TEST_KEY, "webhook_secret": "s",
            "environments": {"Prod": {"approvers": ["a@acme"]}, "prod": {"approvers": ["b@acme"]}},
        }});
        let error = parse_github(&twice.to_string()).unwrap_err();
        assert!(error.contains("one environment"), "{error}");
    }
}
