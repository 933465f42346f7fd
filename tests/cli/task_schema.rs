//! The MCP tasks extension's JSON Schema (`tests/fixtures/mcp-tasks/schema.json`, an excerpt of
//! the extension's `schema/draft/schema.json`; its README says whence and under which licence),
//! and the part of JSON Schema it uses, to check `countersign mcp`'s answers against it.
//!
//! `CreateTaskResult` and `GetTaskResult` are `Result & Task` (`Result & DetailedTask`) in the
//! extension's `schema.ts`, generated as `allOf: [Result, Task]` where the task part forbids
//! other properties — so read literally no result with its mandatory `resultType` would pass.
//! An answer is checked as the intersection means: whole against the `Result` part, and without
//! `Result`'s own fields (`resultType`, `_meta`) against the task part.

use serde_json::{Map, Value};

const SCHEMA: &str = include_str!("../fixtures/mcp-tasks/schema.json");

fn definition(name: &str) -> Value {
    let schema: Value = serde_json::from_str(SCHEMA).expect("the schema is JSON");
    schema["$defs"][name].clone()
}

/// `value` against the extension's definition `name` (`Result & X` definitions as above);
/// panics naming what does not hold.
#[track_caller]
pub(crate) fn check(name: &str, value: &Value) {
    let schema = definition(name);
    let errors = match (name, schema["allOf"].as_array()) {
        ("CreateTaskResult" | "GetTaskResult", Some(parts)) => {
            let mut task = value.as_object().cloned().unwrap_or_default();
            task.remove("resultType");
            task.remove("_meta");
            let mut errors = errors_of(&parts[0], value, "");
            errors.extend(errors_of(&parts[1], &Value::Object(task), ""));
            errors
        }
        _ => errors_of(&schema, value, ""),
    };
    assert!(errors.is_empty(), "not a {name}: {errors:?}\n{value:#}");
}

/// A `tools/call` answered with a task: a `CreateTaskResult`, `resultType: "task"`.
#[track_caller]
pub(crate) fn created_task(result: &Value) {
    check("CreateTaskResult", result);
    assert_eq!(result["resultType"], "task", "{result}");
}

/// A `tasks/get` answer in `status`: a `GetTaskResult` (`resultType: "complete"`) and the
/// detailed task of that status (`WorkingTask`, `CompletedTask`).
#[track_caller]
pub(crate) fn got_task(result: &Value, status: &str) {
    check("GetTaskResult", result);
    assert_eq!(result["resultType"], "complete", "{result}");
    assert_eq!(result["status"], status, "{result}");
    let mut task = result.as_object().cloned().unwrap_or_default();
    task.remove("resultType");
    let detailed = match status {
        "working" => "WorkingTask",
        "completed" => "CompletedTask",
        other => panic!("no Countersign task is ever {other}"),
    };
    check(detailed, &Value::Object(task));
}

/// A `tasks/cancel` or `tasks/update` acknowledgement: empty, `resultType: "complete"`.
#[track_caller]
pub(crate) fn acknowledged(name: &str, result: &Value) {
    check(name, result);
    let fields: Vec<&String> = result
        .as_object()
        .map(Map::keys)
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(fields, ["resultType"], "an empty acknowledgement: {result}");
    assert_eq!(result["resultType"], "complete");
}

/// Where `value` breaks `schema`: the keywords the extension's schema uses.
fn errors_of(schema: &Value, value: &Value, at: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let Some(schema) = schema.as_object() else {
        return errors; // `{}`: anything
    };
    let mut fail =
        |what: String| errors.push(format!("{}: {what}", if at.is_empty() { "/" } else { at }));
    if let Some(kind) = schema.get("type").and_then(Value::as_str) {
        let holds = match kind {
            "object" => value.is_object(),
            "string" => value.is_string(),
            "number" => value.is_number(),
            "integer" => value.is_i64() || value.is_u64(),
            "null" => value.is_null(),
            "array" => value.is_array(),
            "boolean" => value.is_boolean(),
            other => panic!("the schema uses type {other}, which this check does not know"),
        };
        if !holds {
            fail(format!("not of type {kind}: {value}"));
        }
    }
    if let Some(constant) = schema.get("const")
        && constant != value
    {
        fail(format!("{value} is not {constant}"));
    }
    if let Some(n) = value.as_f64() {
        if schema
            .get("minimum")
            .and_then(Value::as_f64)
            .is_some_and(|m| n < m)
        {
            fail(format!("{n} below the minimum"));
        }
        if schema
            .get("maximum")
            .and_then(Value::as_f64)
            .is_some_and(|m| n > m)
        {
            fail(format!("{n} above the maximum"));
        }
    }
    for keyword in schema.keys() {
        let known = [
            "$schema",
            "type",
            "const",
            "minimum",
            "maximum",
            "anyOf",
            "allOf",
            "properties",
            "required",
            "additionalProperties",
            "propertyNames",
            "items",
        ];
        assert!(
            known.contains(&keyword.as_str()),
            "the schema uses {keyword}, which this check does not know"
        );
    }
    if let Some(parts) = schema.get("allOf").and_then(Value::as_array) {
        for part in parts {
            errors.extend(errors_of(part, value, at));
        }
    }
    if let Some(options) = schema.get("anyOf").and_then(Value::as_array)
        && !options.iter().any(|o| errors_of(o, value, at).is_empty())
    {
        let why: Vec<String> = options
            .iter()
            .flat_map(|o| errors_of(o, value, at))
            .collect();
        errors.push(format!("{at}: none of anyOf holds ({why:?})"));
    }
    if let Some(items) = schema.get("items")
        && let Some(array) = value.as_array()
    {
        for (i, item) in array.iter().enumerate() {
            errors.extend(errors_of(items, item, &format!("{at}/{i}")));
        }
    }
    let Some(object) = value.as_object() else {
        return errors;
    };
    let properties = schema.get("properties").and_then(Value::as_object);
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for name in required.iter().filter_map(Value::as_str) {
            if !object.contains_key(name) {
                errors.push(format!("{at}/{name}: required, missing"));
            }
        }
    }
    for (name, field) in object {
        let path = format!("{at}/{name}");
        if let Some(names) = schema.get("propertyNames") {
            errors.extend(errors_of(names, &Value::String(name.clone()), &path));
        }
        match properties.and_then(|p| p.get(name)) {
            Some(property) => errors.extend(errors_of(property, field, &path)),
            None => match schema.get("additionalProperties") {
                Some(Value::Bool(false)) => errors.push(format!("{path}: not allowed here")),
                Some(other) => errors.extend(errors_of(other, field, &path)),
                None => {}
            },
        }
    }
    errors
}

#[test]
fn the_check_refuses_what_the_schema_refuses() {
    let working = serde_json::json!({"resultType": "task", "taskId": "t", "status": "working",
        "createdAt": "2026-12-05T10:00:00Z", "lastUpdatedAt": "2026-12-05T10:00:00Z",
        "ttlMs": 1000, "pollIntervalMs": 5000});
    created_task(&working);
    for (field, bad) in [
        ("status", serde_json::json!("pending")),
        ("ttlMs", serde_json::json!("soon")),
        ("extra", serde_json::json!(1)),
    ] {
        let mut value = working.clone();
        value[field] = bad;
        let checked = std::panic::catch_unwind(|| check("CreateTaskResult", &value));
        assert!(checked.is_err(), "{field} passed");
    }
    let mut missing = working.clone();
    missing.as_object_mut().unwrap().remove("ttlMs");
    assert!(std::panic::catch_unwind(|| check("CreateTaskResult", &missing)).is_err());
    let mut completed = working;
    completed["resultType"] = "complete".into();
    completed["status"] = "completed".into();
    assert!(
        std::panic::catch_unwind(|| got_task(&completed, "completed")).is_err(),
        "no result"
    );
    completed["result"] = serde_json::json!({"content": []});
    got_task(&completed, "completed");
}
