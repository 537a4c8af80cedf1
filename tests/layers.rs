//! The floors of the product library, `crates/cairn/src/` (docs/architecture.md), checked from the source text: every `crate::x`
//! path (in `use` lines, `use crate::{a, b}` groups and inline paths, doc links included) of a
//! top-level module must name a module it is allowed to import. A forbidden import fails this
//! test with the file and the path, and so does any import cycle between top-level modules.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module of `src/` and the modules it may import. Lowest floor first.
const FLOORS: &[(&str, &[&str])] = &[
    // Pure: plans, checks, ledger, gate rules, repair ladder, events, settings.
    ("domain", &[]),
    // Ports and the neutral helpers beside them.
    ("clock", &[]),
    ("meters", &["domain"]),
    ("schema", &["domain"]),
    ("secret", &[]),
    ("traces", &[]),
    ("llm", &["domain", "clock", "schema", "secret", "traces"]),
    ("store", &["domain", "clock", "schema", "secret"]),
    (
        "tools",
        &["domain", "clock", "schema", "secret", "store", "traces"],
    ),
    // The engine: never sim, http, config, wiring (nor the evaluation crate).
    (
        "engine",
        &[
            "domain", "clock", "schema", "secret", "meters", "llm", "store", "tools", "traces",
        ],
    ),
    (
        "worker",
        &[
            "domain", "clock", "schema", "secret", "meters", "store", "engine", "traces",
        ],
    ),
    // The simulator uses ports only.
    (
        "sim",
        &[
            "domain", "clock", "schema", "secret", "llm", "store", "tools",
        ],
    ),
    (
        "http",
        &[
            "domain", "clock", "schema", "secret", "meters", "llm", "store", "tools", "engine",
            "worker",
        ],
    ),
    // Config composes every module's own settings type; it never reaches into the engine.
    (
        "config",
        &[
            "domain", "clock", "schema", "secret", "llm", "store", "tools", "worker", "http",
        ],
    ),
    // The one composition root, then the serve lifecycle.
    (
        "wiring",
        &[
            "domain", "clock", "schema", "secret", "meters", "llm", "store", "tools", "engine",
            "worker", "sim", "http", "config", "traces",
        ],
    ),
    (
        "server",
        &[
            "domain", "clock", "schema", "secret", "meters", "llm", "store", "tools", "engine",
            "worker", "sim", "http", "config", "wiring", "traces",
        ],
    ),
];

/// The product library's sources.
fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/cairn/src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read src")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`None` for lib.rs and main.rs).
fn owner(path: &Path) -> Option<String> {
    let rel = path.strip_prefix(src()).expect("under src");
    let first = rel.components().next()?.as_os_str().to_string_lossy();
    let name = first.trim_end_matches(".rs").to_string();
    (name != "lib" && name != "main").then_some(name)
}

/// Every top-level module named after `crate::` in `text`, with the line it is on.
fn references(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for part in group[..end].split(',') {
                    out.push((number + 1, ident(part.trim())));
                }
            } else {
                out.push((number + 1, ident(rest)));
            }
        }
    }
    out.retain(|(_, name)| !name.is_empty());
    out
}

fn ident(text: &str) -> String {
    text.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

#[test]
fn every_module_imports_only_floors_below_it() {
    let allowed: BTreeMap<&str, BTreeSet<&str>> = FLOORS
        .iter()
        .map(|(module, below)| (*module, below.iter().copied().collect()))
        .collect();
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut violations = Vec::new();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let Some(module) = owner(file) else { continue };
        let Some(may) = allowed.get(module.as_str()) else {
            violations.push(format!(
                "{}: module {module:?} has no floor",
                file.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).expect("read file");
        for (line, target) in references(&text) {
            if target == module || !allowed.contains_key(target.as_str()) {
                continue;
            }
            edges
                .entry(module.clone())
                .or_default()
                .insert(target.clone());
            if !may.contains(target.as_str()) {
                violations.push(format!(
                    "{}:{line}: {module} may not import crate::{target}",
                    file.display()
                ));
            }
        }
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
    assert_no_cycle(&edges);
}

fn assert_no_cycle(edges: &BTreeMap<String, BTreeSet<String>>) {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) {
        if done.contains(node) {
            return;
        }
        if let Some(at) = path.iter().position(|n| n == node) {
            panic!("import cycle: {} -> {node}", path[at..].join(" -> "));
        }
        path.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            visit(next, edges, path, done);
        }
        path.pop();
        done.insert(node.to_string());
    }
    let mut done = BTreeSet::new();
    for node in edges.keys() {
        visit(node, edges, &mut Vec::new(), &mut done);
    }
}

#[test]
fn only_the_composition_root_reads_the_whole_config() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let readers = ["config", "wiring", "server"];
    let offenders: Vec<String> = files
        .iter()
        .filter(|f| owner(f).is_some_and(|m| !readers.contains(&m.as_str())))
        .filter(|f| {
            let text = std::fs::read_to_string(f).expect("read");
            references(&text).iter().any(|(_, m)| m == "config")
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "Config read outside the root: {offenders:?}"
    );
}

#[test]
fn the_guard_sees_grouped_and_inline_paths() {
    let found = references("use crate::{sim::x, eval};\nlet a = crate::config::Config::default();");
    let names: Vec<&str> = found.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(names, ["sim", "eval", "config"]);
}

/// The event catalog (`domain::event::kinds`) is the only place an event kind is defined:
/// no other file declares a `noun.verb` string constant or formats a kind at a call site.
#[test]
fn event_kinds_live_only_in_the_catalog() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let catalog = src().join("domain").join("event.rs");
    let mut offenders = Vec::new();
    for file in files.iter().filter(|f| **f != catalog) {
        let text = std::fs::read_to_string(file).expect("read");
        for (number, line) in text.lines().enumerate() {
            let code = line.trim_start();
            let declares_kind = code.contains("const ")
                && code.contains(": &str = \"")
                && code.split('"').nth(1).is_some_and(looks_like_kind);
            let pushes_literal = (code.starts_with("record.push(\"")
                || code.starts_with("Record::event(\"")
                || code.contains("NewEvent::new(\""))
                && !file.to_string_lossy().ends_with("_tests.rs");
            if declares_kind || pushes_literal {
                offenders.push(format!("{}:{}: {code}", file.display(), number + 1));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "event kinds outside the catalog:\n{}",
        offenders.join("\n")
    );
}

/// `noun.verb`: two non-empty lower-case words joined by one dot.
fn looks_like_kind(value: &str) -> bool {
    let word = |w: &str| {
        w.starts_with(|c: char| c.is_ascii_lowercase())
            && w.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    };
    matches!(value.split_once('.'), Some((noun, verb)) if word(noun) && word(verb))
}

/// The product library holds only the product: it neither depends on nor names the
/// evaluation crate, and the evaluation's world never reaches into the product's simulator
/// (two simulators, two purposes: docs/architecture.md, "Two simulators").
#[test]
fn the_product_imports_no_evaluation_code_and_the_world_no_simulator() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("crates/cairn/Cargo.toml")).expect("read");
    assert!(
        !manifest.contains("cairn-eval"),
        "crates/cairn/Cargo.toml depends on the evaluation crate"
    );
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let product: Vec<String> = files
        .iter()
        .filter(|f| {
            std::fs::read_to_string(f)
                .expect("read")
                .contains("cairn_eval")
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(product.is_empty(), "evaluation code named in: {product:?}");
    let mut eval_files = Vec::new();
    rust_files(&root.join("crates/cairn-eval/src"), &mut eval_files);
    assert!(
        eval_files.len() > 10,
        "the evaluation crate's sources were not found"
    );
    let reaching: Vec<String> = eval_files
        .iter()
        .filter(|f| {
            std::fs::read_to_string(f)
                .expect("read")
                .contains("cairn::sim")
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        reaching.is_empty(),
        "the evaluation world uses the simulator: {reaching:?}"
    );
}
