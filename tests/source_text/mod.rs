//! Reading the workspace's Rust sources as code: the files under a root, and their text with
//! comments and literals blanked. Shared by the guards over the source tree (import circles,
//! sizes), which must not mistake a brace or a path inside a string or a comment for code.

use std::path::{Path, PathBuf};

/// The source roots of the workspace's crates.
pub const ROOTS: &[&str] = &["crates/cairn/src", "crates/cairn-eval/src", "src"];

/// Every `.rs` file under `dir`, recursively.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text with comments, string and char literals blanked, so only code is left. Line
/// breaks are kept, so a line of the result is the same line of the source.
pub fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let start = i;
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                i += 1;
            }
            i += 2;
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && raw_start(&chars, i) {
            let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
            i += 2 + hashes;
            while i < chars.len() && !closes_raw(&chars, i, hashes) {
                i += 1;
            }
            i += 1 + hashes;
            out.push(' ');
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push(' ');
        } else if c == '\'' && next == Some('\\') {
            i += 2;
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i += 1;
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            i += 3;
        } else {
            out.push(c);
            i += 1;
            continue;
        }
        let skipped = &chars[start..i.min(chars.len())];
        out.extend(skipped.iter().filter(|&&s| s == '\n'));
    }
    out
}

/// `"` followed by `hashes` hashes at `at`: the end of a raw string.
fn closes_raw(chars: &[char], at: usize, hashes: usize) -> bool {
    chars[at] == '"' && (1..=hashes).all(|k| chars.get(at + k) == Some(&'#'))
}

/// `r"` or `r#"` starting a raw string, not the end of an identifier such as `for`.
fn raw_start(chars: &[char], at: usize) -> bool {
    let before_ok = at == 0 || !(chars[at - 1].is_alphanumeric() || chars[at - 1] == '_');
    let hashes = chars[at + 1..].iter().take_while(|&&h| h == '#').count();
    before_ok && chars.get(at + 1 + hashes) == Some(&'"')
}
