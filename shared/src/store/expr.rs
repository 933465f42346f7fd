//! Expressions: attribute names (every attribute in an expression is written `#name`, so none
//! can collide with one of DynamoDB's several hundred reserved words: `status`, `data`, …) and
//! update expressions assembled from their clauses.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::TransactWriteItem;

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

/// `update` with `assignment` added to its `SET` clause (one made if it has none).
pub(crate) fn with_set(update: &str, assignment: &str) -> String {
    if let Some(rest) = update.strip_prefix("SET ") {
        format!("SET {assignment}, {rest}")
    } else if let Some(at) = update.find(" SET ") {
        let (head, rest) = update.split_at(at + " SET ".len());
        format!("{head}{assignment}, {rest}")
    } else {
        format!("SET {assignment} {update}").trim_end().to_owned()
    }
}

/// Whether `expression` holds `token` (a `:value` or `#name`) as a whole word (`:t1` is not in
/// `:t10`).
pub(crate) fn uses(expression: &str, token: &str) -> bool {
    expression.match_indices(token).any(|(at, _)| {
        !expression[at + token.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The values of a transaction's actions that no expression of their action uses. DynamoDB
/// refuses such a request ("Value provided in ExpressionAttributeValues unused in
/// expressions"), and moto checks it for single writes but not inside TransactWriteItems: the
/// store asserts it on every transaction it sends, so the tests see what AWS would refuse.
pub(crate) fn unused_values(items: &[TransactWriteItem]) -> Vec<String> {
    let mut unused = Vec::new();
    for item in items {
        let (expressions, values): (Vec<&str>, _) = if let Some(u) = item.update() {
            (
                vec![
                    u.update_expression(),
                    u.condition_expression().unwrap_or_default(),
                ],
                u.expression_attribute_values(),
            )
        } else if let Some(p) = item.put() {
            (
                vec![p.condition_expression().unwrap_or_default()],
                p.expression_attribute_values(),
            )
        } else if let Some(c) = item.condition_check() {
            (
                vec![c.condition_expression()],
                c.expression_attribute_values(),
            )
        } else if let Some(d) = item.delete() {
            (
                vec![d.condition_expression().unwrap_or_default()],
                d.expression_attribute_values(),
            )
        } else {
            continue;
        };
        for value in values.into_iter().flat_map(|v| v.keys()) {
            if !expressions.iter().any(|e| uses(e, value)) {
                unused.push(value.clone());
            }
        }
    }
    unused
}

/// An update expression assembled clause by clause: DynamoDB takes each of `SET`, `REMOVE` and
/// `ADD` once, so writes that add their own clauses to shared ones (the index attributes) meet
/// here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct UpdateExpr {
    set: Vec<String>,
    remove: Vec<String>,
    add: Vec<String>,
}

impl UpdateExpr {
    /// `#name = value` (or `#name = list_append(…)`, …).
    pub(crate) fn set(mut self, clause: impl Into<String>) -> Self {
        self.set.push(clause.into());
        self
    }

    pub(crate) fn remove(mut self, path: impl Into<String>) -> Self {
        self.remove.push(path.into());
        self
    }

    /// `#set :values`.
    pub(crate) fn add(mut self, clause: impl Into<String>) -> Self {
        self.add.push(clause.into());
        self
    }

    pub(crate) fn build(&self) -> String {
        [
            ("SET", &self.set),
            ("REMOVE", &self.remove),
            ("ADD", &self.add),
        ]
        .iter()
        .filter(|(_, clauses)| !clauses.is_empty())
        .map(|(action, clauses)| format!("{action} {}", clauses.join(", ")))
        .collect::<Vec<_>>()
        .join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_assignment_joins_the_set_clause_wherever_it_is() {
        let add = |update| with_set(update, "#r = :r");
        assert_eq!(
            add("SET #a = :a REMOVE #b"),
            "SET #r = :r, #a = :a REMOVE #b"
        );
        assert_eq!(
            add("REMOVE #b SET #a = :a"),
            "REMOVE #b SET #r = :r, #a = :a"
        );
        assert_eq!(add("ADD #n :one"), "SET #r = :r ADD #n :one");
        assert_eq!(add(""), "SET #r = :r");
    }

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

    #[test]
    fn an_update_names_each_action_once() {
        let update = UpdateExpr::default()
            .set("#a = :a")
            .remove("#c")
            .add("#voters :voter")
            .set("#b = :b");
        assert_eq!(
            update.build(),
            "SET #a = :a, #b = :b REMOVE #c ADD #voters :voter"
        );
        assert_eq!(UpdateExpr::default().build(), "");
    }

    #[test]
    fn a_transactions_unused_value_is_found() {
        use aws_sdk_dynamodb::types::{AttributeValue, Update};
        let update = |values: &[&str]| {
            let mut update = Update::builder()
                .table_name("t")
                .key("pk", AttributeValue::S("k".into()))
                .update_expression("SET #a = :a")
                .condition_expression("#b = :b1");
            for value in values {
                update = update.expression_attribute_values(*value, AttributeValue::N("1".into()));
            }
            TransactWriteItem::builder()
                .update(update.build().unwrap())
                .build()
        };
        assert!(unused_values(&[update(&[":a", ":b1"])]).is_empty());
        assert_eq!(unused_values(&[update(&[":a", ":b1", ":b"])]), [":b"]);
    }
}
