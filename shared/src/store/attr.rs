//! Attribute values in and out: the small conversions every item codec and write uses.

use std::collections::HashMap;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;

use super::error::StoreError;
use crate::domain::EpochSeconds;

pub(crate) type Item = HashMap<String, AttributeValue>;

pub(crate) fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

pub(crate) fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

pub(crate) fn get_s<'a>(item: &'a Item, name: &'static str) -> Result<&'a str, StoreError> {
    match item.get(name) {
        Some(AttributeValue::S(v)) => Ok(v),
        _ => Err(StoreError::corrupt(name)),
    }
}

pub(crate) fn opt_s(item: &Item, name: &str) -> Option<String> {
    match item.get(name) {
        Some(AttributeValue::S(v)) => Some(v.clone()),
        _ => None,
    }
}

pub(crate) fn get_n<T: std::str::FromStr>(
    item: &Item,
    name: &'static str,
) -> Result<T, StoreError> {
    match item.get(name) {
        Some(AttributeValue::N(v)) => v.parse().map_err(|_| StoreError::corrupt(name)),
        _ => Err(StoreError::corrupt(name)),
    }
}

pub(crate) fn get_b<'a>(item: &'a Item, name: &'static str) -> Result<&'a [u8], StoreError> {
    match item.get(name) {
        Some(AttributeValue::B(v)) => Ok(v.as_ref()),
        _ => Err(StoreError::corrupt(name)),
    }
}

pub(crate) fn b(bytes: &[u8]) -> AttributeValue {
    AttributeValue::B(Blob::new(bytes))
}

/// Epoch seconds, for the conditions that compare times.
pub(crate) fn epoch(at: EpochSeconds) -> AttributeValue {
    n(at)
}
