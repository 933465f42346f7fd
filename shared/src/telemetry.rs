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

/// Installs the JSON log subscriber: at `RUST_LOG` if set, else at `LOG_LEVEL` (the template's
/// `LogLevel`), else [`DEFAULT_FILTER`]. Safe to call twice.
pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        match std::env::var("LOG_LEVEL").ok().as_deref() {
            Some(level @ ("error" | "warn" | "info" | "debug")) => {
                EnvFilter::new(filter_for(level))
            }
            _ => EnvFilter::new(DEFAULT_FILTER),
        }
    });
    let _ = builder(std::io::stdout, filter).try_init();
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
