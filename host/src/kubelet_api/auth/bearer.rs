//! The bearer token of an `Authorization` header, read as the apiserver's bearertoken
//! authenticator reads it.

use axum::http::HeaderValue;

/// The token of `Authorization: Bearer <token>`; `None` for any other scheme, a header that is
/// not visible ASCII, or an empty token, all of which count as no credentials.
pub fn bearer_token(authorization: Option<&HeaderValue>) -> Option<&str> {
    let value = authorization?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim();
    // A token never holds whitespace; one that does is malformed, not a token to review.
    if token.is_empty() || token.contains(char::is_whitespace) {
        return None;
    }
    Some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token_of(header: &str) -> Option<String> {
        let value = HeaderValue::from_str(header).expect("a valid header value");
        bearer_token(Some(&value)).map(str::to_string)
    }

    #[test]
    fn bearer_scheme_is_case_insensitive_and_trimmed() {
        assert_eq!(token_of("Bearer abc"), Some("abc".to_string()));
        assert_eq!(token_of("bearer abc"), Some("abc".to_string()));
        assert_eq!(token_of("BEARER   abc  "), Some("abc".to_string()));
        assert_eq!(token_of("  Bearer abc"), Some("abc".to_string()));
    }

    #[test]
    fn other_schemes_and_empty_tokens_are_no_credentials() {
        assert_eq!(token_of("Basic dXNlcjpwYXNz"), None);
        assert_eq!(token_of("Bearer"), None);
        assert_eq!(token_of("Bearer    "), None);
        assert_eq!(token_of("Bearerabc"), None);
        assert_eq!(token_of("Bearer a b"), None);
        assert_eq!(token_of(""), None);
        assert_eq!(bearer_token(None), None);
    }
}
