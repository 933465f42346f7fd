//! The base schema (`countersign policy schema`): the entity types and the context every request
//! carries, in Cedar's schema syntax, with one action per action type named. A payload's fields
//! are the deployment's own: describe them in the action's `Payload` type before validating.

/// The schema of the requests Countersign makes, for `actions` (at least one: Cedar's schema
/// declares each action a policy may name; `github_deployment` for the GitHub gate).
pub fn base_schema(actions: &[&str]) -> String {
    let mut schema = String::from(
        "// Countersign's approval policies: what a create looks like to Cedar.\n\
         // Validate with: countersign policy push --schema THIS_FILE …\n\
         namespace Countersign {\n\
         \x20 // The tenant a create is for.\n\
         \x20 entity Tenant;\n\
         \x20 // Who asks: the principal of the key that creates (`github:{login}` for GitHub).\n\
         \x20 entity Requester = {\n\
         \x20   tenant: String,\n\
         \x20   roles: Set<String>,\n\
         \x20 };\n",
    );
    for action in actions {
        let payload = format!("Payload_{}", type_name(action));
        schema.push_str(&format!(
            "\n  // The payload of {action:?}: list its fields (a policy reading one not listed is\n\
             \x20 // refused by the validator), e.g. `amount: decimal, service?: String`.\n\
             \x20 type {payload} = {{}};\n\
             \x20 action {action:?} appliesTo {{\n\
             \x20   principal: [Requester],\n\
             \x20   resource: [Tenant],\n\
             \x20   context: {{\n\
             \x20     payload: {payload},\n\
             \x20     summary: String,\n\
             \x20     approvers: Set<String>,\n\
             \x20     channel: String,\n\
             \x20     resume: String,\n\
             \x20     expires_in_seconds: Long,\n\
             \x20   }},\n\
             \x20 }};\n"
        ));
    }
    schema.push_str("}\n");
    schema
}

/// An action type as part of a type's name: its letters and digits, the rest `_`.
fn type_name(action: &str) -> String {
    action
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}
