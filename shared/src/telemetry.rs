//! Structured logs: one JSON object per line, which CloudWatch Logs Insights can query. A line
//! written while an approval is in hand carries its `approval_id`, `tenant` and `trace_id` under
//! `span` (the innermost span: a request, a job, a stream record, a swept item).

use tracing_subscriber::EnvFilter;

/// Installs the JSON log subscriber (`RUST_LOG` overrides the level). Safe to call twice.
pub fn init() {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,aws_config=warn,aws_smithy_runtime=warn"));
    let _ = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(true)
        .with_span_list(false)
        .with_target(false)
        .with_ansi(false)
        .with_env_filter(filter)
        .try_init();
}
