//! The gate's heuristic feature extractor, used when no gate model is configured (and combined
//! with the model's features when one is, so that a model missing a side effect cannot route a
//! destructive goal past planning).
//!
//! It is deliberately crude and errs towards planning: any write verb counts as a side effect,
//! and an enumeration ("services A, B and C", "3 files", "every user") counts as several targets.

use super::{FeatureSource, GateFeatures};

mod quoted;
mod vocab;
pub use quoted::unquoted;
use vocab::*;

#[derive(Debug, Clone, PartialEq)]
struct Token {
    text: String,
    lower: String,
}

impl Token {
    fn is_separator(&self) -> bool {
        matches!(self.lower.as_str(), "," | "and" | "or" | "&")
    }
    /// What a quoted span became ([`unquoted`]): a thing the goal works on.
    fn is_quote(&self) -> bool {
        self.lower == quoted::QUOTE
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
/// as side-effecting; a goal that names one touches writes. Quoted text is left out.
pub fn heuristic_features(goal: &str, side_effect_tools: &[&str]) -> GateFeatures {
    let goal = unquoted(goal);
    let goal = goal.as_str();
    let mut tokens = tokenize(goal);
    // Enumeration scanning is quadratic in the worst case; the gist of a goal is in its start.
    tokens.truncate(MAX_TOKENS);
    let words: Vec<&str> = tokens.iter().map(|t| t.lower.as_str()).collect();
    let question =
        goal.trim_end().ends_with('?') || words.first().is_some_and(|w| QUESTION_WORDS.contains(w));
    let writes: Vec<bool> = (0..words.len())
        .map(|i| {
            let object = tokens.get(i + 1);
            (is_write(words[i]) || (!question && is_ambiguous_write(words[i], object)))
                && !(question && names_a_state(words[i]))
        })
        .collect();
    let touches_writes =
        writes.contains(&true) || touches_a_writer(goal, &words, side_effect_tools, question);
    let targets = count_targets(&tokens).max(1);
    // A question about the world now needs one read, whatever verb it uses.
    let live = u32::from(words.iter().any(|w| LIVE_WORDS.contains(w)));
    let actions = (0..words.len())
        .filter(|i| writes[*i] || READ_VERBS.iter().any(|v| verb_form(words[*i], v)))
        .count() as u32
        + live;
    let goal_kind = if touches_writes {
        "change"
    } else if question {
        "lookup"
    } else {
        "task"
    };
    GateFeatures {
        est_tool_calls: actions.saturating_mul(targets).min(100),
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

/// In a question, a write verb's past or progressive form asks about a state or an event
/// ("which version is deployed?", "who deleted it?"); the plain verb ("can you delete ...?")
/// is still an action.
fn names_a_state(word: &str) -> bool {
    word.ends_with("ed") || word.ends_with("ing") || IRREGULAR_WRITES.contains(&word)
}

/// Whether the goal plausibly touches a side-effecting tool: it names the tool, or every part
/// of the tool's name (split at `_`, `-`, `.`; parts of three letters or more) appears in the
/// goal in some inflection ("drop the table" touches `drop_table`).
fn touches_a_writer(
    goal: &str,
    words: &[&str],
    side_effect_tools: &[&str],
    question: bool,
) -> bool {
    let lower_goal = goal.to_lowercase();
    side_effect_tools.iter().any(|tool| {
        let tool = tool.to_lowercase();
        let parts: Vec<&str> = tool
            .split(['_', '-', '.'])
            .filter(|p| p.len() >= 3)
            .collect();
        // In a question a state ("which version is deployed?") names no action on `deploy`.
        let acts = |w: &&&str| !(question && names_a_state(w));
        (!tool.is_empty() && !question && lower_goal.contains(&tool))
            || (!parts.is_empty()
                && parts.iter().all(|part| {
                    words
                        .iter()
                        .filter(acts)
                        .any(|w| verb_form(w, part) || w.strip_suffix('s') == Some(part))
                }))
    })
}

/// An [`AMBIGUOUS_WRITES`] verb followed by what reads as its object: a determiner, a
/// pronoun, a number, or a name ("tag v5.1.0").
fn is_ambiguous_write(word: &str, next: Option<&Token>) -> bool {
    AMBIGUOUS_WRITES.contains(&word)
        && next.is_some_and(|t| {
            t.is_quote()
                || OBJECT_STARTS.contains(&t.lower.as_str())
                || NUMBER_WORDS.contains(&t.lower.as_str())
                || t.text.chars().any(|c| c.is_ascii_digit())
        })
}

fn is_write(word: &str) -> bool {
    IRREGULAR_WRITES.contains(&word) || WRITE_VERBS.iter().any(|v| verb_form(word, v))
}

/// True when `word` is `verb` or a regular inflection of it (s, es, d, ed, ing, with the final
/// `e` dropped or the final consonant doubled). Allocates nothing: it runs for every word of a
/// goal against every verb of the vocabulary.
fn verb_form(word: &str, verb: &str) -> bool {
    if word == verb {
        return true;
    }
    let after_verb = word.strip_prefix(verb);
    if after_verb.is_some_and(|rest| matches!(rest, "s" | "es" | "d")) {
        return true;
    }
    let stem = verb.strip_suffix('e').unwrap_or(verb);
    if word
        .strip_prefix(stem)
        .is_some_and(|rest| matches!(rest, "ed" | "ing"))
    {
        return true;
    }
    // The final consonant doubled ("stop" -> "stopped"), only for verbs not ending in `e`.
    stem == verb
        && verb.chars().last().is_some_and(|last| {
            after_verb
                .and_then(|rest| rest.strip_prefix(last))
                .is_some_and(|rest| matches!(rest, "ed" | "ing"))
        })
}

/// The largest number of targets any enumeration in the goal names.
fn count_targets(tokens: &[Token]) -> u32 {
    let mut best = 1u32;
    for (i, token) in tokens.iter().enumerate() {
        if TARGET_NOUNS.contains(&token.lower.as_str()) {
            // The quantity may stand a determiner or two before the noun ("all its tables").
            let mut p = i.checked_sub(1);
            while let Some(q) = p.filter(|q| {
                i - q <= 2 && q > &0 && DETERMINERS.contains(&tokens[*q].lower.as_str())
            }) {
                p = Some(q - 1);
            }
            if let Some(prev) = p.map(|p| tokens[p].lower.as_str()) {
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

/// The named targets a goal enumerates after a target noun: "services A and B" gives `A`, `B`;
/// "service C" gives `C`; "the billing service" gives nothing (no name follows). Each is a
/// thing the goal is about, so a tool call must have touched it before the goal can be met.
pub fn goal_targets(goal: &str) -> Vec<String> {
    let mut tokens = tokenize(&unquoted(goal));
    tokens.truncate(MAX_TOKENS);
    let mut names: Vec<String> = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        let noun = token.lower.as_str();
        let singular = noun.strip_suffix('s').unwrap_or(noun);
        let is_target_noun = TARGET_NOUNS
            .iter()
            .any(|n| *n == noun || n.strip_suffix('s') == Some(singular));
        if !is_target_noun {
            continue;
        }
        let mut j = i + 1;
        while let Some(item) = tokens.get(j).filter(|t| {
            t.looks_like_name() && !t.is_punct() && !STOP_WORDS.contains(&t.lower.as_str())
        }) {
            // A name ends its item ("service A and ...", "service C."); one followed by another
            // word modifies it ("the customer CSV export") and is not a target.
            let ends_item = tokens.get(j + 1).is_none_or(|next| {
                next.is_separator() || next.is_punct() || STOP_WORDS.contains(&next.lower.as_str())
            });
            if !ends_item {
                break;
            }
            if !names.contains(&item.text) {
                names.push(item.text.clone());
            }
            j += 1;
            while tokens.get(j).is_some_and(Token::is_separator) {
                j += 1;
            }
        }
    }
    names
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
mod tests;
