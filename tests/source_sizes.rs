//! Every source file of every crate is readable in one sitting (at most 400 lines) and every
//! function fits on a screen or two (at most 80 lines, from its `fn` line to its closing
//! brace). Test modules inside src count too: they are read as often as the code.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use std::path::Path;

mod source_text;
use source_text::{ROOTS, code_only, rust_files};

const MAX_FILE_LINES: usize = 400;
const MAX_FN_LINES: usize = 80;

/// Each function with a body in `code` (comments and literals already blanked): its name,
/// its first line (1-based) and how many lines it spans.
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let chars: Vec<char> = code.chars().collect();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    for at in 0..chars.len().saturating_sub(3) {
        let word_start = at == 0 || !ident(chars[at - 1]);
        if !(word_start && chars[at] == 'f' && chars[at + 1] == 'n' && chars[at + 2] == ' ') {
            continue;
        }
        let name: String = chars[at + 3..]
            .iter()
            .skip_while(|c| c.is_whitespace())
            .take_while(|&&c| ident(c))
            .collect();
        if name.is_empty()
            || !name
                .chars()
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_')
        {
            continue;
        }
        let Some(open) = (at..chars.len()).find(|&i| chars[i] == '{' || chars[i] == ';') else {
            continue;
        };
        if chars[open] == ';' {
            continue;
        }
        let close = matching_brace(&chars, open);
        let line_of = |i: usize| chars[..i].iter().filter(|&&c| c == '\n').count() + 1;
        out.push((name, line_of(at), line_of(close) - line_of(at) + 1));
    }
    out
}

fn matching_brace(chars: &[char], open: usize) -> usize {
    let mut depth = 0usize;
    for (i, &c) in chars.iter().enumerate().skip(open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    chars.len() - 1
}

/// The files and functions over the limits under every crate root.
fn oversized() -> Vec<String> {
    let mut found = Vec::new();
    for root in ROOTS {
        let mut files = Vec::new();
        rust_files(Path::new(root), &mut files);
        files.sort();
        for file in files {
            let text = std::fs::read_to_string(&file).expect("read");
            let lines = text.lines().count();
            if lines > MAX_FILE_LINES {
                found.push(format!("{}: {lines} lines", file.display()));
            }
            for (name, line, len) in functions(&code_only(&text)) {
                if len > MAX_FN_LINES {
                    found.push(format!(
                        "{}:{line}: fn {name} is {len} lines",
                        file.display()
                    ));
                }
            }
        }
    }
    found
}

#[test]
fn no_file_over_400_lines_and_no_function_over_80_in_any_crate() {
    let found = oversized();
    assert!(
        found.is_empty(),
        "over the size rules:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_guard_measures_bodies_and_ignores_braces_in_literals_and_declarations() {
    let src = "trait T { fn decl(&self); }\nfn a() {\n    let s = \"}}}\";\n    // }\n    let c = '}';\n}\nfn b(f: fn(u8) -> u8) -> u8 { f(1) }\n";
    let found = functions(&code_only(src));
    let got: Vec<(&str, usize, usize)> =
        found.iter().map(|(n, l, s)| (n.as_str(), *l, *s)).collect();
    assert_eq!(got, vec![("a", 2, 5), ("b", 7, 1)]);
}
