//! An approval's reminders and escalation ⇄ its item's attributes: the settings (`reminders`,
//! `escalation`), written once at create, and the counts the sweeper's conditional writes move
//! on (`reminded`, `escalated`; absent is 0, so an approval without either carries nothing).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::approvers_from;
use crate::domain::stall::{EscalationStep, Reminders, Stall};
use crate::store::attr::{Item, get_n, n, opt_s, s};
use crate::store::error::StoreError;

/// The counts' attributes, as the sweeper's conditions name them.
pub(crate) const REMINDED: &str = "reminded";
pub(crate) const ESCALATED: &str = "escalated";

pub(crate) fn stall_attributes(stall: &Stall) -> Vec<(String, AttributeValue)> {
    let mut attributes = Vec::new();
    if let Some(r) = &stall.reminders {
        attributes.push((
            "reminders".to_owned(),
            AttributeValue::M(HashMap::from([
                ("after".to_owned(), n(r.after_seconds)),
                ("every".to_owned(), n(r.every_seconds)),
                ("max".to_owned(), n(r.max)),
            ])),
        ));
    }
    if !stall.escalation.is_empty() {
        let steps = stall.escalation.iter().map(|step| {
            let mut map = HashMap::from([
                ("after".to_owned(), n(step.after_seconds)),
                (
                    "approvers".to_owned(),
                    AttributeValue::L(step.approvers.iter().map(|a| s(a.as_str())).collect()),
                ),
            ]);
            if let Some(rule) = &step.rule {
                map.insert("rule".to_owned(), s(rule));
            }
            AttributeValue::M(map)
        });
        attributes.push(("escalation".to_owned(), AttributeValue::L(steps.collect())));
    }
    if stall.reminded > 0 {
        attributes.push((REMINDED.to_owned(), n(stall.reminded)));
    }
    if stall.escalated > 0 {
        attributes.push((ESCALATED.to_owned(), n(stall.escalated)));
    }
    attributes
}

pub(crate) fn stall_from(item: &Item) -> Result<Stall, StoreError> {
    let reminders = match item.get("reminders") {
        None => None,
        Some(AttributeValue::M(map)) => Some(Reminders {
            after_seconds: get_n(map, "after")?,
            every_seconds: get_n(map, "every")?,
            max: get_n(map, "max")?,
        }),
        Some(_) => return Err(StoreError::corrupt("reminders")),
    };
    let escalation = match item.get("escalation") {
        None => Vec::new(),
        Some(AttributeValue::L(steps)) => steps
            .iter()
            .map(|step| {
                let map = step.as_m().map_err(|_| StoreError::corrupt("escalation"))?;
                Ok(EscalationStep {
                    after_seconds: get_n(map, "after")?,
                    approvers: approvers_from(map.get("approvers"), "escalation")?,
                    rule: opt_s(map, "rule"),
                })
            })
            .collect::<Result<_, StoreError>>()?,
        Some(_) => return Err(StoreError::corrupt("escalation")),
    };
    let count = |name: &'static str| match item.get(name) {
        None => Ok(0),
        Some(_) => get_n(item, name),
    };
    Ok(Stall {
        reminders,
        reminded: count(REMINDED)?,
        escalation,
        escalated: count(ESCALATED)?,
    })
}
