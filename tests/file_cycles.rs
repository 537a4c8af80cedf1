//! No import circle between files, in any crate of the workspace: every `crate::`, `super::`,
//! `self::` and child-module path (in `use` trees, nested groups included, and inline in code)
//! is resolved to the file that defines the module it names, and the graph of files must have
//! no cycle. Comments and string literals are not code and are not read. A file may use its
//! own inline modules (`mod tests { use super::*; }`) freely: that is one file. A module owns
//! its submodules: a parent naming its own descendants (declaring them, re-exporting their
//! items as the module's face) is not an import, while a descendant using its ancestors is;
//! so the circles found are between files that should not know each other, such as siblings
//! that each use the other.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod source_text;
use source_text::{ROOTS, code_only, rust_files};

/// The module path of a file under its crate root: `a/b.rs` and `a/b/mod.rs` are `[a, b]`;
/// `lib.rs` and `main.rs` are the root, `[]`.
fn module_of(root: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root).expect("under root");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().expect("a file name");
    let stem = last.trim_end_matches(".rs");
    if !(stem == "mod" || (parts.is_empty() && (stem == "lib" || stem == "main"))) {
        parts.push(stem.to_string());
    }
    parts
}

fn tokens(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push("::".into());
            i += 2;
        } else {
            if !c.is_whitespace() {
                out.push(c.to_string());
            }
            i += 1;
        }
    }
    out
}

/// The paths a `use` tree names, each as its segments (`a::{b, c::{d}}` -> a::b, a::c::d).
fn use_paths(tokens: &[String], prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut path = prefix.to_vec();
    let mut i = 0;
    while i < tokens.len() {
        match tokens[i].as_str() {
            "{" => {
                let end = matching(tokens, i);
                for part in split_top(&tokens[i + 1..end]) {
                    use_paths(part, &path, out);
                }
                return;
            }
            "::" | "as" => {
                if tokens[i] == "as" {
                    break;
                }
            }
            "*" => break,
            word => path.push(word.to_string()),
        }
        i += 1;
    }
    out.push(path);
}

fn matching(tokens: &[String], open: usize) -> usize {
    let mut depth = 0;
    for (at, token) in tokens.iter().enumerate().skip(open) {
        match token.as_str() {
            "{" => depth += 1,
            "}" => {
                depth -= 1;
                if depth == 0 {
                    return at;
                }
            }
            _ => {}
        }
    }
    tokens.len()
}

fn split_top(tokens: &[String]) -> Vec<&[String]> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (at, token) in tokens.iter().enumerate() {
        match token.as_str() {
            "{" => depth += 1,
            "}" => depth -= 1,
            "," if depth == 0 => {
                parts.push(&tokens[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&tokens[start..]);
    parts.into_iter().filter(|p| !p.is_empty()).collect()
}

/// Every path a file names, resolved against its module (`here`) to absolute segments. Paths
/// inside the file's own inline modules resolve with those modules on the stack.
fn file_paths(code: &str, here: &[String], children: &BTreeSet<String>) -> Vec<Vec<String>> {
    let toks = tokens(code);
    let mut out = Vec::new();
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        let t = toks[i].as_str();
        let current: Vec<String> = here
            .iter()
            .cloned()
            .chain(inline.iter().map(|(n, _)| n.clone()))
            .collect();
        let mut relative = Vec::new();
        if t == "mod" && toks.get(i + 2).is_some_and(|n| n == "{") {
            inline.push((toks[i + 1].clone(), depth));
        } else if t == "{" {
            depth += 1;
        } else if t == "}" {
            depth = depth.saturating_sub(1);
            if inline.last().is_some_and(|(_, d)| *d == depth) {
                inline.pop();
            }
        } else if t == "use" {
            let end = (i..toks.len())
                .find(|&j| toks[j] == ";")
                .unwrap_or(toks.len());
            use_paths(&toks[i + 1..end], &[], &mut relative);
            i = end;
        } else if toks.get(i + 1).is_some_and(|n| n == "::")
            && (i == 0 || toks[i - 1] != "::")
            && (matches!(t, "crate" | "super" | "self") || children.contains(t))
        {
            let mut path = vec![t.to_string()];
            let mut j = i + 1;
            while toks.get(j).is_some_and(|n| n == "::")
                && toks
                    .get(j + 1)
                    .is_some_and(|n| n.chars().all(|c| c.is_alphanumeric() || c == '_'))
            {
                path.push(toks[j + 1].clone());
                j += 2;
            }
            relative.push(path);
            i = j - 1;
        }
        for path in relative {
            if let Some(resolved) = resolve(&path, &current, inline.is_empty(), children) {
                out.push(resolved);
            }
        }
        i += 1;
    }
    out
}

fn resolve(
    path: &[String],
    current: &[String],
    top: bool,
    children: &BTreeSet<String>,
) -> Option<Vec<String>> {
    let first = path.first()?.as_str();
    let mut base: Vec<String> = match first {
        "crate" => Vec::new(),
        "self" => current.to_vec(),
        "super" => current.to_vec(),
        name if top && children.contains(name) => current.to_vec(),
        _ => return None,
    };
    let mut rest = path;
    if first == "crate" || first == "self" {
        rest = &path[1..];
    }
    while rest.first().is_some_and(|s| s == "super") {
        base.pop();
        rest = &rest[1..];
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The file that defines the longest module prefix of `path`.
fn file_of<'a>(
    path: &[String],
    modules: &'a BTreeMap<Vec<String>, PathBuf>,
) -> Option<&'a PathBuf> {
    (0..=path.len()).rev().find_map(|n| modules.get(&path[..n]))
}

fn cycles_in(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let modules: BTreeMap<Vec<String>, PathBuf> = files
        .iter()
        .map(|f| (module_of(root, f), f.clone()))
        .collect();
    let mut edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    let module_at: BTreeMap<&PathBuf, &Vec<String>> = modules.iter().map(|(m, f)| (f, m)).collect();
    for (module, file) in &modules {
        let children: BTreeSet<String> = modules
            .keys()
            .filter(|m| m.len() == module.len() + 1 && m.starts_with(module))
            .map(|m| m[module.len()].clone())
            .collect();
        let code = code_only(&std::fs::read_to_string(file).expect("read"));
        for path in file_paths(&code, module, &children) {
            if let Some(target) = file_of(&path, &modules) {
                let descendant = module_at[target].starts_with(module);
                if !descendant && modules.get(&Vec::new()).is_none_or(|r| r != target) {
                    edges
                        .entry(file.clone())
                        .or_default()
                        .insert(target.clone());
                }
            }
        }
    }
    find_cycles(&edges)
}

fn find_cycles(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<String> {
    fn visit(
        node: &PathBuf,
        edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        path: &mut Vec<PathBuf>,
        done: &mut BTreeSet<PathBuf>,
        found: &mut Vec<String>,
    ) {
        if done.contains(node) {
            return;
        }
        if let Some(at) = path.iter().position(|n| n == node) {
            let names: Vec<String> = path[at..].iter().map(|p| p.display().to_string()).collect();
            found.push(format!("{} -> {}", names.join(" -> "), node.display()));
            return;
        }
        path.push(node.clone());
        for next in edges.get(node).into_iter().flatten() {
            visit(next, edges, path, done, found);
        }
        path.pop();
        done.insert(node.clone());
    }
    let (mut done, mut found) = (BTreeSet::new(), Vec::new());
    for node in edges.keys() {
        visit(node, edges, &mut Vec::new(), &mut done, &mut found);
    }
    found
}

#[test]
fn no_import_circle_between_files_in_any_crate() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cycles = Vec::new();
    for root in ROOTS {
        cycles.extend(cycles_in(&workspace.join(root)));
    }
    assert!(
        cycles.is_empty(),
        "import circles between files:\n{}",
        cycles.join("\n")
    );
}

#[test]
fn the_guard_resolves_groups_inline_paths_and_inline_modules() {
    let children: BTreeSet<String> = ["kid".to_string()].into();
    let here = vec!["a".to_string(), "b".to_string()];
    let code = code_only(
        "use super::{c::X, d::{e::Y, Z}};\nuse kid::K;\n// crate::ignored::path\n\
         fn f() { let s = \"crate::not_code\"; crate::g::h(); }\n\
         mod tests { use super::*; use super::super::q::W; }",
    );
    let found: Vec<String> = file_paths(&code, &here, &children)
        .iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(
        found,
        [
            "a::c::X",
            "a::d::e::Y",
            "a::d::Z",
            "a::b::kid::K",
            "g::h",
            "a::b",
            "a::q::W"
        ]
    );
    let edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = [
        ("x".into(), ["y".into()].into()),
        ("y".into(), ["x".into()].into()),
    ]
    .into();
    assert_eq!(find_cycles(&edges).len(), 1);
}
