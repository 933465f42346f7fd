//! `countersign groups set | list | delete`: a tenant's groups, one item of the keys table
//! (each group an attribute: its members). A change is in force on every function within
//! `KEY_CACHE_SECONDS`; a member removed from a group can no longer vote in its rules.

use countersign::domain::approval_policy::{GroupName, Groups};
use serde_json::{Value, json};

use super::args::GroupsCommand;
use super::{EXIT_REFUSED, refuse, transport};
use crate::CliError;
use crate::keys::{now, store, tenant};
use crate::progress::stdout_line;

/// What the tenant's groups item may hold (bytes of names and members): DynamoDB keeps at
/// most 400 KB in an item, and the item carries a little more than its groups.
pub const MAX_GROUPS_BYTES: usize = 350 * 1024;

pub async fn run(command: GroupsCommand, json: bool) -> Result<u8, CliError> {
    match command {
        GroupsCommand::Set(args) => {
            let tenant = tenant(&args.tenant)?;
            let name = group(&args.group)?;
            let members = Groups::members(&args.members)
                .map_err(|e| CliError::Usage(format!("members: {e}")))?;
            let store = store(&args.table).await;
            // A clear refusal before DynamoDB's own (an item over 400 KB is refused whole).
            let groups = store.tenant_policy(&tenant).await.map_err(transport)?.groups;
            let others: usize = groups
                .iter()
                .filter(|(g, _)| **g != name)
                .map(|(g, m)| bytes(g, m))
                .sum();
            let total = others + bytes(&name, &members);
            if total > MAX_GROUPS_BYTES {
                return Ok(refuse(
                    &format!(
                        "tenant {tenant}'s groups would take {total} bytes: at most {MAX_GROUPS_BYTES} (one DynamoDB item)"
                    ),
                    json,
                ));
            }
            store
                .set_group(&tenant, &name, &members, now())
                .await
                .map_err(transport)?;
            if json {
                stdout_line(&listed(&name, &members).to_string());
            } else {
                stdout_line(&format!(
                    "group {name} for {tenant}: {} member(s)",
                    members.len()
                ));
            }
            Ok(0)
        }
        GroupsCommand::List(args) => {
            let tenant = tenant(&args.tenant)?;
            let groups = store(&args.table)
                .await
                .tenant_policy(&tenant)
                .await
                .map_err(transport)?
                .groups;
            if json {
                let all: Vec<Value> = groups.iter().map(|(g, m)| listed(g, m)).collect();
                stdout_line(&Value::Array(all).to_string());
            } else {
                for (name, members) in groups.iter() {
                    let members: Vec<&str> = members.iter().map(|m| m.as_str()).collect();
                    stdout_line(&format!("{name}  {}", members.join(", ")));
                }
            }
            Ok(0)
        }
        GroupsCommand::Delete(args) => {
            let tenant = tenant(&args.tenant)?;
            let name = group(&args.group)?;
            let store = store(&args.table).await;
            let groups = store.tenant_policy(&tenant).await.map_err(transport)?.groups;
            if groups.get(&name).is_none() {
                return Ok(refuse(
                    &format!("tenant {tenant} has no group {name}"),
                    json,
                ));
            }
            store
                .delete_group(&tenant, &name, now())
                .await
                .map_err(transport)?;
            if json {
                stdout_line(&json!({"group": name.as_str(), "deleted": true}).to_string());
            } else {
                stdout_line(&format!("deleted group {name} of {tenant}"));
            }
            Ok(0)
        }
    }
    .map(|code| if code == 0 { 0 } else { EXIT_REFUSED })
}

fn group(raw: &str) -> Result<GroupName, CliError> {
    GroupName::parse(raw.trim()).map_err(|e| CliError::Usage(format!("GROUP: {e}")))
}

/// What a group takes of the item: its attribute's name and each member (with a list
/// element's bytes).
fn bytes(name: &GroupName, members: &[countersign::domain::Approver]) -> usize {
    2 + name.as_str().len() + members.iter().map(|m| 3 + m.as_str().len()).sum::<usize>()
}

fn listed(name: &GroupName, members: &[countersign::domain::Approver]) -> Value {
    json!({
        "group": name.as_str(),
        "members": members.iter().map(|m| m.as_str()).collect::<Vec<_>>(),
    })
}
