//! Redis's glob patterns (`*`, `?`, `[abc]`, `[^a-z]`, `\x`), for SCAN's MATCH and CONFIG GET.
//!
//! The matcher keeps one backtracking point (the last `*`), so it takes at most
//! pattern length x subject length steps whatever the pattern: a client cannot make the server
//! spin with a pattern such as `*a*a*a*a*b` (Redis's recursive matcher can).

/// Whether `subject` matches `pattern`.
pub fn matches(pattern: &[u8], subject: &[u8]) -> bool {
    let (mut p, mut s) = (0usize, 0usize);
    // After the last `*`: where in the pattern to resume, and the subject position it absorbed to.
    let mut star: Option<(usize, usize)> = None;
    while s < subject.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p + 1, s));
            p += 1;
            continue;
        }
        if let Some((matched, next)) = single(pattern, p, subject[s]) {
            if matched {
                p = next;
                s += 1;
                continue;
            }
        }
        match star {
            Some((resume, absorbed)) => {
                p = resume;
                s = absorbed + 1;
                star = Some((resume, absorbed + 1));
            }
            None => return false,
        }
    }
    pattern[p.min(pattern.len())..]
        .iter()
        .all(|&byte| byte == b'*')
}

/// Matches one subject byte against the pattern element at `p` (not `*`): whether it matched and
/// where the next element starts; `None` at the pattern's end.
fn single(pattern: &[u8], p: usize, byte: u8) -> Option<(bool, usize)> {
    let &first = pattern.get(p)?;
    match first {
        b'?' => Some((true, p + 1)),
        b'\\' if p + 1 < pattern.len() => Some((pattern[p + 1] == byte, p + 2)),
        b'[' => {
            let mut at = p + 1;
            let negate = pattern.get(at) == Some(&b'^');
            if negate {
                at += 1;
            }
            let mut matched = false;
            while at < pattern.len() && pattern[at] != b']' {
                if pattern[at] == b'\\' && at + 1 < pattern.len() {
                    matched |= pattern[at + 1] == byte;
                    at += 2;
                } else if at + 2 < pattern.len()
                    && pattern[at + 1] == b'-'
                    && pattern[at + 2] != b']'
                {
                    let (low, high) = if pattern[at] <= pattern[at + 2] {
                        (pattern[at], pattern[at + 2])
                    } else {
                        (pattern[at + 2], pattern[at])
                    };
                    matched |= (low..=high).contains(&byte);
                    at += 3;
                } else {
                    matched |= pattern[at] == byte;
                    at += 1;
                }
            }
            // An unclosed class runs to the pattern's end, as in Redis.
            Some((matched != negate, (at + 1).min(pattern.len())))
        }
        literal => Some((literal == byte, p + 1)),
    }
}

/// The literal bytes every match must start with (the pattern up to its first special byte).
pub fn literal_prefix(pattern: &[u8]) -> &[u8] {
    let end = pattern
        .iter()
        .position(|byte| matches!(byte, b'*' | b'?' | b'[' | b'\\'))
        .unwrap_or(pattern.len());
    &pattern[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_matches_like_redis() {
        let cases: [(&str, &str, bool); 16] = [
            ("*", "", true),
            ("*", "anything", true),
            ("user:*", "user:1", true),
            ("user:*", "use", false),
            ("h?llo", "hello", true),
            ("h?llo", "hllo", false),
            ("h*llo", "heeeello", true),
            ("h[ae]llo", "hallo", true),
            ("h[ae]llo", "hillo", false),
            ("h[^e]llo", "hallo", true),
            ("h[^e]llo", "hello", false),
            ("h[a-b]llo", "hbllo", true),
            ("a\\*b", "a*b", true),
            ("a\\*b", "axb", false),
            (
                "*a*a*a*a*a*b",
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                false,
            ),
            ("save", "save", true),
        ];
        for (pattern, subject, expected) in cases {
            assert_eq!(
                matches(pattern.as_bytes(), subject.as_bytes()),
                expected,
                "{pattern} ~ {subject}"
            );
        }
    }

    #[test]
    fn glob_literal_prefix_stops_at_the_first_special_byte() {
        assert_eq!(literal_prefix(b"user:*"), b"user:");
        assert_eq!(literal_prefix(b"a?b*"), b"a");
        assert_eq!(literal_prefix(b"*"), b"");
        assert_eq!(literal_prefix(b"exact"), b"exact");
    }
}
