//! The trace an approval belongs to: taken from its create request's W3C `traceparent` (or the
//! X-Ray header AWS adds), kept on the approval as one small attribute, carried by dispatch into
//! each job, and sent on every call Countersign makes for it (the execute call, notifications,
//! callbacks) as a `traceparent` with the same trace id and a new parent span id.
//!
//! Parsing and formatting are OpenTelemetry's W3C propagator; no span is exported (Lambda's own
//! X-Ray segments cover the functions, with `Tracing: Active`).

use std::collections::HashMap;

use opentelemetry::Context;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use rand::Rng;

pub const TRACEPARENT: &str = "traceparent";
pub const XRAY_HEADER: &str = "x-amzn-trace-id";

/// A trace id and whether it is sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceContext {
    trace_id: TraceId,
    sampled: bool,
}

impl TraceContext {
    /// The trace of an incoming request: its `traceparent`, else its X-Ray header, else none.
    pub fn from_headers(traceparent: Option<&str>, xray: Option<&str>) -> Option<Self> {
        traceparent
            .and_then(Self::from_traceparent)
            .or_else(|| xray.and_then(Self::from_xray))
    }

    /// A W3C `traceparent`, by OpenTelemetry's propagator (which refuses malformed and all-zero
    /// ids), after the field lengths W3C requires: the propagator reads `00-` plus 31 hex digits
    /// as a trace id with a leading zero.
    pub fn from_traceparent(value: &str) -> Option<Self> {
        let lengths: Vec<usize> = value.trim().split('-').map(str::len).collect();
        if lengths.get(..4) != Some(&[2, 32, 16, 2][..]) {
            return None;
        }
        let carrier = HashMap::from([(TRACEPARENT.to_owned(), value.to_owned())]);
        let context = TraceContextPropagator::new().extract(&carrier);
        let span = context.span();
        let span = span.span_context();
        span.is_valid().then(|| Self {
            trace_id: span.trace_id(),
            sampled: span.is_sampled(),
        })
    }

    /// An X-Ray trace header (`Root=1-5759e988-bd862e3fe1be46a994272793;Parent=…;Sampled=1`): its
    /// root id's hex digits, without the version and the dash, are the W3C trace id.
    pub fn from_xray(value: &str) -> Option<Self> {
        let mut root = None;
        let mut sampled = false;
        for part in value.split(';') {
            match part.trim().split_once('=') {
                Some(("Root", id)) => root = Some(id),
                Some(("Sampled", flag)) => sampled = flag == "1",
                _ => {}
            }
        }
        let (time, unique) = root?.strip_prefix("1-")?.split_once('-')?;
        let hex = format!("{time}{unique}");
        if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let trace_id = TraceId::from_hex(&hex.to_ascii_lowercase()).ok()?;
        (trace_id != TraceId::INVALID).then_some(Self { trace_id, sampled })
    }

    /// A new trace, sampled.
    pub fn fresh() -> Self {
        let mut rng = rand::rng();
        loop {
            let trace_id = TraceId::from_bytes(rng.random());
            if trace_id != TraceId::INVALID {
                return Self {
                    trace_id,
                    sampled: true,
                };
            }
        }
    }

    /// The trace id of a stored trace, for a log line ("" for none).
    pub fn id_of_stored(stored: Option<&str>) -> String {
        stored
            .and_then(Self::from_stored)
            .map(|t| t.trace_id())
            .unwrap_or_default()
    }

    /// The trace id, 32 lowercase hex digits: what log lines carry as `trace_id`.
    pub fn trace_id(&self) -> String {
        self.trace_id.to_string()
    }

    /// As kept on the approval and in a job: `{trace id}-{flags}` (35 bytes).
    pub fn stored(&self) -> String {
        format!("{}-{:02x}", self.trace_id, self.flags().to_u8())
    }

    /// Reads [`TraceContext::stored`]; anything else is no trace.
    pub fn from_stored(value: &str) -> Option<Self> {
        let (trace, flags) = value.split_once('-')?;
        Self::from_traceparent(&format!("00-{trace}-0000000000000001-{flags}"))
    }

    /// As kept in a table: the trace id's 16 bytes and the flags' byte (17 bytes: an approval
    /// item is priced by the kilobyte, and near one).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = self.trace_id.to_bytes().to_vec();
        bytes.push(self.flags().to_u8());
        bytes
    }

    /// Reads [`TraceContext::to_bytes`]; anything else is no trace.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let (id, [flags]) = bytes.split_first_chunk::<16>()? else {
            return None;
        };
        let trace_id = TraceId::from_bytes(*id);
        (trace_id != TraceId::INVALID).then_some(Self {
            trace_id,
            sampled: flags & TraceFlags::SAMPLED.to_u8() != 0,
        })
    }

    /// A `traceparent` for one outgoing call: this trace, a new parent span id.
    pub fn traceparent(&self) -> String {
        let span_id = loop {
            let id = SpanId::from_bytes(rand::rng().random());
            if id != SpanId::INVALID {
                break id;
            }
        };
        let span = SpanContext::new(self.trace_id, span_id, self.flags(), true, TraceState::NONE);
        let context = Context::new().with_remote_span_context(span);
        let mut carrier = HashMap::new();
        TraceContextPropagator::new().inject_context(&context, &mut carrier);
        carrier.remove(TRACEPARENT).unwrap_or_default()
    }

    fn flags(&self) -> TraceFlags {
        if self.sampled {
            TraceFlags::SAMPLED
        } else {
            TraceFlags::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIVEN: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_traceparent_keeps_its_trace_id_and_each_call_gets_a_new_parent() {
        let trace = TraceContext::from_traceparent(GIVEN).expect("valid");
        assert_eq!(trace.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        let (first, second) = (trace.traceparent(), trace.traceparent());
        assert_eq!(first.len(), 55);
        assert!(first.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"));
        assert!(first.ends_with("-01"));
        assert_ne!(first[36..52], second[36..52], "a new span id per call");
        assert_ne!(&first[36..52], "00f067aa0ba902b7");
    }

    #[test]
    fn malformed_or_zero_traceparents_are_no_trace() {
        for bad in [
            "",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "zz",
        ] {
            assert_eq!(TraceContext::from_traceparent(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_xray_root_id_is_the_trace_id() {
        let trace = TraceContext::from_xray(
            "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
        )
        .expect("valid");
        assert_eq!(trace.trace_id(), "5759e988bd862e3fe1be46a994272793");
        assert!(trace.traceparent().ends_with("-01"));
        assert_eq!(TraceContext::from_xray("Root=2-1-2"), None);
        assert_eq!(TraceContext::from_xray("Self=1-5759e988-bd86"), None);
        // A traceparent wins over the X-Ray header.
        let both = TraceContext::from_headers(
            Some(GIVEN),
            Some("Root=1-5759e988-bd862e3fe1be46a994272793"),
        );
        assert_eq!(
            both.map(|t| t.trace_id()).as_deref(),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
    }

    #[test]
    fn stored_and_read_back_and_fresh_ones_are_valid() {
        let trace = TraceContext::from_traceparent(GIVEN).expect("valid");
        assert_eq!(trace.stored(), "4bf92f3577b34da6a3ce929d0e0e4736-01");
        assert_eq!(TraceContext::from_stored(&trace.stored()), Some(trace));
        assert_eq!(TraceContext::from_stored("nonsense"), None);
        assert_eq!(TraceContext::from_bytes(&trace.to_bytes()), Some(trace));
        assert_eq!(trace.to_bytes().len(), 17);
        assert_eq!(TraceContext::from_bytes(&[0; 17]), None);
        assert_eq!(TraceContext::from_bytes(&[1; 16]), None);
        let fresh = TraceContext::fresh();
        assert_eq!(
            TraceContext::from_traceparent(&fresh.traceparent()).map(|t| t.trace_id),
            Some(fresh.trace_id)
        );
    }
}
