//! Structured logs: one JSON object per line, which CloudWatch Logs Insights can query. The
//! fields of the spans a line is written in (a request, a job: `approval_id`, `tenant`,
//! `trace_id`, …) are at the line's top level beside its own, so every line about an approval
//! is found by the same `filter approval_id = …`.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::{
    FmtContext, FormatEvent, FormatFields, FormattedFields, MakeWriter, SubscriberBuilder,
};
use tracing_subscriber::registry::LookupSpan;

/// What is written when `RUST_LOG` says nothing (the template sets it from its `LogLevel`):
/// one line per API request and whatever needs attention; a job's routine progress is `debug`
/// (the trail records it).
pub const DEFAULT_FILTER: &str = "info,aws_config=warn,aws_smithy_runtime=warn";

fn builder<W>(writer: W, filter: EnvFilter) -> SubscriberBuilder<JsonFields, FlatJson, EnvFilter, W>
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .with_ansi(false)
        .fmt_fields(JsonFields::new())
        .event_format(FlatJson)
        .with_env_filter(filter)
        .with_writer(writer)
}

/// The filter of a log level (`LOG_LEVEL`: error, warn, info or debug): that level for
/// Countersign and what it uses, the AWS SDK's own chatter from `warn`.
pub fn filter_for(level: &str) -> String {
    format!("{level},aws_config=warn,aws_smithy_runtime=warn")
}

/// A log configuration the functions refuse to start with, rather than log at a level
/// nobody asked for; shaped like a configuration error (the variable, what is wrong).
#[derive(Debug, thiserror::Error)]
#[error("{variable} {problem}")]
pub struct LogConfigError {
    pub variable: &'static str,
    pub problem: String,
}

/// A variable's value, unless it is blank (a blank variable is one not set).
fn set(value: Option<&str>) -> Option<&str> {
    value.map(str::trim).filter(|v| !v.is_empty())
}

/// The filter of `RUST_LOG` if set, else of `LOG_LEVEL` (the template's `LogLevel`), else
/// [`DEFAULT_FILTER`]; a blank variable is one not set.
pub fn filter_from(
    rust_log: Option<&str>,
    log_level: Option<&str>,
) -> Result<EnvFilter, LogConfigError> {
    if let Some(directives) = set(rust_log) {
        return EnvFilter::try_new(directives).map_err(|e| LogConfigError {
            variable: "RUST_LOG",
            problem: format!("is not a tracing filter: {e}"),
        });
    }
    match set(log_level) {
        None => Ok(EnvFilter::new(DEFAULT_FILTER)),
        Some(level @ ("error" | "warn" | "info" | "debug")) => {
            Ok(EnvFilter::new(filter_for(level)))
        }
        Some(other) => Err(LogConfigError {
            variable: "LOG_LEVEL",
            problem: format!("must be error, warn, info or debug, not {other:?}"),
        }),
    }
}

/// Installs the JSON log subscriber at [`filter_from`] the environment's `RUST_LOG` and
/// `LOG_LEVEL`. Safe to call twice.
pub fn init() -> Result<(), LogConfigError> {
    let filter = filter_from(
        std::env::var("RUST_LOG").ok().as_deref(),
        std::env::var("LOG_LEVEL").ok().as_deref(),
    )?;
    let _ = builder(std::io::stdout, filter).try_init();
    Ok(())
}

/// The same lines, written to `writer` at `filter` (an `EnvFilter` directive): what the cost
/// test counts.
pub fn subscriber<W>(writer: W, filter: &str) -> impl Subscriber + Send + Sync + 'static
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    builder(writer, EnvFilter::new(filter)).finish()
}

/// One JSON object per event: `timestamp`, `level`, the fields of its spans (outermost first,
/// an inner span's field replacing an outer one's), then its own fields (`message` among them).
struct FlatJson;

impl<S, N> FormatEvent<S, N> for FlatJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut line = Map::new();
        let now = time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        line.insert("timestamp".into(), now.into());
        line.insert("level".into(), event.metadata().level().as_str().into());
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let extensions = span.extensions();
                let Some(fields) = extensions.get::<FormattedFields<N>>() else {
                    continue;
                };
                if let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(fields) {
                    line.extend(fields);
                }
            }
        }
        event.record(&mut Fields(&mut line));
        writeln!(writer, "{}", Value::Object(line))
    }
}

/// An event's fields, as JSON values.
struct Fields<'a>(&'a mut Map<String, Value>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().into(), format!("{value:?}").into());
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use super::*;

    #[test]
    fn a_log_level_nobody_can_mean_stops_the_start() {
        let shown = |f: Result<EnvFilter, LogConfigError>| f.map(|f| f.to_string());
        assert_eq!(
            shown(filter_from(None, None)).unwrap(),
            EnvFilter::new(DEFAULT_FILTER).to_string()
        );
        assert_eq!(
            shown(filter_from(Some(" "), Some(""))).unwrap(),
            EnvFilter::new(DEFAULT_FILTER).to_string(),
            "blank is not set"
        );
        assert_eq!(
            shown(filter_from(None, Some("debug"))).unwrap(),
            EnvFilter::new(filter_for("debug")).to_string()
        );
        assert_eq!(
            shown(filter_from(Some("countersign=trace"), Some("nonsense"))).unwrap(),
            "countersign=trace",
            "RUST_LOG wins"
        );
        for level in ["DEBUG", "trace", "verbose"] {
            let error = filter_from(None, Some(level)).unwrap_err().to_string();
            assert!(error.starts_with("LOG_LEVEL must be"), "{error}");
            assert!(error.contains(level), "{error}");
        }
        let error = filter_from(Some("info,[unclosed"), None).unwrap_err();
        assert!(error.to_string().starts_with("RUST_LOG"), "{error}");
    }

    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lines").extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_line_carries_its_spans_fields_at_its_top_level() {
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .fmt_fields(JsonFields::new())
            .event_format(FlatJson)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let outer = tracing::info_span!(
                "request",
                tenant = "acme",
                approval_id = tracing::field::Empty
            );
            let _outer = outer.enter();
            outer.record("approval_id", "apr_1");
            let inner = tracing::info_span!("job", trace_id = "4bf9", tenant = "acme-2");
            let _inner = inner.enter();
            tracing::info!(attempt = 2, ok = true, "job attempt completed");
        });
        let text = String::from_utf8(lines.0.lock().expect("lines").clone()).expect("utf-8");
        let line: Value = serde_json::from_str(text.trim()).expect("one JSON line");
        assert_eq!(line["level"], "INFO");
        assert_eq!(line["message"], "job attempt completed");
        assert_eq!(line["approval_id"], "apr_1");
        assert_eq!(line["tenant"], "acme-2", "the inner span's field wins");
        assert_eq!(line["trace_id"], "4bf9");
        assert_eq!(line["attempt"], 2);
        assert_eq!(line["ok"], true);
        assert!(line["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')));
    }
}
