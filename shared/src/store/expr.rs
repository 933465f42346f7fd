//! Expression attribute names: every attribute in an expression is written `#name`, so none
//! can collide with one of DynamoDB's several hundred reserved words (`status`, `data`, …).

use std::collections::HashMap;

/// The `#name → name` map for every alias used in `expressions`.
pub(crate) fn names(expressions: &[&str]) -> HashMap<String, String> {
    let mut names = HashMap::new();
    for expression in expressions {
        let mut rest = *expression;
        while let Some(start) = rest.find('#') {
            let tail = &rest[start + 1..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            names.insert(format!("#{}", &tail[..end]), tail[..end].to_owned());
            rest = &tail[end..];
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_alias_names_its_attribute() {
        let got = names(&[
            "SET #status = :s, #execution.#updated_at = :now",
            "attribute_not_exists(#pk)",
        ]);
        let want: HashMap<String, String> = [
            ("#status", "status"),
            ("#execution", "execution"),
            ("#updated_at", "updated_at"),
            ("#pk", "pk"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(got, want);
    }
}
