//! Splits a rule text into fields and actions, remembering each one's column.

/// A piece of the rule text and the 1-based character column where it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Token {
    pub(super) column: usize,
    pub(super) text: String,
}

fn is_separator(c: char) -> bool {
    c == ',' || c.is_whitespace()
}

/// The 1-based column of byte offset `at` (which must be on a character boundary or the end).
pub(super) fn column_at(text: &str, at: usize) -> usize {
    text.get(..at).map_or(0, |s| s.chars().count()) + 1
}

/// The match fields (separated by commas or spaces), and what follows `actions=` (which
/// runs to the end of the text), if it is there.
pub(super) fn split_fields(text: &str) -> (Vec<Token>, Option<Token>) {
    let chars: Vec<char> = text.chars().collect();
    let mut fields = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if is_separator(chars[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && !is_separator(chars[i]) {
            i += 1;
        }
        let word: String = chars[start..i].iter().collect();
        if word.starts_with("actions=") {
            let from = start + "actions=".len();
            let actions = Token {
                column: from + 1,
                text: chars[from..].iter().collect(),
            };
            return (fields, Some(actions));
        }
        fields.push(Token {
            column: start + 1,
            text: word,
        });
    }
    (fields, None)
}

/// The comma-separated actions, each trimmed of surrounding spaces.
pub(super) fn split_actions(actions: &Token) -> Vec<Token> {
    let mut items = Vec::new();
    let mut offset = 0;
    for piece in actions.text.split(',') {
        let leading = piece.chars().take_while(|c| c.is_whitespace()).count();
        items.push(Token {
            column: actions.column + offset + leading,
            text: piece.trim().to_string(),
        });
        offset += piece.chars().count() + 1;
    }
    items
}
