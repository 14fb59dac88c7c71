//! Decoding compact media's encoding ([`super`]): a whole slot, or a span of it read in order
//! (a record and the trailer), from an encoding that may lie in two pieces.

use super::{header, FILL, LITERAL, PATTERN, PATTERN_BYTES};

/// Why an encoding cannot be decoded.
pub(crate) type Malformed = &'static str;

/// Decodes `encoded` into `slot`, which it must cover exactly.
#[cfg(test)]
pub(crate) fn decode(encoded: &[u8], slot: &mut [u8]) -> Result<(), Malformed> {
    decode_into([encoded, &[]], [slot, &mut []])
}

/// An encoding read in order from up to two pieces (a page that straddles two chunks).
#[derive(Clone, Copy)]
struct Input<'a> {
    pieces: [&'a [u8]; 2],
}

impl<'a> Input<'a> {
    fn is_empty(&self) -> bool {
        self.pieces[0].is_empty() && self.pieces[1].is_empty()
    }

    fn byte(&mut self) -> Option<u8> {
        let [a, b] = self.take(1)?;
        a.first().or(b.first()).copied()
    }

    /// The next `count` bytes, in the (at most two) pieces they lie in.
    fn take(&mut self, count: usize) -> Option<[&'a [u8]; 2]> {
        let [first, second] = self.pieces;
        let from_first = count.min(first.len());
        let from_second = count - from_first;
        if from_second > second.len() {
            return None;
        }
        let (a, rest_first) = first.split_at(from_first);
        let (b, rest_second) = second.split_at(from_second);
        self.pieces = [rest_first, rest_second];
        Some([a, b])
    }

    fn length(&mut self) -> Result<usize, Malformed> {
        let mut length = 0usize;
        for index in 0..4 {
            let byte = self.byte().ok_or("a length is malformed")?;
            length |= usize::from(byte & 0x7F) << (7 * index);
            if byte & 0x80 == 0 {
                return Ok(length);
            }
        }
        Err("a length is malformed")
    }
}

/// Decodes an encoding that lies in `encoded` (its two pieces in order) into the slot made of
/// `out` (its two parts in order: the media put a page's OOB area first), which it must cover
/// exactly: no slot in between, so a read decodes straight into the caller's buffers.
pub(crate) fn decode_into(encoded: [&[u8]; 2], out: [&mut [u8]; 2]) -> Result<(), Malformed> {
    let mut input = Input { pieces: encoded };
    let [data, oob] = out;
    let split = data.len();
    let total = split + oob.len();
    let mut at = 0usize;
    while !input.is_empty() {
        let (kind, short) = header(input.byte().ok_or("an operation is cut short")?);
        let length = match short {
            Some(length) => length,
            None => input.length()?,
        };
        let end = at
            .checked_add(length)
            .filter(|&end| end <= total)
            .ok_or("a run or literal goes past the end of the page")?;
        let targets = [
            &mut data[at.min(split)..end.min(split)],
            &mut oob[at.saturating_sub(split)..end.saturating_sub(split)],
        ];
        match kind {
            LITERAL => {
                let mut bytes = Input {
                    pieces: input.take(length).ok_or("a literal is cut short")?,
                };
                for target in targets {
                    let [a, b] = bytes.take(target.len()).ok_or("a literal is cut short")?;
                    target[..a.len()].copy_from_slice(a);
                    target[a.len()..].copy_from_slice(b);
                }
            }
            PATTERN => {
                let [a, b] = input.take(PATTERN_BYTES).ok_or("a pattern is cut short")?;
                let mut pattern = [0u8; PATTERN_BYTES];
                pattern[..a.len()].copy_from_slice(a);
                pattern[a.len()..].copy_from_slice(b);
                let [first, second] = targets;
                repeat(&pattern, first);
                // The run goes on in the OOB area where the payload left it.
                pattern.rotate_left(first.len() % PATTERN_BYTES);
                repeat(&pattern, second);
            }
            FILL => {
                let byte = input.byte().ok_or("a fill byte is missing")?;
                for target in targets {
                    target.fill(byte);
                }
            }
            _ => {
                for target in targets {
                    target.fill(0);
                }
            }
        }
        at = end;
    }
    if at != total {
        return Err("the encoding ends before the page does");
    }
    Ok(())
}

/// Decodes bytes `offset..offset + out.len()` of the slot an encoding describes into `out`,
/// walking the operations before them without copying, and stopping after them: a read of part
/// of a page costs that part. Every length on the way is checked as [`decode_into`] checks it.
pub(crate) fn decode_span(
    encoded: [&[u8]; 2],
    offset: usize,
    out: &mut [u8],
) -> Result<(), Malformed> {
    SpanReader::new(encoded).read(offset, out)
}

/// Reads spans of the slot an encoding describes, as [`decode_span`] does, going on from the
/// operation the last span ended in when the next one starts there or later (a record's header,
/// then its key and value), and from the start of the encoding otherwise.
#[derive(Clone, Copy)]
pub(crate) struct SpanReader<'a> {
    encoded: [&'a [u8]; 2],
    /// What follows the current operation.
    input: Input<'a>,
    /// The current operation and the slot bytes `start..end` it covers (none yet: `0..0`).
    operation: Operation<'a>,
    start: usize,
    end: usize,
}

#[derive(Clone, Copy)]
enum Operation<'a> {
    Literal([&'a [u8]; 2]),
    Pattern([u8; PATTERN_BYTES]),
    Fill(u8),
}

impl<'a> SpanReader<'a> {
    pub(crate) fn new(encoded: [&'a [u8]; 2]) -> SpanReader<'a> {
        SpanReader {
            encoded,
            input: Input { pieces: encoded },
            operation: Operation::Fill(0),
            start: 0,
            end: 0,
        }
    }

    /// Moves to the next operation, its lengths checked.
    fn advance(&mut self) -> Result<(), Malformed> {
        if self.input.pieces[1].is_empty() {
            return self.advance_within(self.input.pieces[0]);
        }
        let (kind, short) = header(
            self.input
                .byte()
                .ok_or("the encoding ends before the page does")?,
        );
        let length = match short {
            Some(length) => length,
            None => self.input.length()?,
        };
        let end = self
            .end
            .checked_add(length)
            .ok_or("a run or literal goes past the end of the page")?;
        self.operation = match kind {
            LITERAL => Operation::Literal(self.input.take(length).ok_or("a literal is cut short")?),
            PATTERN => {
                let [a, b] = self
                    .input
                    .take(PATTERN_BYTES)
                    .ok_or("a pattern is cut short")?;
                let mut pattern = [0u8; PATTERN_BYTES];
                pattern[..a.len()].copy_from_slice(a);
                pattern[a.len()..].copy_from_slice(b);
                Operation::Pattern(pattern)
            }
            FILL => Operation::Fill(self.input.byte().ok_or("a fill byte is missing")?),
            _ => Operation::Fill(0),
        };
        (self.start, self.end) = (self.end, end);
        Ok(())
    }

    /// [`SpanReader::advance`] where what is left of the encoding lies in one piece (all but
    /// the pages that straddle two chunks): the same checks and errors, with a cursor over one
    /// slice instead of two, since a read of one record walks every operation before it.
    fn advance_within(&mut self, bytes: &'a [u8]) -> Result<(), Malformed> {
        let (&first, rest) = bytes
            .split_first()
            .ok_or("the encoding ends before the page does")?;
        let (kind, short) = header(first);
        let (length, used) = match short {
            Some(length) => (length, 0),
            None => {
                let mut length = 0usize;
                let mut used = 0;
                loop {
                    let byte = *rest.get(used).ok_or("a length is malformed")?;
                    length |= usize::from(byte & 0x7F) << (7 * used);
                    used += 1;
                    if byte & 0x80 == 0 {
                        break;
                    }
                    if used == 4 {
                        return Err("a length is malformed");
                    }
                }
                (length, used)
            }
        };
        let rest = &rest[used..];
        let end = self
            .end
            .checked_add(length)
            .ok_or("a run or literal goes past the end of the page")?;
        let (operation, rest) = match kind {
            LITERAL => {
                let literal = rest.get(..length).ok_or("a literal is cut short")?;
                (Operation::Literal([literal, &[]]), &rest[length..])
            }
            PATTERN => {
                let pattern = rest.get(..PATTERN_BYTES).ok_or("a pattern is cut short")?;
                let mut bytes = [0u8; PATTERN_BYTES];
                bytes.copy_from_slice(pattern);
                (Operation::Pattern(bytes), &rest[PATTERN_BYTES..])
            }
            FILL => {
                let (&byte, rest) = rest.split_first().ok_or("a fill byte is missing")?;
                (Operation::Fill(byte), rest)
            }
            _ => (Operation::Fill(0), rest),
        };
        self.operation = operation;
        self.input.pieces = [rest, &[]];
        (self.start, self.end) = (self.end, end);
        Ok(())
    }

    /// Decodes bytes `offset..offset + out.len()` of the slot into `out`.
    pub(crate) fn read(&mut self, offset: usize, out: &mut [u8]) -> Result<(), Malformed> {
        if offset < self.start {
            *self = SpanReader::new(self.encoded);
        }
        let want_end = offset + out.len();
        loop {
            self.copy_overlap(offset, out)?;
            if self.end >= want_end {
                return Ok(());
            }
            self.advance()?;
        }
    }

    /// Where the encoding keeps slot byte `offset` as it is: in a literal, its byte there;
    /// `None` in a run (whose bytes the operation's header gives).
    pub(crate) fn literal_at(&mut self, offset: usize) -> Result<Option<&'a u8>, Malformed> {
        Ok(self.literal_from(offset)?.and_then(<[u8]>::first))
    }

    /// Where the encoding keeps slot bytes from `offset` on as they are: the rest of the
    /// literal that holds byte `offset`, as far as the piece of the encoding it lies in goes;
    /// `None` in a run.
    pub(crate) fn literal_from(&mut self, offset: usize) -> Result<Option<&'a [u8]>, Malformed> {
        if offset < self.start {
            *self = SpanReader::new(self.encoded);
        }
        while self.end <= offset {
            self.advance()?;
        }
        Ok(match self.operation {
            Operation::Literal([first, second]) => {
                let at = offset - self.start;
                first
                    .get(at..)
                    .filter(|rest| !rest.is_empty())
                    .or_else(|| second.get(at - first.len()..))
            }
            Operation::Pattern(_) | Operation::Fill(_) => None,
        })
    }

    /// Copies the part of `offset..offset + out.len()` the current operation covers.
    fn copy_overlap(&self, offset: usize, out: &mut [u8]) -> Result<(), Malformed> {
        let (from, to) = (self.start.max(offset), self.end.min(offset + out.len()));
        if from >= to {
            return Ok(());
        }
        let target = &mut out[from - offset..to - offset];
        match self.operation {
            Operation::Literal(pieces) => {
                let mut bytes = Input { pieces };
                bytes
                    .take(from - self.start)
                    .ok_or("a literal is cut short")?;
                let [x, y] = bytes.take(to - from).ok_or("a literal is cut short")?;
                target[..x.len()].copy_from_slice(x);
                target[x.len()..].copy_from_slice(y);
            }
            Operation::Pattern(mut pattern) => {
                // The run repeats its pattern from its own start.
                pattern.rotate_left((from - self.start) % PATTERN_BYTES);
                repeat(&pattern, target);
            }
            Operation::Fill(byte) => target.fill(byte),
        }
        Ok(())
    }
}

/// Fills `target` with `pattern` repeated, doubling what is already written.
fn repeat(pattern: &[u8], target: &mut [u8]) {
    let first = pattern.len().min(target.len());
    target[..first].copy_from_slice(&pattern[..first]);
    let mut filled = first;
    while filled < target.len() {
        let copy = filled.min(target.len() - filled);
        target.copy_within(..copy, filled);
        filled += copy;
    }
}
