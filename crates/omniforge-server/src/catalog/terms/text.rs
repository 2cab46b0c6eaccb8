//! Text into search terms, the same way for a tool's fields and for a query: Unicode NFKC
//! normalisation and lower-casing (simple case folding), words split on everything that is
//! not a letter or a digit, then inside a word at camelCase humps and letter/digit
//! boundaries (`getHTTPResponse2` → `get`, `http`, `response`, `2`); a CJK or other
//! unspaced-script character is a word of its own. With stemming on, English words are
//! reduced to their Snowball stem (`forecasts` → `forecast`). English stop words (`the`,
//! `of`, ...: Lucene's list) are no terms: they match nearly every tool, so they cost a query
//! time and change no ranking.

use rust_stemmers::{Algorithm, Stemmer};
use unicode_normalization::UnicodeNormalization;

/// The longest term kept, in bytes (a hostile 1 MB "word" is cut, not indexed whole; a term
/// fits the index's inline key).
pub(crate) const MAX_TERM_BYTES: usize = 23;

/// Whether `word` is one of Lucene's English stop words.
fn is_stop_word(word: &str) -> bool {
    matches!(
        word,
        "a" | "an"
            | "and"
            | "are"
            | "as"
            | "at"
            | "be"
            | "but"
            | "by"
            | "for"
            | "if"
            | "in"
            | "into"
            | "is"
            | "it"
            | "no"
            | "not"
            | "of"
            | "on"
            | "or"
            | "such"
            | "that"
            | "the"
            | "their"
            | "then"
            | "there"
            | "these"
            | "they"
            | "this"
            | "to"
            | "was"
            | "will"
            | "with"
    )
}

/// How text becomes terms.
pub(crate) struct Analyzer {
    stemmer: Option<Stemmer>,
}

impl Analyzer {
    /// An analyzer; `stem`: reduce English words to their stems.
    pub(crate) fn new(stem: bool) -> Analyzer {
        Analyzer {
            stemmer: stem.then(|| Stemmer::create(Algorithm::English)),
        }
    }

    /// Calls `emit` with each term of `text`, in order.
    pub(crate) fn terms(&self, text: &str, emit: &mut dyn FnMut(&str)) {
        let mut word = String::new();
        let mut piece = String::new();
        let mut each = |c: char| {
            if c.is_alphanumeric() && !is_unspaced(c) {
                word.push(c);
                return;
            }
            self.word(&word, &mut piece, emit);
            word.clear();
            if is_unspaced(c) {
                let mut one = [0u8; 4];
                emit(c.encode_utf8(&mut one));
            }
        };
        // ASCII is its own NFKC form.
        if text.is_ascii() {
            text.chars().for_each(&mut each);
        } else {
            text.nfkc().for_each(&mut each);
        }
        self.word(&word, &mut piece, emit);
    }

    /// The terms of one word (letters and digits only), split at humps and digits.
    fn word(&self, word: &str, piece: &mut String, emit: &mut dyn FnMut(&str)) {
        let chars: Vec<char> = word.chars().collect();
        let mut start = 0;
        for i in 1..=chars.len() {
            if i == chars.len() || boundary(chars[i - 1], chars[i], chars.get(i + 1).copied()) {
                piece.clear();
                for c in &chars[start..i] {
                    piece.extend(c.to_lowercase());
                }
                self.piece(piece, emit);
                start = i;
            }
        }
    }

    fn piece(&self, piece: &str, emit: &mut dyn FnMut(&str)) {
        if is_stop_word(piece) {
            return;
        }
        let piece = cut(piece, MAX_TERM_BYTES);
        match &self.stemmer {
            Some(stemmer) if piece.len() > 3 && piece.chars().all(|c| c.is_ascii_lowercase()) => {
                emit(&stemmer.stem(piece));
            }
            _ => emit(piece),
        }
    }
}

/// Whether a word splits between `a` and `b` (`c` follows `b`): lower to upper (`getX`),
/// the last capital of a run before a lower-case letter (`HTTPServer`), letter to digit and
/// digit to letter.
fn boundary(a: char, b: char, c: Option<char>) -> bool {
    (a.is_lowercase() && b.is_uppercase())
        || (a.is_uppercase() && b.is_uppercase() && c.is_some_and(char::is_lowercase))
        || (a.is_numeric() != b.is_numeric())
}

/// Scripts written without spaces between words: each character is a term.
fn is_unspaced(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // Hiragana, Katakana
        | 0x3400..=0x4DBF    // CJK extension A
        | 0x4E00..=0x9FFF    // CJK unified ideographs
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xF900..=0xFAFF    // CJK compatibility ideographs
        | 0x20000..=0x2FA1F) // CJK extensions B and on
}

/// `s` cut to at most `max` bytes at a character boundary.
fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(a: &Analyzer, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        a.terms(text, &mut |t| out.push(t.to_owned()));
        out
    }

    #[test]
    fn names_split_on_separators_humps_and_digits() {
        let a = Analyzer::new(false);
        assert_eq!(
            terms(&a, "get_weatherForecast-v2.HTTPServer"),
            ["get", "weather", "forecast", "v", "2", "http", "server"]
        );
        assert_eq!(terms(&a, "bench_tool_00042"), ["bench", "tool", "00042"]);
    }

    #[test]
    fn text_is_normalised_and_case_folded() {
        let a = Analyzer::new(false);
        // Full-width letters (NFKC), a ligature, Greek capitals.
        assert_eq!(terms(&a, "ＣＳＶ ﬁle ΣΟΦΙΑ"), ["csv", "file", "σοφια"]);
        assert_eq!(terms(&a, "Café"), terms(&a, "cafe\u{301}"));
        assert_eq!(terms(&a, "必应搜索"), ["必", "应", "搜", "索"]);
    }

    #[test]
    fn stemming_joins_word_forms_and_leaves_the_rest() {
        let a = Analyzer::new(true);
        assert_eq!(terms(&a, "forecasts Searching"), ["forecast", "search"]);
        assert_eq!(terms(&a, "the_name of a tool"), ["name", "tool"]);
        assert_eq!(terms(&a, "v2 csv ünïcode"), ["v", "2", "csv", "ünïcode"]);
    }

    #[test]
    fn hostile_words_are_cut() {
        let a = Analyzer::new(true);
        let long = "é".repeat(10_000);
        let t = terms(&a, &long);
        assert_eq!(t.len(), 1);
        assert!(t[0].len() <= MAX_TERM_BYTES);
    }
}
