//! A tenant's groups: who a policy's `@require` counts votes from. Set with
//! `countersign groups set` (never through the API), each member spelled by the one identity rule.

use std::collections::BTreeMap;
use std::fmt;

use crate::domain::Approver;

/// The most members a group holds.
pub const MAX_MEMBERS: usize = 200;

/// A group's name: 1–64 of `[a-z0-9_.-]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupName(String);

impl GroupName {
    pub fn parse(raw: &str) -> Result<Self, &'static str> {
        let ok = !raw.is_empty()
            && raw.len() <= 64
            && raw.bytes().all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'.' | b'-')
            });
        ok.then(|| Self(raw.to_owned()))
            .ok_or("a group's name is 1 to 64 of a-z 0-9 _ . -")
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for GroupName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A tenant's groups: each name and its members (1–200, each once by identity).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Groups(BTreeMap<GroupName, Vec<Approver>>);

impl Groups {
    pub const fn empty() -> Self {
        Self(BTreeMap::new())
    }

    pub fn new(groups: BTreeMap<GroupName, Vec<Approver>>) -> Self {
        Self(groups)
    }

    /// Members as given (the identity rule applied to each, duplicates by identity refused).
    pub fn members(raw: &[String]) -> Result<Vec<Approver>, String> {
        if raw.is_empty() || raw.len() > MAX_MEMBERS {
            return Err(format!("a group has 1 to {MAX_MEMBERS} members"));
        }
        let mut members: Vec<Approver> = Vec::with_capacity(raw.len());
        for (i, member) in raw.iter().enumerate() {
            let approver =
                Approver::parse(member).map_err(|e| format!("member {}: {}", i + 1, e.0))?;
            if members.iter().any(|m| m.same_identity(&approver)) {
                return Err(format!("member {}: named twice", i + 1));
            }
            members.push(approver);
        }
        Ok(members)
    }

    pub fn get(&self, name: &GroupName) -> Option<&[Approver]> {
        self.0.get(name).map(Vec::as_slice)
    }

    /// The groups `person` is in now (by identity): what a vote carries for the write's check
    /// that a member removed since the create no longer counts.
    pub fn of(&self, person: &Approver) -> Vec<&GroupName> {
        self.0
            .iter()
            .filter(|(_, members)| members.iter().any(|m| m.same_identity(person)))
            .map(|(name, _)| name)
            .collect()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&GroupName, &[Approver])> {
        self.0
            .iter()
            .map(|(name, members)| (name, members.as_slice()))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
