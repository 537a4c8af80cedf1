//! Quoted text in a goal is material the goal works on ("Rewrite more clearly: \"pls restart
//! svc asap\""), not what the goal asks to be done: a verb or a name inside it is neither an
//! action nor a target. Its span is replaced by one `"` mark, which still reads as the object of
//! the verb before it.

/// The opening marks and the mark that closes each.
const PAIRS: [(char, char); 3] = [
    ('"', '"'),
    ('\u{201c}', '\u{201d}'),
    ('\u{2018}', '\u{2019}'),
];

/// What a quoted span becomes.
pub(super) const QUOTE: &str = "\"";

/// `text` with every closed quoted span replaced by [`QUOTE`]. An opening mark that is never
/// closed is kept as it is, with the text after it.
pub fn unquoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some((start, open)) = rest.char_indices().find(|(_, c)| opens(*c)) {
        out.push_str(&rest[..start]);
        let after = &rest[start + open.len_utf8()..];
        match after.find(closing(open)) {
            Some(end) => {
                out.push_str(QUOTE);
                rest = &after[end + closing(open).len_utf8()..];
            }
            None => {
                out.push(open);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn opens(c: char) -> bool {
    PAIRS.iter().any(|(open, _)| *open == c)
}

fn closing(open: char) -> char {
    PAIRS
        .iter()
        .find(|(o, _)| *o == open)
        .map_or(open, |(_, close)| *close)
}

#[cfg(test)]
mod tests {
    use super::unquoted;

    #[test]
    fn a_quoted_span_becomes_one_mark() {
        assert_eq!(
            unquoted("Rewrite more clearly: \"pls restart svc asap its down\"."),
            "Rewrite more clearly: \"."
        );
        assert_eq!(
            unquoted("Post \u{201c}deploy done\u{201d} and \u{2018}ok\u{2019} to ops"),
            "Post \" and \" to ops"
        );
    }

    #[test]
    fn an_unclosed_mark_and_an_apostrophe_stay() {
        assert_eq!(unquoted("Say \"hello to Bob"), "Say \"hello to Bob");
        assert_eq!(unquoted("Restart Bob's service"), "Restart Bob's service");
        assert_eq!(unquoted("no quotes"), "no quotes");
    }
}
