//! What a permit asks for, in Cedar annotations (which change nothing of Cedar's evaluation):
//! `@require("sre:2, security:1")` — approving votes of distinct members of each group;
//! `@require("none")` — no person; `@assurance("passkey")` — every vote a passkey signature.

use super::groups::GroupName;

/// A permit's `@require`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// No person: the approval is created approved by the policy.
    None,
    /// At least `k` approving votes from distinct members of each group (groups in the order
    /// written, each once).
    Groups(Vec<(GroupName, u32)>),
}

/// The most approving votes one group can be asked for (a group has at most 200 members).
pub const MAX_K: u32 = 200;

impl Requirement {
    /// `none`, or `group:k` entries separated by commas (spaces around them allowed), each
    /// group once, `1 ≤ k ≤ 200`. The error says what is wrong, for the push to print.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let raw = raw.trim();
        if raw == "none" {
            return Ok(Self::None);
        }
        if raw.is_empty() {
            return Err("is empty: write \"none\" or \"group:k, …\"".to_owned());
        }
        let mut groups: Vec<(GroupName, u32)> = Vec::new();
        for entry in raw.split(',').map(str::trim) {
            let (name, k) = entry.split_once(':').ok_or_else(|| {
                format!("{entry:?} is not group:k (a group's name, a colon, a count)")
            })?;
            let name =
                GroupName::parse(name.trim()).map_err(|e| format!("{:?}: {e}", name.trim()))?;
            let k: u32 = k
                .trim()
                .parse()
                .ok()
                .filter(|k| (1..=MAX_K).contains(k))
                .ok_or_else(|| format!("{entry:?}: the count must be 1 to {MAX_K}"))?;
            if groups.iter().any(|(g, _)| *g == name) {
                return Err(format!("{name} is named twice"));
            }
            groups.push((name, k));
        }
        Ok(Self::Groups(groups))
    }
}

/// A permit's `@assurance`: how a vote must be cast on the approvals it requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assurance {
    /// Every vote a passkey signature over the exact action (docs/VERIFY.md).
    Passkey,
}

impl Assurance {
    pub fn parse(raw: &str) -> Result<Self, String> {
        match raw.trim() {
            "passkey" => Ok(Self::Passkey),
            other => Err(format!("{other:?}: the one assurance is \"passkey\"")),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Passkey => "passkey",
        }
    }
}
