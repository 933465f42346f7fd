//! JSON arguments (`--payload`, `--context`): inline, `@FILE`, or `@-` for standard input.

use std::io::Read;

use crate::CliError;

/// The JSON object `raw` names, as its text: checked to be one object, but sent as written, so
/// that no number is rounded on the way (the API refuses a number a double cannot hold rather
/// than store another one; re-serialising here would change it silently).
pub fn json_object(flag: &str, raw: &str) -> Result<String, CliError> {
    let text = match raw.strip_prefix('@') {
        Some("-") => {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).map_err(|e| {
                CliError::Usage(format!("--{flag} @-: cannot read standard input: {e}"))
            })?;
            text
        }
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| CliError::Usage(format!("--{flag} @{path}: {e}")))?,
        None => raw.to_owned(),
    };
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(serde_json::Value::Object(_)) => Ok(text.trim().to_owned()),
        Ok(_) => Err(CliError::Usage(format!("--{flag} must be a JSON object"))),
        Err(e) => Err(CliError::Usage(format!("--{flag} is not JSON: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_an_object_inline_or_from_a_file_as_written() {
        assert_eq!(
            json_object("payload", r#" {"build": 3.14159265358979323846} "#).ok(),
            Some(r#"{"build": 3.14159265358979323846}"#.to_owned())
        );
        let path =
            std::env::temp_dir().join(format!("countersign-cli-{}.json", std::process::id()));
        std::fs::write(&path, "{\"a\": 1}\n").expect("write");
        let raw = format!("@{}", path.display());
        assert_eq!(
            json_object("payload", &raw).ok(),
            Some("{\"a\": 1}".to_owned())
        );
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn refuses_what_is_no_object() {
        for bad in ["[1]", "3", "{", "@/no/such/file.json"] {
            assert!(
                matches!(json_object("payload", bad), Err(CliError::Usage(_))),
                "{bad}"
            );
        }
    }
}
