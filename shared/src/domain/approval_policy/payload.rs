//! A create's JSON as Cedar values, value for value and never misread: strings, booleans,
//! integers as `Long`, other numbers as `decimal` when exactly representable (at most 4
//! fractional digits, within `decimal`'s range), arrays as sets, objects as records. What has
//! no Cedar value — `null`, a number that fits neither `Long` nor `decimal` — is left out, so a
//! policy that reads it errors (and so fails closed) rather than see a value that is not the
//! one sent. Built as Cedar's restricted expressions, not through Cedar's JSON form, in which
//! `{"__entity": …}` or `{"__extn": …}` would be read as an entity or an extension value.

use cedar_policy::RestrictedExpression;
use serde_json::Value;

/// `value` as a Cedar value, or `None` when it has none (see the module's notes).
pub fn to_cedar(value: &Value) -> Option<RestrictedExpression> {
    match value {
        Value::Null => None,
        Value::Bool(b) => Some(RestrictedExpression::new_bool(*b)),
        Value::String(s) => Some(RestrictedExpression::new_string(s.clone())),
        Value::Number(n) => match n.as_i64() {
            Some(long) => Some(RestrictedExpression::new_long(long)),
            None => decimal_text(&n.to_string()).map(RestrictedExpression::new_decimal),
        },
        Value::Array(items) => Some(RestrictedExpression::new_set(
            items.iter().filter_map(to_cedar),
        )),
        Value::Object(fields) => record(fields),
    }
}

/// An object as a record of the fields that have a Cedar value.
pub fn record(fields: &serde_json::Map<String, Value>) -> Option<RestrictedExpression> {
    // Keys are unique in a JSON object as parsed, so the record cannot refuse them.
    RestrictedExpression::new_record(
        fields
            .iter()
            .filter_map(|(k, v)| to_cedar(v).map(|v| (k.clone(), v))),
    )
    .ok()
}

/// The most a `decimal` holds: an i64 of ten-thousandths.
const DECIMAL_DIGITS: u32 = 4;

/// A JSON number's text (as serde_json writes it: `1.5`, `-0.25`, `1e-7`, `1.5e300`) as the text
/// of a Cedar `decimal` (`1.5`, `-0.25`), or `None` when it is not exactly one: more than 4
/// fractional digits, or beyond ±922337203685477.5807.
pub fn decimal_text(number: &str) -> Option<String> {
    let (negative, rest) = match number.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, number),
    };
    let (mantissa, exponent) = match rest.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i32>().ok()?),
        None => (rest, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if whole.is_empty() && fraction.is_empty()
        || !whole
            .bytes()
            .chain(fraction.bytes())
            .all(|b| b.is_ascii_digit())
    {
        return None;
    }
    // digits × 10^(exponent − fraction's length), as one string of digits and a scale.
    let digits: String = format!("{whole}{fraction}");
    let scale = i64::from(exponent) - fraction.len() as i64;
    let digits = digits.trim_start_matches('0');
    let (digits, scale) = {
        // Trailing zeros move into the scale: 1.50 is 15 × 10^-1.
        let trimmed = digits.trim_end_matches('0');
        let zeros = digits.len() - trimmed.len();
        (trimmed, scale + zeros as i64)
    };
    if digits.is_empty() {
        return Some("0.0".to_owned());
    }
    if scale < -i64::from(DECIMAL_DIGITS) || scale > 18 {
        return None;
    }
    // The value in ten-thousandths, which must fit an i64.
    let shift = (scale + i64::from(DECIMAL_DIGITS)) as u32;
    let units: i128 = digits
        .parse::<i128>()
        .ok()?
        .checked_mul(10i128.checked_pow(shift)?)?;
    let units = if negative { -units } else { units };
    let units = i64::try_from(units).ok()?;
    let magnitude = units.unsigned_abs();
    let sign = if units < 0 { "-" } else { "" };
    let whole = magnitude / 10u64.pow(DECIMAL_DIGITS);
    let fraction = magnitude % 10u64.pow(DECIMAL_DIGITS);
    let fraction = format!("{fraction:04}");
    let fraction = fraction.trim_end_matches('0');
    Some(format!(
        "{sign}{whole}.{}",
        if fraction.is_empty() { "0" } else { fraction }
    ))
}
