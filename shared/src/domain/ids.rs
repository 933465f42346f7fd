//! Identifiers parsed at the edge.

use std::fmt;

use serde::{Deserialize, Serialize};
use unicode_general_category::{GeneralCategory, get_general_category};
use unicode_normalization::{UnicodeNormalization, is_nfkc};

/// Why a value was refused; the message is safe to show to the caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidValue(pub &'static str);

/// `apr_` followed by a ULID: sortable by creation time, unguessable enough not to enumerate.
///
/// The ULID's last character (its lowest 5 random bits) hints at what a vote's write must do:
/// the low 4 bits tell how many rules the approval's policy has (`0`: none, 1–15), and bit 4
/// that its action type is approval-only (approved, its execution waits for a claim instead of
/// being queued). A vote's first write is shaped by them, so a vote needs no read to pick its
/// one conditional write. Bit 5 says that a deployment's approval policy put a group's rule on
/// it: only a vote on such an approval needs the tenant's groups (cached). It is only a hint —
/// every condition checks the item itself; an id made before policies existed (any last
/// characters) costs at most one more round trip, never a wrong count. 74 random bits remain.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String")]
pub struct ApprovalId(String);

impl ApprovalId {
    const PREFIX: &'static str = "apr_";
    const HINT_MASK: u128 = 0x3F;
    const RULES_MASK: u128 = 0x0F;
    const APPROVAL_ONLY_BIT: u128 = 0x10;
    const GROUP_RULES_BIT: u128 = 0x20;

    /// A new id for an approval whose policy has `rules` rules (0: no policy).
    pub fn generate_for(rules: usize) -> Self {
        Self::generate_hinting(rules, true)
    }

    /// A new id for an approval whose policy has `rules` rules, of an action type Countersign
    /// `executes` (false: approval-only).
    pub fn generate_hinting(rules: usize, executes: bool) -> Self {
        Self::generate_governed(rules, executes, false)
    }

    /// [`ApprovalId::generate_hinting`], for an approval with (`group_rules`) or without a
    /// deployment's group rule.
    pub fn generate_governed(rules: usize, executes: bool, group_rules: bool) -> Self {
        let random = ulid::Ulid::new().0 & !Self::HINT_MASK;
        let only = if executes { 0 } else { Self::APPROVAL_ONLY_BIT };
        let groups = if group_rules {
            Self::GROUP_RULES_BIT
        } else {
            0
        };
        let ulid = ulid::Ulid(random | (rules as u128 & Self::RULES_MASK) | only | groups);
        Self(format!("{}{}", Self::PREFIX, ulid))
    }

    /// Whether the id says a deployment's policy put a group's rule on its approval (see the
    /// type's notes): only then does a vote read the tenant's groups.
    pub fn group_rules_hint(&self) -> bool {
        self.0
            .strip_prefix(Self::PREFIX)
            .and_then(|u| ulid::Ulid::from_string(u).ok())
            .is_some_and(|u| u.0 & Self::GROUP_RULES_BIT != 0)
    }

    /// Whether the id says its action type is executed by Countersign (see the type's notes).
    pub fn executes_hint(&self) -> bool {
        let ulid = self
            .0
            .strip_prefix(Self::PREFIX)
            .and_then(|u| ulid::Ulid::from_string(u).ok());
        ulid.is_none_or(|u| u.0 & Self::APPROVAL_ONLY_BIT == 0)
    }

    pub fn generate() -> Self {
        Self::generate_for(0)
    }

    /// How many rules the id says its approval's policy has (see the type's notes); `None`
    /// for an id that says nothing (one made before policies existed).
    pub fn rules_hint(&self) -> Option<usize> {
        let ulid = ulid::Ulid::from_string(self.0.strip_prefix(Self::PREFIX)?).ok()?;
        let rules = (ulid.0 & Self::RULES_MASK) as usize;
        (rules <= super::Policy::MAX_ALL_RULES).then_some(rules)
    }

    pub fn parse(raw: &str) -> Result<Self, InvalidValue> {
        let ulid = raw
            .strip_prefix(Self::PREFIX)
            .ok_or(InvalidValue("approval ids start with apr_"))?;
        let ulid = ulid::Ulid::from_string(ulid).map_err(|_| InvalidValue("not an approval id"))?;
        // Re-encode so that one approval has exactly one spelling (ULIDs decode case-insensitively).
        Ok(Self(format!("{}{}", Self::PREFIX, ulid)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ApprovalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A tenant id from the configuration: `[A-Za-z0-9_.-]{1,64}`. It never contains `#`, so it can
/// prefix a DynamoDB key unambiguously.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String")]
pub struct TenantId(String);

impl TenantId {
    pub fn parse(raw: &str) -> Result<Self, InvalidValue> {
        let ok = !raw.is_empty()
            && raw.len() <= 64
            && raw
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
        if ok {
            Ok(Self(raw.to_owned()))
        } else {
            Err(InvalidValue(
                "tenant ids are 1-64 characters of A-Z a-z 0-9 _ . -",
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The client's `Idempotency-Key`: 1-255 printable ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String")]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    pub fn parse(raw: &str) -> Result<Self, InvalidValue> {
        if raw.is_empty() || raw.len() > 255 {
            return Err(InvalidValue("Idempotency-Key must be 1-255 characters"));
        }
        if !raw.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
            return Err(InvalidValue("Idempotency-Key must be printable ASCII"));
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// An approver as the requester named them: non-empty, not only whitespace, at most 320
/// characters (the longest e-mail address), no control characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String")]
pub struct Approver(String);

impl Approver {
    pub const MAX_CHARS: usize = 320;

    /// An identity as a caller, a request or the configuration spells it. Beside the bounds,
    /// it must have one spelling: no format (Cf: zero-width, word joiner, BOM, bidi controls),
    /// private-use or unassigned character, and already in NFKC (no full-width Latin, no
    /// Kelvin sign, no decomposed accents). Nothing is removed silently: what could make two
    /// spellings of one person, or make a name read as another, is refused.
    pub fn parse(raw: &str) -> Result<Self, InvalidValue> {
        let approver = Self::from_stored(raw)?;
        if raw.chars().any(|c| {
            matches!(
                get_general_category(c),
                GeneralCategory::Format
                    | GeneralCategory::PrivateUse
                    | GeneralCategory::Unassigned
                    | GeneralCategory::LineSeparator
                    | GeneralCategory::ParagraphSeparator
            ) || invisible(c)
        }) {
            return Err(InvalidValue(
                "must not contain format, private-use, unassigned, invisible or line-separating characters",
            ));
        }
        if !is_nfkc(raw) {
            return Err(InvalidValue(
                "must be in Unicode NFKC form (no full-width, compatibility or decomposed characters)",
            ));
        }
        Ok(approver)
    }

    /// An identity read back from the store: the bounds only. Items written before the
    /// one-spelling rule stay readable (their votes were counted by `identity()` then too).
    pub fn from_stored(raw: &str) -> Result<Self, InvalidValue> {
        if raw.trim().is_empty() {
            return Err(InvalidValue("must be a non-empty string"));
        }
        if raw.chars().count() > Self::MAX_CHARS {
            return Err(InvalidValue("must be at most 320 characters"));
        }
        if raw.chars().any(char::is_control) {
            return Err(InvalidValue("must not contain control characters"));
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Who this names, for separation of duties, quorum and every "is this the listed
    /// approver" check: trimmed, NFKC and fully case-folded (`ß` and `ss`, `Σ` and `ς` are one),
    /// so that a requester cannot list itself in another spelling (`Alice@Example.com `) and
    /// approve its own request, nor one person meet a 2-of-n rule twice.
    pub fn identity(&self) -> String {
        let composed: String = self.0.trim().nfkc().collect();
        caseless::default_case_fold_str(&composed).nfkc().collect()
    }

    /// Whether two names are one identity.
    pub fn same_identity(&self, other: &Self) -> bool {
        self.identity() == other.identity()
    }
}

/// Characters that show nothing outside the format category: Unicode's default-ignorable code
/// points (the combining grapheme joiner, variation selectors, Hangul fillers, Mongolian
/// free variation selectors, Khmer inherent vowels, tags) and the blank Braille pattern.
fn invisible(c: char) -> bool {
    matches!(
        u32::from(c),
        0x034F
            | 0x115F..=0x1160
            | 0x17B4..=0x17B5
            | 0x180B..=0x180F
            | 0x2800
            | 0x3164
            | 0xFE00..=0xFE0F
            | 0xFFA0
            | 0xE0000..=0xE0FFF
    )
}

/// Deserialised only through `parse`: a job or an event never carries an id that is not one.
macro_rules! parsed_from_strings {
    ($($id:ty),+) => {$(
        impl TryFrom<String> for $id {
            type Error = InvalidValue;

            fn try_from(raw: String) -> Result<Self, Self::Error> {
                Self::parse(&raw)
            }
        }
    )+};
}

parsed_from_strings!(ApprovalId, TenantId, IdempotencyKey);

/// Jobs and events carry approvers read from the store: the stored bounds, not the stricter
/// spelling rule a request meets (see `Approver::from_stored`).
impl TryFrom<String> for Approver {
    type Error = InvalidValue;

    fn try_from(raw: String) -> Result<Self, Self::Error> {
        Self::from_stored(&raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approval_ids_round_trip_and_have_one_spelling() {
        for rules in [0, 1, 2, 10, 15] {
            let id = ApprovalId::generate_for(rules);
            assert_eq!(id.rules_hint(), Some(rules), "{id}");
            assert_eq!(ApprovalId::parse(id.as_str()).unwrap(), id);
        }
        assert_eq!(
            ApprovalId::generate_for(2).as_str().chars().last(),
            Some('2')
        );
        // Since v7 every last character hints (up to 15 rules): an id made before hints may
        // hint wrongly, which costs its vote one more write, never a wrong count.
        assert_eq!(
            ApprovalId::parse("apr_01JD3ZZZZZZZZZZZZZZZZZZZZZ")
                .unwrap()
                .rules_hint(),
            Some(15)
        );
        for rules in [0, 3, 10] {
            let only = ApprovalId::generate_hinting(rules, false);
            assert_eq!(
                (only.rules_hint(), only.executes_hint()),
                (Some(rules), false)
            );
            assert!(ApprovalId::generate_for(rules).executes_hint());
        }
        let id = ApprovalId::generate();
        assert_eq!(ApprovalId::parse(id.as_str()).unwrap(), id);
        let lower = format!("apr_{}", id.as_str()[4..].to_lowercase());
        assert_eq!(ApprovalId::parse(&lower).unwrap(), id);
    }

    #[test]
    fn malformed_approval_ids_are_refused() {
        for raw in [
            "",
            "apr_",
            "apr_123",
            "01JD3ZZZZZZZZZZZZZZZZZZZZZ",
            "apr_01JD3ZZZZZZZZZZZZZZZZZZZZ!",
            "../etc",
        ] {
            assert!(ApprovalId::parse(raw).is_err(), "{raw:?} accepted");
        }
    }

    #[test]
    fn tenant_ids_never_contain_the_key_separator() {
        assert!(TenantId::parse("acme-prod.eu_1").is_ok());
        for raw in ["", "a#b", "a b", &"x".repeat(65)] {
            assert!(TenantId::parse(raw).is_err(), "{raw:?} accepted");
        }
    }

    #[test]
    fn idempotency_keys_are_1_to_255_printable_ascii() {
        assert!(IdempotencyKey::parse("deploy-prod-1042").is_ok());
        assert!(IdempotencyKey::parse("a#b c~").is_ok());
        assert!(IdempotencyKey::parse(&"k".repeat(255)).is_ok());
        for raw in ["", "tab\tkey", "é", "nul\0"] {
            assert!(IdempotencyKey::parse(raw).is_err(), "{raw:?} accepted");
        }
        assert!(IdempotencyKey::parse(&"k".repeat(256)).is_err());
    }

    #[test]
    fn approvers_are_non_empty_bounded_and_printable() {
        assert!(Approver::parse("alice@example.com").is_ok());
        for raw in ["", "   ", "a\nb", &"a".repeat(321)] {
            assert!(Approver::parse(raw).is_err(), "{raw:?} accepted");
        }
    }

    /// Every spelling trick of issue 36: refused, or one identity with the plain spelling.
    #[test]
    fn an_identity_has_one_spelling() {
        for (raw, why) in [
            ("ci@acme\u{200B}", "zero-width space"),
            ("bob@x\u{2060}", "word joiner"),
            ("\u{FEFF}alice", "byte order mark"),
            ("alice\u{202E}moc.evil", "right-to-left override"),
            ("al\u{200D}ice", "zero-width joiner"),
            ("alice\u{E000}", "private use"),
            ("alice\u{0378}", "unassigned"),
            ("Jose\u{0301}", "decomposed accent (NFD)"),
            ("\u{FF41}lice", "full-width Latin"),
            ("\u{212A}elvin", "Kelvin sign"),
            ("\u{FB01}nance", "ligature fi"),
            // Review of v5, finding 10: invisible outside the Cf category.
            ("ali\u{034F}ce", "combining grapheme joiner"),
            ("alice\u{FE0F}", "variation selector 16"),
            ("alice\u{E0101}", "variation selector 18"),
            ("\u{115F}alice", "Hangul choseong filler"),
            ("alice\u{1160}", "Hangul jungseong filler"),
            ("alice\u{3164}", "Hangul filler"),
            ("alice\u{FFA0}", "half-width Hangul filler"),
            ("alice\u{2800}", "Braille pattern blank"),
            ("alice\u{2028}", "line separator"),
            ("alice\u{2029}", "paragraph separator"),
            ("alice\u{180B}", "Mongolian free variation selector"),
        ] {
            let refused = Approver::parse(raw);
            assert!(refused.is_err(), "{why}: {raw:?} accepted");
            // Still readable from the store (an item written before the rule).
            assert!(Approver::from_stored(raw).is_ok(), "{why}");
        }
        let one = |a: &str, b: &str| {
            Approver::parse(a).unwrap().identity() == Approver::parse(b).unwrap().identity()
        };
        assert!(
            one("Alice@Example.COM ", "alice@example.com"),
            "case and trim"
        );
        assert!(one("Jos\u{E9}", "JOS\u{C9}"), "composed accents, any case");
        assert!(
            one("stra\u{DF}e", "STRASSE"),
            "full case folding: \u{DF} is ss"
        );
        assert!(
            one("\u{3A3}\u{3C3}\u{3C2}", "\u{3C3}\u{3C3}\u{3C3}"),
            "sigma and final sigma"
        );
        assert!(!one("alice", "alicia"));
        assert!(Approver::parse("Jos\u{E9} M\u{FC}ller <jm@example.com>").is_ok());
        assert!(
            Approver::parse("\u{674E}\u{96F7}").is_ok(),
            "CJK is letters"
        );
    }

    proptest::proptest! {
        /// No two accepted spellings of one identity differ as anything but case and the
        /// surrounding blanks: whatever `parse` accepts, equal identities are equal folded text.
        #[test]
        fn accepted_spellings_of_one_identity_differ_only_in_case(
            a in "[ a-zA-Z\u{C0}-\u{17F}\u{200B}-\u{200F}\u{2060}\u{FEFF}\u{FF21}-\u{FF3A}\u{212A}\u{301}]{1,8}",
            b in "[ a-zA-Z\u{C0}-\u{17F}\u{200B}-\u{200F}\u{2060}\u{FEFF}\u{FF21}-\u{FF3A}\u{212A}\u{301}]{1,8}",
        ) {
            if let (Ok(x), Ok(y)) = (Approver::parse(&a), Approver::parse(&b))
                && x.identity() == y.identity()
            {
                // No hidden or compatibility character in either, and one text up to case
                // and blanks. A combining mark that composes with nothing is a legitimate
                // character (a lone U+301 is its own identity); one that composes is caught
                // by the fold comparison ("e\u{301}" and "é" fold apart).
                let hidden = a.chars().chain(b.chars()).any(|c| {
                    matches!(c, '\u{200B}'..='\u{200F}' | '\u{2060}' | '\u{FEFF}' | '\u{FF21}'..='\u{FF3A}' | '\u{212A}')
                });
                proptest::prop_assert!(!hidden, "{:?} and {:?}", a, b);
                let fold = |s: &str| caseless::default_case_fold_str(s.trim());
                proptest::prop_assert_eq!(fold(&a), fold(&b));
            }
        }
    }

    #[test]
    fn ids_deserialise_only_through_parse() {
        let id = ApprovalId::generate();
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, format!("\"{id}\""));
        assert_eq!(serde_json::from_str::<ApprovalId>(&json).unwrap(), id);
        assert!(serde_json::from_str::<ApprovalId>("\"apr_123\"").is_err());
        assert!(serde_json::from_str::<TenantId>("\"a#b\"").is_err());
        assert!(serde_json::from_str::<Approver>("\"a\\nb\"").is_err());
        assert!(serde_json::from_str::<IdempotencyKey>("\"\"").is_err());
        let alice: Approver = serde_json::from_str("\"Alice@Example.com\"").unwrap();
        assert_eq!(alice.as_str(), "Alice@Example.com");
    }
}
