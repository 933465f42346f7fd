//! What ends a command without an answer to show. Every one of them exits 4.

use serde_json::{Value, json};

use crate::client::Problem;

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The command line or its inputs (a payload file, the configuration) are wrong.
    #[error("{0}")]
    Usage(String),
    /// The API refused the request: its problem's detail and code.
    #[error("{} ({}, HTTP {})", .0.detail, .0.code, .0.status)]
    Api(Problem),
    /// No usable answer: unreachable, timed out, or a 5xx that outlasted the retries.
    #[error("{0}")]
    Transport(String),
    /// `--timeout` ran out before the approval reached an outcome.
    #[error("timed out after {waited} waiting for {id}: {state}")]
    TimedOut {
        id: String,
        waited: String,
        state: String,
    },
}

impl CliError {
    /// A stable machine-readable code: the API's own for its problems.
    pub fn code(&self) -> &str {
        match self {
            Self::Usage(_) => "usage",
            Self::Api(problem) => &problem.code,
            Self::Transport(_) => "transport",
            Self::TimedOut { .. } => "timeout",
        }
    }

    /// The error as `--json` prints it: a problem-like object.
    pub fn to_json(&self) -> Value {
        match self {
            Self::Api(problem) => json!({
                "status": problem.status,
                "code": problem.code,
                "title": problem.title,
                "detail": problem.detail,
                "errors": problem.errors.iter()
                    .map(|e| json!({"field": e.field, "message": e.message}))
                    .collect::<Vec<_>>(),
            }),
            Self::TimedOut { id, .. } => {
                json!({"code": self.code(), "detail": self.to_string(), "id": id})
            }
            _ => json!({"code": self.code(), "detail": self.to_string()}),
        }
    }

    /// The error as a person reads it: the detail and code, then each offending field.
    pub fn to_text(&self) -> String {
        let mut text = format!("error: {self}");
        if let Self::Api(problem) = self {
            for error in &problem.errors {
                let field = if error.field.is_empty() {
                    "(body)"
                } else {
                    &error.field
                };
                text.push_str(&format!("\n  {field}: {}", error.message));
            }
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::FieldError;

    #[test]
    fn an_api_error_shows_its_detail_code_and_fields() {
        let error = CliError::Api(Problem {
            status: 400,
            code: "invalid_request".into(),
            title: "Invalid request".into(),
            detail: "The request body is invalid".into(),
            errors: vec![FieldError {
                field: "approvers".into(),
                message: "required".into(),
            }],
        });
        assert_eq!(
            error.to_text(),
            "error: The request body is invalid (invalid_request, HTTP 400)\n  approvers: required"
        );
        assert_eq!(error.to_json()["code"], "invalid_request");
        assert_eq!(error.to_json()["errors"][0]["field"], "approvers");
    }
}
