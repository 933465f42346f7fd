//! The dependency rule (docs/ARCHITECTURE.md), checked on the source: each layer imports only
//! the layers below it.
//!
//! domain, observe ← (auth, webhook, slack, review_token, clock; store) ← cursor ← config ← App ← (jobs | http)
//! ← runner ← functions

use std::path::{Path, PathBuf};

/// The crate's parts (a folder or a file under `src/`, or a name the crate root re-exports) by
/// layer: a part may import only parts of a lower layer — never its own layer's others, so the
/// store imports nothing but the domain, and jobs and http never each other.
const LAYERS: &[(&str, u8)] = &[
    ("domain", 0),
    // Metrics and traces: pure, of nothing else of the crate, so that every layer may count.
    ("observe", 0),
    ("auth", 1),
    ("webhook", 1),
    ("slack", 1),
    ("github", 1),
    ("oidc", 1),
    ("review_token", 1),
    ("clock", 1),
    ("Clock", 1),
    ("store", 1),
    ("Store", 1),
    ("cursor", 2),
    ("session", 2),
    ("policy_cache", 2),
    ("config", 3),
    ("Config", 3),
    ("ConfigError", 3),
    ("Function", 3),
    ("App", 4),
    ("jobs", 5),
    ("http", 5),
    ("runner", 6),
];

/// The folders and files whose imports are checked, and the part each is.
const CHECKED: &[(&str, &str)] = &[
    ("domain", "domain"),
    ("observe", "observe"),
    ("auth", "auth"),
    ("webhook", "webhook"),
    ("slack", "slack"),
    ("github", "github"),
    ("oidc", "oidc"),
    ("review_token.rs", "review_token"),
    ("clock.rs", "clock"),
    ("store", "store"),
    ("cursor.rs", "cursor"),
    ("session.rs", "session"),
    ("policy_cache.rs", "policy_cache"),
    ("config", "config"),
    ("jobs", "jobs"),
    ("http", "http"),
    ("runner", "runner"),
];

fn layer(part: &str) -> Option<u8> {
    LAYERS.iter().find(|(p, _)| *p == part).map(|(_, l)| *l)
}

fn rust_files(path: &Path, found: &mut Vec<PathBuf>) {
    if path.is_file() {
        found.push(path.to_owned());
    } else if let Ok(entries) = std::fs::read_dir(path) {
        for entry in entries.flatten() {
            rust_files(&entry.path(), found);
        }
    }
}

/// The crate's top-level names a source file names through `crate::`, single or grouped
/// (`crate::{App, store::Store}`).
fn crate_imports(source: &str) -> Vec<String> {
    imports(source, "crate::")
}

/// The names a source file names right after `prefix`, single or grouped.
fn imports(source: &str, prefix: &str) -> Vec<String> {
    let mut names = Vec::new();
    for (at, _) in source.match_indices(prefix) {
        let rest = &source[at + prefix.len()..];
        let group = rest
            .strip_prefix('{')
            .map(|g| &g[..g.find('}').unwrap_or(g.len())]);
        let heads: Vec<&str> = match group {
            Some(group) => group.split(',').map(str::trim).collect(),
            None => vec![rest],
        };
        for head in heads {
            let name: String = head
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                names.push(name);
            }
        }
    }
    names
}

#[test]
fn each_layer_imports_only_the_layers_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut broken = Vec::new();
    for (path, part) in CHECKED {
        let own = layer(part).unwrap_or_else(|| panic!("{part} has no layer"));
        let mut files = Vec::new();
        rust_files(&src.join(path), &mut files);
        assert!(!files.is_empty(), "no source under src/{path}");
        for file in files {
            let source = std::fs::read_to_string(&file).unwrap_or_default();
            for name in crate_imports(&source) {
                if name != *part && layer(&name).is_some_and(|l| l >= own) {
                    broken.push(format!("{} imports crate::{name}", file.display()));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "the dependency rule is broken:\n{}",
        broken.join("\n")
    );
}

/// The store's modules in the order they build on each other: a module may use only modules of
/// a lower rank, so there is no circle inside the store.
const STORE_RANKS: &[(&str, u8)] = &[
    ("error", 0),
    ("expr", 0),
    ("keys", 0),
    ("tables", 0),
    ("conditions", 0),
    ("attr", 1),
    ("indexes", 2),
    ("ballots", 2),
    ("codec", 3),
    ("client", 4),
    ("batch", 5),
    ("schema", 5),
    ("passkeys", 5),
    ("approvals", 6),
    ("votes", 6),
    ("operator", 6),
    ("claims", 6),
    ("api_keys", 6),
    ("delegations", 6),
    ("policies", 6),
    ("due", 6),
    ("stall", 6),
    ("trail", 6),
    ("positions", 6),
    ("held_reads", 6),
    ("redeliveries", 6),
    ("votes_in_place", 7),
    ("inbox", 7),
    ("listing", 7),
    ("size", 7),
    ("unclear", 7),
    ("github", 8),
    ("ledger", 9),
    ("run_ends", 9),
];

#[test]
fn the_stores_modules_build_on_earlier_ones_only() {
    let store = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/store");
    let rank = |name: &str| {
        STORE_RANKS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, r)| *r)
    };
    let mut files = Vec::new();
    rust_files(&store, &mut files);
    let mut broken = Vec::new();
    for file in files {
        let relative = file.strip_prefix(&store).unwrap_or(&file);
        let module = relative
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .unwrap_or_default()
            .trim_end_matches(".rs");
        if module == "mod" {
            continue;
        }
        let own = rank(module).unwrap_or_else(|| panic!("store/{module} has no rank: add it"));
        let source = std::fs::read_to_string(&file).unwrap_or_default();
        let used = imports(&source, "super::")
            .into_iter()
            .chain(imports(&source, "crate::store::"));
        for name in used {
            if name != module && rank(&name).is_some_and(|r| r >= own) {
                broken.push(format!("store/{module} uses store/{name}"));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "a circle inside the store:\n{}",
        broken.join("\n")
    );
}

#[test]
fn grouped_and_single_imports_are_both_seen() {
    assert_eq!(
        crate_imports("use crate::{App, store::Store};\nlet x = crate::jobs::Job::id;"),
        ["App", "store", "jobs"]
    );
}
