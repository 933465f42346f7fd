//! `countersign policy test`: a set evaluated offline on one create, as an enforcing
//! deployment would decide it — the unit test of a policy repository (docs/POLICY.md). Exit 0
//! for allow or auto, 3 for forbid, 4 for error.

use std::collections::BTreeMap;

use countersign::domain::approval_policy::{
    ActivePolicy, AskRequest, GovernRefusal, Governance, GroupName, Groups, Mode, PolicySet, govern,
};
use countersign::domain::{
    Approver, CreateRefusal, CreateRequest, FieldError, Policy, PolicyRefusal,
};
use serde_json::{Value, json};

use super::args::TestArgs;
use super::read;
use crate::CliError;
use crate::progress::stdout_line;

pub const EXIT_FORBID: u8 = 3;
pub const EXIT_ERROR: u8 = 4;

pub fn run(args: &TestArgs) -> Result<u8, CliError> {
    let text = read(&args.file)?;
    let groups = parse_groups(&read(&args.groups)?)?;
    let principal = Approver::parse(args.principal.trim())
        .map_err(|e| CliError::Usage(format!("--principal: {e}")))?;
    let body: Value = serde_json::from_str(&read(&args.request)?)
        .map_err(|e| CliError::Usage(format!("--request: not JSON: {e}")))?;
    let request = CreateRequest::parse(&body, |_| true).map_err(|refusal| {
        let problems = match refusal {
            CreateRefusal::Invalid(invalid) => fields(&invalid),
            CreateRefusal::UnknownActionType(action) => format!("unknown action type {action:?}"),
        };
        CliError::Usage(format!("--request: not a create's body: {problems}"))
    })?;
    if !matches!(args.channel.as_str(), "api" | "github") {
        return Err(CliError::Usage("--channel: api or github".to_owned()));
    }
    let schema = args.schema.as_ref().map(read).transpose()?;
    let set = match PolicySet::parse(&text, schema.as_deref()) {
        Ok(set) => set,
        Err(error) => return Ok(print(&errored(vec![(String::new(), error.to_string())]))),
    };
    let requested = match request
        .policy
        .as_ref()
        .map(|p| Policy::parse(p, &request.approvers, &principal))
        .transpose()
    {
        Ok(policy) => policy,
        Err(refusal) => {
            return Err(CliError::Usage(format!(
                "--request: its policy is refused: {}",
                fields(match &refusal {
                    PolicyRefusal::Invalid(f) | PolicyRefusal::Unsatisfiable(f) => f,
                })
            )));
        }
    };
    let active = ActivePolicy {
        version: 0,
        sha256: String::new(),
        mode: Mode::Enforce,
        set: Ok(set),
    };
    let summary = request
        .context
        .get("summary")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let ask = AskRequest {
        tenant: args.tenant.trim(),
        requester: principal.as_str(),
        roles: args.roles.iter().map(|r| r.trim()).collect(),
        action_type: &request.action_type,
        payload: &request.payload,
        summary,
        approvers: request.approvers.iter().map(Approver::as_str).collect(),
        channel: &args.channel,
        resume: request.resume.as_ref().map_or("", |r| r.kind.as_str()),
        expires_in_seconds: request.expires_in_seconds,
    };
    let decided = govern(
        Some(&active),
        &groups,
        &ask,
        &principal,
        (&request.approvers, requested.as_ref()),
    );
    let answer = match decided {
        Ok(Governance::Auto { source }) => {
            json!({"decision": "auto", "policies": source.policies, "rules": [], "errors": []})
        }
        Ok(Governance::Required { policy, source, .. }) => json!({
            "decision": "allow",
            "policies": source.policies,
            "rules": policy.rules.iter().map(|r| json!({
                "group": r.group.as_ref().map(GroupName::as_str),
                "name": r.name,
                "min_approvals": r.min_approvals,
                "approvers": r.approvers,
            })).collect::<Vec<_>>(),
            "errors": [],
        }),
        Ok(Governance::Unpoliced | Governance::Logged { .. }) => {
            errored(vec![(String::new(), "not evaluated".to_owned())])
        }
        Err(GovernRefusal::Forbidden { policies }) => {
            json!({"decision": "forbid", "policies": policies, "rules": [], "errors": []})
        }
        Err(GovernRefusal::Error { errors }) => errored(errors),
        Err(GovernRefusal::Unsatisfiable(errors) | GovernRefusal::Invalid(errors)) => errored(
            errors
                .into_iter()
                .map(|e| (String::new(), format!("{}: {}", e.field, e.message)))
                .collect(),
        ),
    };
    Ok(print(&answer))
}

fn errored(errors: Vec<(String, String)>) -> Value {
    json!({
        "decision": "error",
        "policies": errors.iter().map(|(id, _)| id).filter(|id| !id.is_empty()).collect::<Vec<_>>(),
        "rules": [],
        "errors": errors.iter().map(|(policy, message)| json!({"policy": policy, "message": message})).collect::<Vec<_>>(),
    })
}

/// Prints the decision; its exit code.
fn print(answer: &Value) -> u8 {
    stdout_line(&answer.to_string());
    match answer["decision"].as_str() {
        Some("allow" | "auto") => 0,
        Some("forbid") => EXIT_FORBID,
        _ => EXIT_ERROR,
    }
}

/// `{"<group>": ["<identity>", …]}`, each group and member checked as `groups set` checks it.
fn parse_groups(raw: &str) -> Result<Groups, CliError> {
    let usage = |why: String| CliError::Usage(format!("--groups: {why}"));
    let value: BTreeMap<String, Vec<String>> = serde_json::from_str(raw)
        .map_err(|e| usage(format!("{{\"<group>\": [\"<identity>\", …]}}: {e}")))?;
    let mut groups = BTreeMap::new();
    for (name, members) in value {
        let group = GroupName::parse(&name).map_err(|e| usage(format!("{name}: {e}")))?;
        let members = Groups::members(&members).map_err(|e| usage(format!("{name}: {e}")))?;
        groups.insert(group, members);
    }
    Ok(Groups::new(groups))
}

/// Every field's problem on one line.
fn fields(fields: &[FieldError]) -> String {
    fields
        .iter()
        .map(|f| format!("{}: {}", f.field, f.message))
        .collect::<Vec<_>>()
        .join("; ")
}
