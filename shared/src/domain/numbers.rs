//! Numbers are never changed silently. A request's JSON is parsed into doubles (or 64-bit
//! integers) and written out again — stored, fingerprinted, sent downstream — so a literal that
//! a double cannot hold (`9007199254740993.0`, `18446744073709551616`, `3.14159265358979323846`)
//! would reach the target as another number. Such literals are found in the raw body and
//! refused with their field; the form may change (`1e15` is written `1000000000000000.0`), the
//! value never does.

use serde_json::Value;

use super::FieldError;

/// A decimal number's value: sign, significant digits (no leading or trailing zeros) and the
/// power of ten of the last one. Zero is `(false, "", 0)`, whatever its sign or form.
#[derive(Debug, PartialEq, Eq)]
struct Decimal {
    negative: bool,
    digits: String,
    exponent: i64,
}

/// The value of a JSON number literal (already known to be valid JSON).
fn decimal(literal: &str) -> Option<Decimal> {
    let (negative, rest) = match literal.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, literal),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(at) => (&rest[..at], rest[at + 1..].parse::<i64>().ok()?),
        None => (rest, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all = format!("{whole}{fraction}");
    let exponent = exponent.checked_sub(i64::try_from(fraction.len()).ok()?)?;
    let trimmed_end = all.trim_end_matches('0');
    let exponent = exponent.checked_add(i64::try_from(all.len() - trimmed_end.len()).ok()?)?;
    let digits = trimmed_end.trim_start_matches('0').to_owned();
    if digits.is_empty() {
        return Some(Decimal {
            negative: false,
            digits,
            exponent: 0,
        });
    }
    Some(Decimal {
        negative,
        digits,
        exponent,
    })
}

/// Whether the number `literal` denotes is the one it will be written out as.
fn survives(literal: &str) -> bool {
    let Ok(Value::Number(parsed)) = serde_json::from_str::<Value>(literal) else {
        return false;
    };
    match (decimal(literal), decimal(&parsed.to_string())) {
        (Some(sent), Some(kept)) => sent == kept,
        _ => false,
    }
}

/// Where a number sits: `action.payload.amount`, `items[2]`.
#[derive(Debug)]
enum Frame {
    Object(Option<String>),
    Array(usize),
}

fn path(stack: &[Frame]) -> String {
    let mut path = String::new();
    for frame in stack {
        match frame {
            Frame::Object(Some(key)) => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
            }
            Frame::Object(None) => {}
            Frame::Array(i) => path.push_str(&format!("[{i}]")),
        }
    }
    path
}

/// Reads a JSON string starting after its opening quote; returns it and the index after its
/// closing quote.
fn string_at(raw: &[u8], mut i: usize) -> (String, usize) {
    let start = i;
    while i < raw.len() && raw[i] != b'"' {
        i += if raw[i] == b'\\' { 2 } else { 1 };
    }
    let text =
        serde_json::from_slice::<String>(&raw[start.saturating_sub(1)..=i.min(raw.len() - 1)])
            .unwrap_or_default();
    (text, i + 1)
}

/// Every number literal of `raw` (valid JSON) whose value a double cannot keep, with its field.
pub fn inexact_numbers(raw: &[u8]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut i = 0;
    while i < raw.len() {
        match raw[i] {
            b'{' => {
                stack.push(Frame::Object(None));
                i += 1;
            }
            b'[' => {
                stack.push(Frame::Array(0));
                i += 1;
            }
            b'}' | b']' => {
                stack.pop();
                i += 1;
            }
            b',' => {
                if let Some(Frame::Array(n)) = stack.last_mut() {
                    *n += 1;
                }
                i += 1;
            }
            b'"' => {
                let (text, next) = string_at(raw, i + 1);
                i = next;
                // A string directly followed by ':' is an object's key.
                let mut j = i;
                while j < raw.len() && raw[j].is_ascii_whitespace() {
                    j += 1;
                }
                if raw.get(j) == Some(&b':')
                    && let Some(Frame::Object(key)) = stack.last_mut()
                {
                    *key = Some(text);
                }
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < raw.len()
                    && matches!(raw[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    i += 1;
                }
                let literal = std::str::from_utf8(&raw[start..i]).unwrap_or_default();
                if !survives(literal) {
                    errors.push(FieldError::new(
                        path(&stack),
                        format!(
                            "{literal} cannot be kept exactly (a JSON number is read as a double); send it as a string"
                        ),
                    ));
                }
            }
            _ => i += 1,
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(raw: &str) -> Vec<String> {
        inexact_numbers(raw.as_bytes())
            .into_iter()
            .map(|e| e.field)
            .collect()
    }

    #[test]
    fn numbers_a_double_keeps_pass_whatever_their_form() {
        for literal in [
            "0",
            "-0",
            "0.0",
            "-0.0",
            "1",
            "-17",
            "0.1",
            "1e15",
            "1E15",
            "1e+15",
            "2.5e-3",
            "123456789.125",
            "9007199254740992",
            "1.7976931348623157e308",
            "5e-324",
            "18446744073709551615",
            "-9223372036854775808",
            "100",
            "1.50",
        ] {
            assert!(survives(literal), "{literal}");
        }
    }

    #[test]
    fn numbers_a_double_would_change_are_found() {
        for literal in [
            "9007199254740993.0",
            "18446744073709551616",
            "-9223372036854775809",
            "3.14159265358979323846",
            "0.30000000000000000001",
            "1e400",
            "123456789012345678901234567890",
        ] {
            assert!(!survives(literal), "{literal}");
        }
    }

    #[test]
    fn the_field_of_each_inexact_number_is_named() {
        let body = r#"{"action": {"type": "pay", "payload": {"amount": 9007199254740993.0,
            "ok": 1e15, "list": [1, 2, 18446744073709551616], "nested": {"pi": 3.14159265358979323846}}},
            "context": {"s": "1e400 in a string is text", "k\"ey": 0.1}}"#;
        assert_eq!(
            fields(body),
            [
                "action.payload.amount",
                "action.payload.list[2]",
                "action.payload.nested.pi"
            ]
        );
        assert!(fields(r#"{"a": [[1, 2], {"b": [0.5, -3]}], "c": -0}"#).is_empty());
    }

    #[test]
    fn decimals_compare_by_value() {
        assert_eq!(decimal("1e15"), decimal("1000000000000000.0"));
        assert_eq!(decimal("-0.0"), decimal("0"));
        assert_eq!(decimal("1.50"), decimal("15e-1"));
        assert_ne!(decimal("9007199254740993.0"), decimal("9007199254740992.0"));
    }
}
