//! Shell quoting for the bootstrap script: every value from the pod reaches bash as one
//! single-quoted word, so nothing in it (`$()`, backticks, quotes, newlines) is interpreted.

/// `text` as one bash word that bash reads back byte for byte. Words made only of characters
/// bash never treats specially are left bare, for readability; everything else is
/// single-quoted, with each `'` written as `'\''`.
///
/// # Caveats
/// A NUL byte cannot be passed through bash at all; callers reject text containing one.
pub(crate) fn quote(text: &str) -> String {
    let bare = |c: char| c.is_ascii_alphanumeric() || "_./:=@%+,-".contains(c);
    if !text.is_empty() && text.chars().all(bare) {
        return text.to_owned();
    }
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('\'');
    for c in text.chars() {
        if c == '\'' {
            quoted.push_str(r"'\''");
        } else {
            quoted.push(c);
        }
    }
    quoted.push('\'');
    quoted
}

/// One shell word assembled from pieces: text from the pod (quoted) and expansions of the
/// bootstrap's own variables (double-quoted, so they stay one word), e.g.
/// `'ADDR='"${orca_ip}"':8080'`.
#[derive(Default)]
pub(crate) struct Word(String);

impl Word {
    pub(crate) fn text(mut self, text: &str) -> Word {
        if !text.is_empty() {
            self.0.push_str(&quote(text));
        }
        self
    }

    /// `expansion` is trusted script text such as `${orca_ip}` or `$(( … ))`.
    pub(crate) fn expansion(mut self, expansion: &str) -> Word {
        self.0.push('"');
        self.0.push_str(expansion);
        self.0.push('"');
        self
    }

    pub(crate) fn finish(self) -> String {
        if self.0.is_empty() {
            "''".to_owned()
        } else {
            self.0
        }
    }
}

/// The words bash makes of `words` after running `setup`, for tests that prove what a
/// generated script passes on.
#[cfg(test)]
pub(crate) fn bash_words(setup: &str, words: &str) -> Vec<String> {
    let output = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!("{setup}\nprintf '%s\\0' {words}"))
        .current_dir(std::env::temp_dir())
        .output()
        .expect("bash runs");
    assert!(output.status.success(), "{output:?}");
    let mut words: Vec<String> = String::from_utf8(output.stdout)
        .unwrap()
        .split('\0')
        .map(str::to_owned)
        .collect();
    words.pop();
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_text_reaches_bash_byte_for_byte_as_one_word() {
        let cases = [
            "",
            "plain",
            "two words",
            "it's",
            "''",
            "\"double\"",
            "$(touch pwned)",
            "`touch pwned`",
            "${HOME}",
            "$HOME",
            "line1\nline2\n",
            "tab\tcr\r",
            "back\\slash\\",
            "glob * ? [a]",
            "~user",
            "{a,b}",
            "a;b|c&d>e<f",
            "#not a comment",
            "!history",
            "-e",
            "ünïcødé ✓",
            "'$(x)'\"`y`\"",
        ];
        for case in cases {
            assert_eq!(
                bash_words("", &quote(case)),
                [case],
                "{case:?} quoted as {}",
                quote(case)
            );
        }
        assert!(!std::env::temp_dir().join("pwned").exists());
    }

    #[test]
    fn safe_words_stay_bare_and_the_rest_are_quoted() {
        assert_eq!(
            quote("nvidia/cuda:12.4-runtime"),
            "nvidia/cuda:12.4-runtime"
        );
        assert_eq!(quote("KEY=value"), "KEY=value");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
    }

    #[test]
    fn words_join_text_and_expansions_without_splitting() {
        let word = Word::default()
            .text("ADDR=it's ")
            .expansion("${ip}")
            .text(":80 $(x)")
            .finish();
        assert_eq!(
            bash_words("ip='1.2.3.4 5'", &word),
            ["ADDR=it's 1.2.3.4 5:80 $(x)"]
        );
        assert_eq!(bash_words("", &Word::default().finish()), [""]);
    }
}
