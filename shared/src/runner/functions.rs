//! The local stack's functions: one [`App`] each, as Lambda runs them — each with the
//! variables the template gives it and its own role's credentials (see [`super::roles`]) — so
//! that a route, a job or a sweep calls AWS exactly as its function does when deployed.

use std::collections::HashMap;
use std::sync::Arc;

use aws_config::SdkConfig;

use super::roles::LocalRoles;
use crate::{App, Clock, ConfigError, Function, config, observe};

/// The AWS clients of one function.
pub struct Clients {
    pub dynamodb: aws_sdk_dynamodb::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub secretsmanager: aws_sdk_secretsmanager::Client,
}

impl Clients {
    /// Plain clients of `sdk`.
    pub fn of(sdk: &SdkConfig) -> Self {
        Self {
            dynamodb: aws_sdk_dynamodb::Client::new(sdk),
            sqs: aws_sdk_sqs::Client::new(sdk),
            secretsmanager: aws_sdk_secretsmanager::Client::new(sdk),
        }
    }
}

/// Every function of the stack.
#[derive(Debug, Clone)]
pub struct Functions {
    apps: HashMap<Function, Arc<App>>,
    sdks: HashMap<Function, SdkConfig>,
    /// The roles, when the local AWS checks them.
    pub roles: Option<LocalRoles>,
}

impl Functions {
    /// Builds each function from `variables` (what the template gives it, when `roles` are
    /// known) and `sdk` (with its role's credentials, when known); `clients` makes its AWS
    /// clients from its SDK configuration (the tests add interceptors there).
    pub async fn build(
        variables: &HashMap<String, String>,
        roles: Option<LocalRoles>,
        sdk: &SdkConfig,
        clock: &Clock,
        sink: &observe::Sink,
        clients: impl Fn(&SdkConfig) -> Clients,
    ) -> Result<Self, ConfigError> {
        let mut apps = HashMap::new();
        let mut sdks = HashMap::new();
        for function in Function::ALL {
            let (own_variables, own_sdk) = match &roles {
                Some(roles) => (
                    roles.variables_for(function, variables),
                    roles.sdk_config(function, sdk),
                ),
                None => (variables.clone(), sdk.clone()),
            };
            let made = clients(&own_sdk);
            let (config, source) = config::secrets::load(own_variables, made.secretsmanager)
                .await
                .map_err(|e| e.for_function(function))?;
            let app = App::with_secret_source(
                config,
                source,
                made.dynamodb,
                made.sqs,
                clock.clone(),
                sink.clone(),
            );
            app.set_function(function);
            app.use_sdk(&own_sdk);
            apps.insert(function, app);
            sdks.insert(function, own_sdk);
        }
        Ok(Self { apps, sdks, roles })
    }

    /// The function's app.
    pub fn app(&self, function: Function) -> &Arc<App> {
        // `build` made one for every function.
        &self.apps[&function]
    }

    /// The function's SDK configuration (its role's credentials).
    pub fn sdk(&self, function: Function) -> &SdkConfig {
        &self.sdks[&function]
    }

    /// Checks that each function hosted here has what it needs (as a Lambda's start does).
    pub fn check(&self, functions: &[Function]) -> Result<(), ConfigError> {
        for function in functions {
            let config = &self.app(*function).config;
            config.check_for(*function)?;
            for warning in config.start_warnings(*function) {
                tracing::warn!("{warning}");
            }
        }
        Ok(())
    }
}
