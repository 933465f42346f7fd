//! Each function's role in the local stack. On Lambda a function calls AWS with its role's
//! credentials and gets only the environment variables the template gives it; the local stack
//! does the same: the local AWS (moto behind `infra/local_iam`) reads the roles from
//! `infra/template.yaml`, resolved against this stack's tables, queue, secrets and parameter
//! values, and hands out credentials for each function. A call a role does not allow is refused
//! there with AWS's `AccessDeniedException`.
//!
//! An endpoint that is not the local stack's moto (DynamoDB Local, an account) checks what it
//! checks: [`LocalRoles::register`] answers `None` and every function uses the caller's
//! credentials.

use std::collections::{BTreeSet, HashMap};

use aws_config::SdkConfig;
use aws_sdk_dynamodb::config::{Credentials, SharedCredentialsProvider};
use serde::Deserialize;

use crate::Function;

/// Where the local AWS registers a stack's roles.
const STACKS_PATH: &str = "/_countersign/iam/stacks";

#[derive(Debug, Clone, Deserialize)]
struct FunctionRole {
    access_key_id: String,
    secret_access_key: String,
    session_token: String,
    /// The role's name, for messages.
    role: String,
    /// The variables the template gives the function.
    variables: BTreeSet<String>,
}

#[derive(Debug, Deserialize)]
struct Registered {
    enforced: bool,
    functions: HashMap<String, FunctionRole>,
}

/// How a local stack is deployed, beyond what its variables name.
#[derive(Debug, Clone, Copy, Default)]
pub struct Deployment<'a> {
    /// The template's parameter values where they are not its defaults
    /// (e.g. `ApprovalsIndexesStep`).
    pub parameters: &'a [(&'a str, &'a str)],
    /// Grants withheld, each `[role, action, resource]` as the template writes them (e.g.
    /// `["CreateRole", "dynamodb:Query", "EventsTable.Arn"]`): a test of what a missing grant
    /// does.
    pub without: &'a [[&'a str; 3]],
}

/// The functions' roles in one local stack.
#[derive(Debug, Clone)]
pub struct LocalRoles {
    /// False when the local AWS was started with `MOTO_IAM=off`.
    pub enforced: bool,
    functions: HashMap<Function, FunctionRole>,
    /// Every variable the template gives some function (and so withholds from the others).
    template_variables: BTreeSet<String>,
}

impl LocalRoles {
    /// Registers a stack named `name` (its resources are what `variables` name) with the local
    /// AWS at `endpoint`. `None` when the endpoint is not the local stack's moto.
    pub async fn register(
        endpoint: &str,
        name: &str,
        region: &str,
        variables: &HashMap<String, String>,
        deployment: Deployment<'_>,
    ) -> Result<Option<Self>, String> {
        let mut given: HashMap<&str, &str> = deployment.parameters.iter().copied().collect();
        // The template's ApiKeys parameter is a secret; only whether it is set matters here.
        if !given.contains_key("ApiKeys")
            && ["API_KEYS", "API_KEYS_SECRET_ARN"]
                .iter()
                .any(|v| variables.get(*v).is_some_and(|s| !s.trim().is_empty()))
        {
            given.insert("ApiKeys", "(set)");
        }
        // So are NotifierUrl (optional: a Slack- or GitHub-only deployment has none) and Oidc
        // (optional: without it, review links are bearer credentials).
        for (parameter, variable) in [("NotifierUrl", "NOTIFIER_URL"), ("Oidc", "OIDC")] {
            let arn = format!("{variable}_SECRET_ARN");
            if !given.contains_key(parameter)
                && [variable, arn.as_str()]
                    .iter()
                    .any(|v| variables.get(*v).is_some_and(|s| !s.trim().is_empty()))
            {
                given.insert(parameter, "(set)");
            }
        }
        // The From addresses the executor may send with are its grant's condition.
        if let Some(senders) = variables
            .get("EMAIL_SENDERS")
            .filter(|s| !s.trim().is_empty())
            && !given.contains_key("EmailSenders")
        {
            given.insert("EmailSenders", senders.as_str());
        }
        // Only what names a resource (a table, the queue, a secret's or a key's ARN): never a secret's
        // value, whatever the endpoint turns out to be.
        let resources: HashMap<&str, &str> = variables
            .iter()
            .filter(|(name, _)| {
                name.ends_with("_TABLE")
                    || name.ends_with("_SECRET_ARN")
                    || *name == "JOBS_QUEUE_URL"
                    || *name == "CERTIFICATE_KEY_ARN"
            })
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .collect();
        let url = format!("{}{STACKS_PATH}", endpoint.trim_end_matches('/'));
        let answer = reqwest::Client::new()
            .post(&url)
            .json(&serde_json::json!({
                "name": name,
                "region": region,
                "variables": resources,
                "parameters": given,
                "without": deployment.without,
            }))
            .send()
            .await
            .map_err(|e| format!("registering the stack's roles at {url}: {e}"))?;
        // Another endpoint (an account, another emulator) refuses a request it does not know.
        if answer.status().is_client_error() {
            return Ok(None);
        }
        if !answer.status().is_success() {
            return Err(format!(
                "registering the stack's roles at {url}: {}",
                answer.status()
            ));
        }
        let Ok(registered) = answer.json::<Registered>().await else {
            return Ok(None);
        };
        let mut functions = HashMap::new();
        for function in Function::ALL {
            let role = registered
                .functions
                .get(function.as_str())
                .ok_or_else(|| format!("the template has no role for the {function:?} function"))?;
            functions.insert(function, role.clone());
        }
        let template_variables = functions
            .values()
            .flat_map(|r| r.variables.iter().cloned())
            .collect();
        Ok(Some(Self {
            enforced: registered.enforced,
            functions,
            template_variables,
        }))
    }

    fn role(&self, function: Function) -> &FunctionRole {
        // `register` found a role for every function.
        &self.functions[&function]
    }

    /// The role's name (`<stack>-<logical id>`).
    pub fn role_name(&self, function: Function) -> &str {
        &self.role(function).role
    }

    /// `sdk` with `function`'s credentials.
    pub fn sdk_config(&self, function: Function, sdk: &SdkConfig) -> SdkConfig {
        let role = self.role(function);
        let credentials = Credentials::new(
            &role.access_key_id,
            &role.secret_access_key,
            Some(role.session_token.clone()),
            None,
            "countersign-local-role",
        );
        sdk.to_builder()
            .credentials_provider(SharedCredentialsProvider::new(credentials))
            .build()
    }

    /// What `function` sees of `variables`: a variable the template gives to some function
    /// (as itself or as its `<NAME>_SECRET_ARN`) only if it gives it to this one; any other
    /// (a local setting: periods, failpoints) as it is.
    pub fn variables_for(
        &self,
        function: Function,
        variables: &HashMap<String, String>,
    ) -> HashMap<String, String> {
        let own = &self.role(function).variables;
        let secret = |name: &str| format!("{name}_SECRET_ARN");
        variables
            .iter()
            .filter(|(name, _)| {
                let managed = self.template_variables.contains(name.as_str())
                    || self.template_variables.contains(&secret(name));
                !managed || own.contains(name.as_str()) || own.contains(&secret(name))
            })
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect()
    }
}
