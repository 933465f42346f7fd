//! What operators see: metrics in CloudWatch's Embedded Metric Format, and the trace context
//! carried from a create request to every call made for its approval.

pub mod emf;
pub mod metric;
pub mod trace;

pub use emf::{
    Emitter, MetricsConfig, Sink, count, count_for, count_n, for_tenant, milliseconds,
    milliseconds_for, set_function, set_tenant,
};
pub use metric::{Dimension, Metric, Unit};
pub use trace::TraceContext;
