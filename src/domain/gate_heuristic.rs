//! The gate's heuristic feature extractor, used when no gate model is configured (and combined
//! with the model's features when one is, so that a model missing a side effect cannot route a
//! destructive goal past planning).
//!
//! It is deliberately crude and errs towards planning: any write verb counts as a side effect,
//! and an enumeration ("services A, B and C", "3 files", "every user") counts as several targets.

use super::{FeatureSource, GateFeatures};

/// Only this many leading tokens of a goal are read.
const MAX_TOKENS: usize = 2_000;

/// Verbs whose any inflection marks a goal as touching writes.
const WRITE_VERBS: &[&str] = &[
    "deploy",
    "delete",
    "remove",
    "drop",
    "destroy",
    "send",
    "email",
    "pay",
    "transfer",
    "refund",
    "rename",
    "patch",
    "edit",
    "write",
    "update",
    "modify",
    "create",
    "publish",
    "push",
    "merge",
    "commit",
    "install",
    "uninstall",
    "restart",
    "stop",
    "kill",
    "migrate",
    "upload",
    "purchase",
    "buy",
    "cancel",
    "replace",
    "fix",
    "overwrite",
    "insert",
    "move",
    "approve",
    "revoke",
    "grant",
    "reset",
    "truncate",
    "rollback",
    "submit",
    "notify",
];

/// Irregular forms the suffix rules miss.
const IRREGULAR_WRITES: &[&str] = &["sent", "paid", "wrote", "written", "rewrote", "bought"];

/// Verbs that read; each one counts as roughly one tool call per target.
const READ_VERBS: &[&str] = &[
    "find",
    "search",
    "list",
    "look",
    "check",
    "get",
    "fetch",
    "read",
    "count",
    "run",
    "compare",
    "summarize",
    "summarise",
    "analyze",
    "analyse",
    "inspect",
    "query",
    "download",
    "calculate",
    "compute",
    "show",
    "verify",
    "lookup",
];

/// Plural nouns that introduce several targets.
const TARGET_NOUNS: &[&str] = &[
    "services",
    "files",
    "repos",
    "repositories",
    "users",
    "people",
    "hosts",
    "servers",
    "machines",
    "tables",
    "databases",
    "endpoints",
    "customers",
    "accounts",
    "branches",
    "projects",
    "modules",
    "packages",
    "teams",
    "clusters",
    "regions",
    "environments",
    "apps",
    "applications",
    "sites",
    "buckets",
    "documents",
    "pages",
    "tickets",
    "issues",
    "emails",
    "recipients",
    "vendors",
    "invoices",
    "components",
    "microservices",
    "nodes",
    "pods",
    "containers",
    "functions",
    "directories",
    "folders",
    "records",
    "orders",
];

const QUANTIFIERS: &[&str] = &[
    "all", "every", "each", "both", "multiple", "several", "many",
];

const NUMBER_WORDS: &[&str] = &[
    "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
];

/// Words that end an enumeration item ("in services A and B to ...").
const STOP_WORDS: &[&str] = &[
    "to", "with", "in", "on", "for", "from", "so", "then", "that", "which", "by", "into", "of",
    "using", "via", "if", "when", "before", "after", "the",
];

const QUESTION_WORDS: &[&str] = &[
    "what", "who", "when", "where", "which", "how", "is", "are", "does", "do", "can", "why",
];

#[derive(Debug, Clone, PartialEq)]
struct Token {
    text: String,
    lower: String,
}

impl Token {
    fn is_separator(&self) -> bool {
        matches!(self.lower.as_str(), "," | "and" | "or" | "&")
    }
    fn is_punct(&self) -> bool {
        self.text.chars().all(|c| !c.is_alphanumeric())
    }
    /// An item of a bare enumeration must look like a name: capitalised, or an identifier.
    fn looks_like_name(&self) -> bool {
        self.text.chars().next().is_some_and(char::is_uppercase)
            || self.text.contains(['.', '/', '_'])
            || self.text.chars().any(|c| c.is_ascii_digit())
    }
}

/// Extracts gate features from the goal text. `side_effect_tools` are registered tools marked
/// as side-effecting; a goal that names one touches writes.
pub fn heuristic_features(goal: &str, side_effect_tools: &[&str]) -> GateFeatures {
    let mut tokens = tokenize(goal);
    // Enumeration scanning is quadratic in the worst case; the gist of a goal is in its start.
    tokens.truncate(MAX_TOKENS);
    let words: Vec<&str> = tokens.iter().map(|t| t.lower.as_str()).collect();
    let lower_goal = goal.to_lowercase();
    let touches_writes = words.iter().any(|w| is_write(w))
        || side_effect_tools
            .iter()
            .any(|tool| !tool.is_empty() && lower_goal.contains(&tool.to_lowercase()));
    let targets = count_targets(&tokens).max(1);
    let actions = words
        .iter()
        .filter(|w| is_write(w) || READ_VERBS.iter().any(|v| verb_form(w, v)))
        .count() as u32;
    let question =
        goal.trim_end().ends_with('?') || words.first().is_some_and(|w| QUESTION_WORDS.contains(w));
    let goal_kind = if touches_writes {
        "change"
    } else if question {
        "lookup"
    } else {
        "task"
    };
    GateFeatures {
        est_tool_calls: actions.max(1).saturating_mul(targets).min(100),
        touches_writes,
        targets,
        goal_kind: goal_kind.into(),
        direct_history: None,
        source: FeatureSource::Heuristic,
    }
}

/// Words (letters, digits and `._-/` inside identifiers) and single punctuation marks. A
/// trailing `.` is sentence punctuation, not part of the word.
fn tokenize(text: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut word = String::new();
    let flush = |word: &mut String, tokens: &mut Vec<Token>| {
        let trimmed = word.trim_end_matches(['.', '-', '/']);
        if !trimmed.is_empty() {
            tokens.push(Token {
                text: trimmed.to_string(),
                lower: trimmed.to_lowercase(),
            });
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_alphanumeric() || (matches!(c, '.' | '_' | '-' | '/') && !word.is_empty()) {
            word.push(c);
        } else {
            flush(&mut word, &mut tokens);
            if !c.is_whitespace() {
                tokens.push(Token {
                    text: c.to_string(),
                    lower: c.to_string(),
                });
            }
        }
    }
    flush(&mut word, &mut tokens);
    tokens
}

fn is_write(word: &str) -> bool {
    IRREGULAR_WRITES.contains(&word) || WRITE_VERBS.iter().any(|v| verb_form(word, v))
}

/// True when `word` is `verb` or a regular inflection of it (s, es, d, ed, ing, with the final
/// `e` dropped or the final consonant doubled).
fn verb_form(word: &str, verb: &str) -> bool {
    if word == verb {
        return true;
    }
    let stem = verb.strip_suffix('e').unwrap_or(verb);
    let mut forms = vec![
        format!("{verb}s"),
        format!("{verb}es"),
        format!("{verb}d"),
        format!("{stem}ed"),
        format!("{stem}ing"),
    ];
    if let Some(last) = verb.chars().last().filter(|_| stem == verb) {
        forms.push(format!("{verb}{last}ed"));
        forms.push(format!("{verb}{last}ing"));
    }
    forms.iter().any(|f| f == word)
}

/// The largest number of targets any enumeration in the goal names.
fn count_targets(tokens: &[Token]) -> u32 {
    let mut best = 1u32;
    for (i, token) in tokens.iter().enumerate() {
        if TARGET_NOUNS.contains(&token.lower.as_str()) {
            if let Some(prev) = i.checked_sub(1).map(|p| tokens[p].lower.as_str()) {
                if let Ok(n) = prev.parse::<u32>() {
                    best = best.max(n);
                } else if let Some(n) = NUMBER_WORDS.iter().position(|w| *w == prev) {
                    best = best.max(n as u32 + 2);
                } else if QUANTIFIERS.contains(&prev) {
                    best = best.max(2);
                }
            }
            best = best.max(enumeration(&tokens[i + 1..], |_| true));
        } else if i == 0 || tokens[i - 1].is_punct() || !tokens[i - 1].looks_like_name() {
            // A bare enumeration of names: "Paris, London and Rome".
            let items = enumeration(&tokens[i..], Token::looks_like_name);
            if items >= 2 {
                best = best.max(items);
            }
        }
    }
    best
}

/// Counts items of the form `ITEM (, | and | or | &)+ ITEM ...` at the start of `tokens`, where
/// an item is one to three words accepted by `item_ok` and not stop words. One item is not an
/// enumeration and counts as 1.
fn enumeration(tokens: &[Token], item_ok: impl Fn(&Token) -> bool) -> u32 {
    let mut items = 0u32;
    let mut i = 0;
    loop {
        let start = i;
        while i < tokens.len()
            && i - start < 3
            && !tokens[i].is_separator()
            && !tokens[i].is_punct()
            && !STOP_WORDS.contains(&tokens[i].lower.as_str())
            && item_ok(&tokens[i])
        {
            i += 1;
        }
        if i == start {
            break;
        }
        items += 1;
        let before = i;
        while i < tokens.len() && tokens[i].is_separator() {
            i += 1;
        }
        if i == before {
            break;
        }
    }
    items
}

#[cfg(test)]
#[path = "gate_heuristic_tests.rs"]
mod tests;
