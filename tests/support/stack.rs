//! A test's stack as deployed: the deployer's app and each function's own (its variables, its
//! role's credentials from the local AWS), the real router on a loopback port.

use std::collections::HashMap;
use std::sync::Arc;

use countersign::runner::{Deployment, Functions, LocalRoles};
use countersign::store::Tables;
use countersign::{App, Clock, Function};

use crate::{
    ACME_SECRET, CallCounter, MetricLines, OTHER_SECRET, ROTATING_NEW_SECRET, ROTATING_OLD_SECRET,
    RequestLog, TENANT_A, TENANT_B, TOKEN_SECRET, TestApp, aws_endpoint, meter, sdk_config,
    test_api_keys,
};

impl TestApp {
    /// The test's stack: the deployer's app ([`TestApp::app`], the test's own view) and each
    /// function as deployed ([`TestApp::functions`]: the variables the template gives it, its
    /// role's credentials), deployed as `deployment` says.
    pub async fn build_deployed(
        overrides: &[(&str, &str)],
        via: Option<aws_config::SdkConfig>,
        secrets: &[(&str, &str)],
        deployment: Deployment<'_>,
    ) -> Self {
        let direct = sdk_config().await;
        let sdk = via.unwrap_or_else(|| direct.clone());
        // Bound first: a value may name the app's own address (`{base}`, e.g. PUBLIC_BASE_URL
        // for sign-in's redirect URI).
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let prefix = format!("t-{}", ulid::Ulid::new().to_string().to_lowercase());
        let secret_calls = CallCounter::default();
        let tables = Tables::with_prefix(&prefix);
        let mut vars: HashMap<String, String> = HashMap::from([
            ("API_KEYS".into(), test_api_keys()),
            (
                "ACTION_TARGETS".into(),
                r#"{"deploy": {"url": "http://127.0.0.1:9/deploy"}, "refund": {"url": "http://127.0.0.1:9/refund"}, "agent": {"executes": false}}"#.into(),
            ),
            (
                "WEBHOOK_SOURCES".into(),
                serde_json::json!({
                    "acme": {"tenant": TENANT_A, "secrets": [ACME_SECRET]},
                    "rotating": {"tenant": TENANT_A, "secrets": [ROTATING_NEW_SECRET, ROTATING_OLD_SECRET]},
                    "other": {"tenant": TENANT_B, "secrets": [OTHER_SECRET]},
                })
                .to_string(),
            ),
            ("DECISION_TOKEN_SECRET".into(), TOKEN_SECRET.into()),
        ]);
        for (variable, table) in tables.variables() {
            vars.insert(variable.to_owned(), table.to_owned());
        }
        // The stack's certificate key, as the template creates one.
        if !overrides.iter().any(|(k, _)| *k == "CERTIFICATE_KEY_ARN") {
            let key = countersign::runner::create_certificate_key(&direct)
                .await
                .expect("the stack's certificate key");
            vars.insert("CERTIFICATE_KEY_ARN".into(), key);
        }
        for (k, v) in overrides {
            // `{localhost}`: the same address by name (a WebAuthn relying party is a domain).
            let by_name = base.replace("127.0.0.1", "localhost");
            vars.insert(
                (*k).to_owned(),
                v.replace("{localhost}", &by_name).replace("{base}", &base),
            );
        }
        let mut secret_arns = HashMap::new();
        let uncounted = aws_sdk_secretsmanager::Client::new(&direct);
        for (variable, value) in secrets {
            let created = uncounted
                .create_secret()
                .name(format!("{prefix}/{}", variable.to_lowercase()))
                .secret_string(*value)
                .send()
                .await
                .expect("create the test secret");
            let arn = created.arn().expect("the secret's ARN").to_owned();
            vars.remove(*variable);
            vars.insert(format!("{variable}_SECRET_ARN"), arn.clone());
            secret_arns.insert((*variable).to_owned(), arn);
        }
        let calls = CallCounter::default();
        let meter = meter::Meter::default();
        let clock = Clock::system();
        let metrics = MetricLines::default();
        let sink = countersign::observe::Sink::Memory(metrics.0.clone());
        // Each client counts and meters its calls; the functions' Secrets Manager calls (their
        // starts' reads included) are counted in `secret_calls`.
        let clients = |sdk: &aws_config::SdkConfig, secrets_counted: bool| {
            let secretsmanager = aws_sdk_secretsmanager::config::Builder::from(sdk);
            let secretsmanager = if secrets_counted {
                secretsmanager.interceptor(secret_calls.clone())
            } else {
                secretsmanager
            };
            countersign::runner::Clients {
                dynamodb: aws_sdk_dynamodb::Client::from_conf(
                    aws_sdk_dynamodb::config::Builder::from(sdk)
                        .interceptor(calls.clone())
                        .interceptor(meter.clone())
                        .build(),
                ),
                sqs: aws_sdk_sqs::Client::from_conf(
                    aws_sdk_sqs::config::Builder::from(sdk)
                        .interceptor(meter.clone())
                        .build(),
                ),
                secretsmanager: aws_sdk_secretsmanager::Client::from_conf(secretsmanager.build()),
            }
        };
        // The deployer's view of the stack: every variable, every table.
        let deployer = clients(&sdk, false);
        let (config, secret_source) =
            countersign::config::secrets::load(vars.clone(), deployer.secretsmanager)
                .await
                .expect("test configuration");
        // The senders of EMAIL, verified on the local SES as a deployer verifies them.
        countersign::runner::verify_senders(&direct, &config.email)
            .await
            .expect("verify the test's email senders");
        let app = App::with_secret_source(
            config,
            secret_source,
            deployer.dynamodb,
            deployer.sqs,
            clock.clone(),
            sink.clone(),
        );
        let roles = match aws_endpoint() {
            Some(endpoint) => {
                LocalRoles::register(&endpoint, &prefix, "us-east-1", &vars, deployment)
                    .await
                    .expect("register the test stack's roles")
            }
            None => None,
        };
        let functions =
            Functions::build(&vars, roles, &sdk, &clock, &sink, |sdk| clients(sdk, true))
                .await
                .expect("each function's configuration");

        let requests = RequestLog::default();
        let log = requests.clone();
        let router = countersign::http::local_router(|f| functions.app(f).clone()).layer(
            axum::middleware::from_fn(
                move |request: axum::extract::Request, next: axum::middleware::Next| {
                    log.record(request.method().as_str(), request.uri().path());
                    next.run(request)
                },
            ),
        );
        tokio::spawn(async move { axum::serve(listener, router).await });

        Self {
            base,
            http: reqwest::Client::new(),
            app,
            functions,
            calls,
            meter,
            dynamodb: aws_sdk_dynamodb::Client::new(&direct),
            clock,
            sdk,
            jobs: None,
            requests,
            metrics,
            secret_calls,
            secret_arns,
        }
    }

    /// The app of `function`, as deployed (its role, its variables): what a job, a sweep or a
    /// route of that function runs on.
    pub fn function(&self, function: Function) -> Arc<App> {
        self.functions.app(function).clone()
    }

    /// An executor as the stack's executor function runs (its role, its variables, its AWS
    /// configuration for the workflows' calls).
    pub fn executor(&self) -> countersign::jobs::Executor {
        countersign::jobs::Executor::new(
            self.function(Function::Executor),
            self.functions.sdk(Function::Executor),
        )
        .expect("the executor's configuration")
    }
}
