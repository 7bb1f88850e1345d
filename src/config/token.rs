//! A bearer token: a secret compared in constant time and shown nowhere. The admin endpoints
//! require one (`[admin] token_file`); it lives with the config that reads it.

/// A token must fit in a request head along with the rest of it.
pub const TOKEN_BYTES_MAX: usize = 1024;

/// The bearer token the admin endpoints require: 1 to [`TOKEN_BYTES_MAX`] visible ASCII
/// characters. Its `Debug` hides it, it has no `Display`, and equality is
/// [`Token::matches`], so it neither leaks into logs nor through timing.
#[derive(Clone)]
pub struct Token(Box<[u8]>);

impl Token {
    /// Checks `text` as given (trim it first if it came from a file); the error says what is
    /// wrong without repeating the token.
    pub fn new(text: &str) -> Result<Token, String> {
        if text.is_empty() {
            return Err("the token is empty".into());
        }
        if text.len() > TOKEN_BYTES_MAX {
            return Err(format!(
                "the token is {} bytes; at most {TOKEN_BYTES_MAX} fit in a request head",
                text.len()
            ));
        }
        // Only these can travel in an `Authorization` header as they are.
        if !text.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(
                "the token has a space, control or non-ASCII character, which an \
                 Authorization header cannot carry"
                    .into(),
            );
        }
        Ok(Token(text.as_bytes().into()))
    }

    /// Whether `presented` is this token, in time that depends only on `presented.len()`:
    /// every byte is compared (no early exit), and a presented token of another length is
    /// compared against the real one repeated, so neither its content nor its length shows.
    pub fn matches(&self, presented: &[u8]) -> bool {
        let want = &self.0;
        let mut diff = want.len() ^ presented.len();
        for (i, &p) in presented.iter().enumerate() {
            diff |= usize::from(want[i % want.len()] ^ p);
            // Keeps the optimiser from turning the loop into an early exit.
            diff = std::hint::black_box(diff);
        }
        diff == 0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl PartialEq for Token {
    fn eq(&self, other: &Token) -> bool {
        self.matches(&other.0)
    }
}

impl Eq for Token {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_matches_only_itself_whatever_the_length() {
        let t = Token::new("s3cret-token").unwrap();
        assert!(t.matches(b"s3cret-token"));
        for wrong in [
            &b""[..],
            b"s3cret",
            b"s3cret-token!",
            b"s3cret-tokem",
            b"S3cret-token",
            b"s3cret-tokens3cret-token",
        ] {
            assert!(!t.matches(wrong), "{:?}", String::from_utf8_lossy(wrong));
        }
        assert_eq!(t, Token::new("s3cret-token").unwrap());
        assert_ne!(t, Token::new("other").unwrap());
    }

    #[test]
    fn token_refuses_what_a_header_cannot_carry_without_repeating_it() {
        assert!(Token::new("").is_err());
        for bad in ["with space", "tab\there", "nl\n", "caf\u{e9}"] {
            let e = Token::new(bad).unwrap_err();
            assert!(!e.contains(bad), "{e}");
        }
        let long = "x".repeat(TOKEN_BYTES_MAX + 1);
        assert!(Token::new(&long).unwrap_err().contains("1025 bytes"));
        assert!(Token::new(&long[1..]).is_ok());
    }

    #[test]
    fn token_debug_is_redacted() {
        let t = Token::new("hunter2").unwrap();
        let shown = format!("{t:?} {:?}", Some(&t));
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
    }
}
