//! Every AWS request the app makes (DynamoDB and SQS), with its operation and its request and
//! response bodies, recorded while the meter is on: what `tests/api/cost.rs` prices. An SDK
//! interceptor, so it sees exactly what goes on the wire (retries included).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::{
    AfterDeserializationInterceptorContextRef, BeforeTransmitInterceptorContextRef,
};
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::{ConfigBag, Storable, StoreReplace};
use serde_json::Value;

/// One attempt of one AWS request.
#[derive(Debug, Clone)]
pub struct AwsCall {
    /// `dynamodb` or `sqs`.
    pub service: String,
    pub operation: String,
    pub request: Value,
    /// The request body's length in bytes.
    pub request_bytes: usize,
    pub status: u16,
    pub response: Value,
    pub response_bytes: usize,
}

impl AwsCall {
    pub fn succeeded(&self) -> bool {
        self.status == 200
    }
}

/// The request of the attempt in flight, kept in the attempt's config bag until its answer.
#[derive(Debug, Clone)]
struct Sent(String, Vec<u8>);

impl Storable for Sent {
    type Storer = StoreReplace<Self>;
}

#[derive(Debug, Clone, Default)]
pub struct Meter {
    on: Arc<AtomicBool>,
    calls: Arc<Mutex<Vec<AwsCall>>>,
}

impl Meter {
    /// Records from now on.
    pub fn start(&self) {
        self.on.store(true, Ordering::SeqCst);
    }

    /// How many calls were recorded since the last take.
    pub fn count(&self) -> usize {
        self.calls.lock().expect("meter lock").len()
    }

    /// The calls recorded since the last take, in the order their answers came.
    pub fn take(&self) -> Vec<AwsCall> {
        std::mem::take(&mut *self.calls.lock().expect("meter lock"))
    }
}

fn json(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or(Value::Null)
}

impl Intercept for Meter {
    fn name(&self) -> &'static str {
        "Meter"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if self.on.load(Ordering::SeqCst) {
            let service = cfg
                .load::<Metadata>()
                .map_or("", |m| m.service())
                .to_owned();
            let body = context
                .request()
                .body()
                .bytes()
                .unwrap_or_default()
                .to_vec();
            cfg.interceptor_state().store_put(Sent(service, body));
        }
        Ok(())
    }

    fn read_after_deserialization(
        &self,
        context: &AfterDeserializationInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(Sent(service, request)) = cfg.load::<Sent>().cloned() else {
            return Ok(());
        };
        let operation = cfg.load::<Metadata>().map_or("", |m| m.name()).to_owned();
        let response = context.response();
        let body = response.body().bytes().unwrap_or_default();
        let call = AwsCall {
            service: service.to_lowercase(),
            operation,
            request_bytes: request.len(),
            request: json(&request),
            status: response.status().as_u16(),
            response_bytes: body.len(),
            response: json(body),
        };
        self.calls.lock().expect("meter lock").push(call);
        Ok(())
    }
}

/// Counts DynamoDB round trips (every attempt, retries included) by operation name.
#[derive(Debug, Clone, Default)]
pub struct CallCounter(Arc<Mutex<Vec<String>>>);

impl CallCounter {
    /// The operations since the last call, in order, and resets the count.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().expect("counter lock"))
    }
}

impl Intercept for CallCounter {
    fn name(&self) -> &'static str {
        "CallCounter"
    }

    fn read_before_attempt(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let operation = cfg
            .load::<Metadata>()
            .map_or("unknown", |m| m.name())
            .to_owned();
        self.0.lock().expect("counter lock").push(operation);
        Ok(())
    }
}
