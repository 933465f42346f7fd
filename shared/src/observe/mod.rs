//! What operators see: metrics in CloudWatch's Embedded Metric Format, and the trace context
//! carried from a create request to every call made for its approval.

pub mod metric;

pub use metric::{Dimension, Metric, Unit};
