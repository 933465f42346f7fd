//! Structured logs: one JSON object per line, which CloudWatch Logs Insights can query.

use tracing_subscriber::EnvFilter;

/// Installs the JSON log subscriber (`RUST_LOG` overrides the level). Safe to call twice.
pub fn init() {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,aws_config=warn,aws_smithy_runtime=warn"));
    let _ = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false)
        .with_target(false)
        .with_ansi(false)
        .with_env_filter(filter)
        .try_init();
}
