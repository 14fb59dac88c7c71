//! RESP2, the Redis protocol, at the server's boundary: a parser of the requests clients send
//! (arrays of bulk strings, and the inline form a person types into telnet) and the writer of
//! replies.
//!
//! The parser never trusts a declared length: an array longer than [`Limits::arguments_max`], a
//! bulk string longer than [`Limits::bulk_bytes_max`], or an inline line longer than
//! [`Limits::inline_bytes_max`] is a [`ProtocolError`] before any byte of it is buffered, so the
//! memory a connection holds is bounded by its limits whatever a client declares. A request that
//! has not fully arrived is `Ok(None)`: the caller reads more and asks again (parsing restarts at
//! the request's first byte, which costs a pass over its headers, not its payload).

use std::fmt;

/// Bounds on one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most arguments in one request (the command name included).
    pub arguments_max: usize,
    /// Longest bulk string, in bytes.
    pub bulk_bytes_max: usize,
    /// Longest inline request line, in bytes.
    pub inline_bytes_max: usize,
}

/// Longest header line (`*N` or `$N`): a sign, 20 digits and CRLF fit with room to spare.
const HEADER_BYTES_MAX: usize = 32;

/// Why a request cannot be parsed. The connection that sent it is answered with the error and
/// closed, as Redis does: after a framing error the stream's boundaries are unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    /// An array header that is not `*` followed by a decimal count.
    InvalidMultibulkLength,
    /// An array of more arguments than the limit.
    TooManyArguments {
        /// Arguments declared.
        count: u64,
        /// The limit.
        max: usize,
    },
    /// A bulk header that is not `$` followed by a decimal length.
    InvalidBulkLength,
    /// A bulk string longer than the limit.
    BulkTooLong {
        /// Bytes declared.
        len: u64,
        /// The limit.
        max: usize,
    },
    /// Something other than `$` where an argument's header belongs.
    ExpectedBulk(u8),
    /// A bulk string not followed by CRLF.
    MissingCrlf,
    /// An inline request line longer than the limit.
    InlineTooLong {
        /// The limit.
        max: usize,
    },
    /// An inline request with an unbalanced quote.
    UnbalancedQuotes,
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::InvalidMultibulkLength => write!(f, "invalid multibulk length"),
            ProtocolError::TooManyArguments { count, max } => {
                write!(
                    f,
                    "invalid multibulk length: {count} arguments, more than {max}"
                )
            }
            ProtocolError::InvalidBulkLength => write!(f, "invalid bulk length"),
            ProtocolError::BulkTooLong { len, max } => {
                write!(f, "invalid bulk length: {len} bytes, more than {max}")
            }
            ProtocolError::ExpectedBulk(byte) => {
                write!(
                    f,
                    "expected '$', got '{}'",
                    char::from(*byte).escape_default()
                )
            }
            ProtocolError::MissingCrlf => write!(f, "bulk string not followed by CRLF"),
            ProtocolError::InlineTooLong { max } => {
                write!(f, "too big inline request: more than {max} bytes")
            }
            ProtocolError::UnbalancedQuotes => write!(f, "unbalanced quotes in request"),
        }
    }
}

impl std::error::Error for ProtocolError {}

/// One request: its arguments, the command name first (empty for a blank inline line).
pub type Request = Vec<Vec<u8>>;

/// Parses the request at the start of `buffer`: `Ok(Some((request, bytes consumed)))`, `Ok(None)`
/// if it has not fully arrived, or the framing error.
pub fn parse(buffer: &[u8], limits: &Limits) -> Result<Option<(Request, usize)>, ProtocolError> {
    match buffer.first() {
        None => Ok(None),
        Some(b'*') => parse_array(buffer, limits),
        Some(_) => parse_inline(buffer, limits),
    }
}

/// The line starting at `at` (without its CRLF) and the offset after it; `Ok(None)` if its end has
/// not arrived. A header longer than [`HEADER_BYTES_MAX`] is `error`.
fn header_line(
    buffer: &[u8],
    at: usize,
    error: ProtocolError,
) -> Result<Option<(&[u8], usize)>, ProtocolError> {
    let window = &buffer[at..buffer.len().min(at + HEADER_BYTES_MAX)];
    match window.iter().position(|&byte| byte == b'\n') {
        Some(end) => {
            let line = &window[..end];
            let line = line.strip_suffix(b"\r").ok_or(error)?;
            Ok(Some((line, at + end + 1)))
        }
        None if window.len() == HEADER_BYTES_MAX => Err(error),
        None => Ok(None),
    }
}

/// A decimal count: optional minus sign, then digits only.
fn decimal(digits: &[u8]) -> Option<i64> {
    let (negative, digits) = match digits.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, digits),
    };
    if digits.is_empty() || digits.len() > 18 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let value = digits
        .iter()
        .fold(0i64, |value, &digit| value * 10 + i64::from(digit - b'0'));
    Some(if negative { -value } else { value })
}

fn parse_array(buffer: &[u8], limits: &Limits) -> Result<Option<(Request, usize)>, ProtocolError> {
    let Some((line, mut at)) = header_line(buffer, 0, ProtocolError::InvalidMultibulkLength)?
    else {
        return Ok(None);
    };
    let count = decimal(&line[1..]).ok_or(ProtocolError::InvalidMultibulkLength)?;
    // `*0` and `*-1` are empty requests, which Redis skips.
    let count = u64::try_from(count).unwrap_or(0);
    if count > limits.arguments_max as u64 {
        return Err(ProtocolError::TooManyArguments {
            count,
            max: limits.arguments_max,
        });
    }
    // The bound above makes this allocation safe: at most `arguments_max` empty vectors.
    let mut request = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let Some(&marker) = buffer.get(at) else {
            return Ok(None);
        };
        if marker != b'$' {
            return Err(ProtocolError::ExpectedBulk(marker));
        }
        let Some((line, after)) = header_line(buffer, at, ProtocolError::InvalidBulkLength)? else {
            return Ok(None);
        };
        let len = decimal(&line[1..]).ok_or(ProtocolError::InvalidBulkLength)?;
        let len = u64::try_from(len).map_err(|_| ProtocolError::InvalidBulkLength)?;
        if len > limits.bulk_bytes_max as u64 {
            return Err(ProtocolError::BulkTooLong {
                len,
                max: limits.bulk_bytes_max,
            });
        }
        let len = len as usize;
        let end = after + len;
        if buffer.len() < end + 2 {
            return Ok(None);
        }
        if &buffer[end..end + 2] != b"\r\n" {
            return Err(ProtocolError::MissingCrlf);
        }
        request.push(buffer[after..end].to_vec());
        at = end + 2;
    }
    Ok(Some((request, at)))
}

fn parse_inline(buffer: &[u8], limits: &Limits) -> Result<Option<(Request, usize)>, ProtocolError> {
    let window = &buffer[..buffer.len().min(limits.inline_bytes_max)];
    let Some(end) = window.iter().position(|&byte| byte == b'\n') else {
        if window.len() == limits.inline_bytes_max {
            return Err(ProtocolError::InlineTooLong {
                max: limits.inline_bytes_max,
            });
        }
        return Ok(None);
    };
    let line = &window[..end];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let request = split_inline(line)?;
    if request.len() > limits.arguments_max {
        return Err(ProtocolError::TooManyArguments {
            count: request.len() as u64,
            max: limits.arguments_max,
        });
    }
    Ok(Some((request, end + 1)))
}

/// Splits an inline line into words: whitespace separates them; double or single quotes group
/// a word with spaces in it (no escapes inside quotes beyond the closing quote itself).
fn split_inline(line: &[u8]) -> Result<Request, ProtocolError> {
    let mut words = Vec::new();
    let mut at = 0;
    while at < line.len() {
        if line[at].is_ascii_whitespace() {
            at += 1;
            continue;
        }
        if line[at] == b'"' || line[at] == b'\'' {
            let quote = line[at];
            let close = line[at + 1..]
                .iter()
                .position(|&byte| byte == quote)
                .ok_or(ProtocolError::UnbalancedQuotes)?;
            words.push(line[at + 1..at + 1 + close].to_vec());
            at += close + 2;
        } else {
            let end = line[at..]
                .iter()
                .position(u8::is_ascii_whitespace)
                .map_or(line.len(), |offset| at + offset);
            words.push(line[at..end].to_vec());
            at = end;
        }
    }
    Ok(words)
}

/// Parses `data` under small limits as a fuzz target does, and checks what comes back lies within
/// them (panics if not). Not part of the API.
#[doc(hidden)]
pub fn fuzz_input(data: &[u8]) {
    let limits = Limits {
        arguments_max: 16,
        bulk_bytes_max: 256,
        inline_bytes_max: 512,
    };
    let mut at = 0;
    while let Ok(Some((request, consumed))) = parse(&data[at..], &limits) {
        assert!(consumed > 0 && consumed <= data.len() - at);
        assert!(request.len() <= limits.arguments_max);
        assert!(request
            .iter()
            .all(|word| word.len() <= limits.inline_bytes_max));
        at += consumed;
    }
}

/// Replies, appended to a connection's output buffer.
pub struct Reply<'a>(pub &'a mut Vec<u8>);

impl Reply<'_> {
    /// `+text`: a status (text must hold no CR or LF).
    pub fn simple(&mut self, text: &str) {
        self.0.push(b'+');
        self.0.extend_from_slice(text.as_bytes());
        self.0.extend_from_slice(b"\r\n");
    }

    /// `+OK`.
    pub fn ok(&mut self) {
        self.simple("OK");
    }

    /// `-PREFIX message`: an error (CR and LF in the message become spaces, so it stays one line).
    pub fn error(&mut self, text: &str) {
        self.0.push(b'-');
        self.0.extend(text.bytes().map(|byte| {
            if byte == b'\r' || byte == b'\n' {
                b' '
            } else {
                byte
            }
        }));
        self.0.extend_from_slice(b"\r\n");
    }

    /// `:n`.
    pub fn integer(&mut self, value: i64) {
        self.0.push(b':');
        self.0.extend_from_slice(value.to_string().as_bytes());
        self.0.extend_from_slice(b"\r\n");
    }

    /// `$len` and the bytes.
    pub fn bulk(&mut self, bytes: &[u8]) {
        self.0.push(b'$');
        self.0.extend_from_slice(bytes.len().to_string().as_bytes());
        self.0.extend_from_slice(b"\r\n");
        self.0.extend_from_slice(bytes);
        self.0.extend_from_slice(b"\r\n");
    }

    /// `$-1`: the null bulk string (an absent key).
    pub fn null(&mut self) {
        self.0.extend_from_slice(b"$-1\r\n");
    }

    /// `*len`: the header of an array whose `len` elements follow.
    pub fn array(&mut self, len: usize) {
        self.0.push(b'*');
        self.0.extend_from_slice(len.to_string().as_bytes());
        self.0.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LIMITS: Limits = Limits {
        arguments_max: 8,
        bulk_bytes_max: 64,
        inline_bytes_max: 128,
    };

    fn request(words: &[&[u8]]) -> Vec<u8> {
        let mut bytes = format!("*{}\r\n", words.len()).into_bytes();
        for word in words {
            bytes.extend_from_slice(format!("${}\r\n", word.len()).as_bytes());
            bytes.extend_from_slice(word);
            bytes.extend_from_slice(b"\r\n");
        }
        bytes
    }

    #[test]
    fn resp_array_parses_and_reports_consumed_bytes() {
        let mut bytes = request(&[b"SET", b"k", b"v\r\nx"]);
        let len = bytes.len();
        bytes.extend_from_slice(b"*1\r\n");
        let (parsed, consumed) = parse(&bytes, &LIMITS).expect("valid").expect("complete");
        assert_eq!(
            parsed,
            vec![b"SET".to_vec(), b"k".to_vec(), b"v\r\nx".to_vec()]
        );
        assert_eq!(consumed, len);
    }

    #[test]
    fn resp_every_prefix_of_a_request_is_incomplete() {
        let bytes = request(&[b"MSET", b"a", b"1", b"b", b""]);
        for cut in 0..bytes.len() {
            assert_eq!(parse(&bytes[..cut], &LIMITS), Ok(None), "cut at {cut}");
        }
    }

    #[test]
    fn resp_declared_lengths_are_bounded_before_buffering() {
        assert_eq!(
            parse(b"*9\r\n", &LIMITS),
            Err(ProtocolError::TooManyArguments { count: 9, max: 8 })
        );
        assert_eq!(
            parse(b"*1\r\n$65\r\n", &LIMITS),
            Err(ProtocolError::BulkTooLong { len: 65, max: 64 })
        );
        assert_eq!(
            parse(b"*1\r\n$99999999999999999999\r\n", &LIMITS),
            Err(ProtocolError::InvalidBulkLength)
        );
        assert_eq!(
            parse(b"*1\r\n$-1\r\n", &LIMITS),
            Err(ProtocolError::InvalidBulkLength)
        );
        assert_eq!(
            parse(b"*1\r\n:1\r\n", &LIMITS),
            Err(ProtocolError::ExpectedBulk(b':'))
        );
        assert_eq!(
            parse(b"*x\r\n", &LIMITS),
            Err(ProtocolError::InvalidMultibulkLength)
        );
        assert_eq!(
            parse(b"*1\r\n$1\r\nab\r\n", &LIMITS),
            Err(ProtocolError::MissingCrlf)
        );
        // A header that never ends is refused once it is longer than any valid one.
        assert_eq!(
            parse(&[b'*'; 40], &LIMITS),
            Err(ProtocolError::InvalidMultibulkLength)
        );
        assert_eq!(
            parse(&[b'a'; 200], &LIMITS),
            Err(ProtocolError::InlineTooLong { max: 128 })
        );
    }

    #[test]
    fn resp_inline_requests_split_on_spaces_and_quotes() {
        let (parsed, consumed) = parse(b"set 'a b' \"c\"  d\r\nPING", &LIMITS)
            .expect("valid")
            .expect("complete");
        assert_eq!(
            parsed,
            vec![
                b"set".to_vec(),
                b"a b".to_vec(),
                b"c".to_vec(),
                b"d".to_vec()
            ]
        );
        assert_eq!(consumed, 18);
        assert_eq!(
            parse(b"get \"a\n", &LIMITS),
            Err(ProtocolError::UnbalancedQuotes)
        );
        assert_eq!(parse(b"\r\n", &LIMITS), Ok(Some((vec![], 2))));
    }

    proptest! {
        // Whatever bytes arrive, the parser answers without panicking, consumes no more than it
        // was given, and never returns an argument beyond the limits.
        #[test]
        fn resp_arbitrary_bytes_never_break_the_limits(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(Some((request, consumed))) = parse(&bytes, &LIMITS) {
                prop_assert!(consumed <= bytes.len());
                prop_assert!(consumed > 0);
                prop_assert!(request.len() <= LIMITS.arguments_max);
                prop_assert!(request.iter().all(|word| word.len() <= LIMITS.inline_bytes_max));
            }
        }

        // The fuzz target's entry point, on what it will be given.
        #[test]
        fn resp_fuzz_entry_point_holds_its_checks(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            fuzz_input(&bytes);
        }

        // A valid request round-trips, whole and split anywhere.
        #[test]
        fn resp_valid_requests_round_trip(words in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 1..8), cut in 0usize..1000) {
            let refs: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
            let bytes = request(&refs);
            let parsed = parse(&bytes, &LIMITS);
            prop_assert_eq!(parsed, Ok(Some((words.clone(), bytes.len()))));
            let cut = cut % bytes.len();
            prop_assert_eq!(parse(&bytes[..cut], &LIMITS), Ok(None));
        }
    }
}
