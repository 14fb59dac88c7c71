//! A job's recorded work, eight bytes a piece rather than the sixteen of a [`Work`]: a merge of a
//! large level records millions of pieces, and queued jobs held them all.
//!
//! ```text
//! bits 61..64  kind: 0 read, 1 program, 2 erase, 3 computation, 4 accelerator, 7 wide
//! read, program  bits 0..32 the die, bits 32..61 the bytes
//! erase          bits 0..32 the die
//! computation, accelerator  bits 0..61 the nanoseconds
//! wide           a piece whose bytes or nanoseconds do not fit: the kind in bits 0..3, then two
//!                words, the die and the bytes or nanoseconds
//! ```
//!
//! No piece of a real card is wide (a page is at most 68 KiB, and 2^61 ns is 73 years), but one
//! would be kept exactly all the same.

use super::Work;

const KIND_SHIFT: u32 = 61;
const READ: u64 = 0;
const PROGRAM: u64 = 1;
const ERASE: u64 = 2;
const CPU: u64 = 3;
const ACCELERATOR: u64 = 4;
const WIDE: u64 = 7;
/// Bytes of a read or a program that fit in one word.
const BYTES_LIMIT: u64 = 1 << (KIND_SHIFT - 32);
/// Nanoseconds of a computation that fit in one word.
const NS_LIMIT: u64 = 1 << KIND_SHIFT;

/// Appends `work` to `words`.
pub(super) fn push(words: &mut Vec<u64>, work: Work) {
    let (kind, die, value) = match work {
        Work::Read { die, bytes } => (READ, die, bytes),
        Work::Program { die, bytes } => (PROGRAM, die, bytes),
        Work::Erase { die } => (ERASE, die, 0),
        Work::Cpu { ns } => (CPU, 0, ns),
        Work::Accelerator { ns } => (ACCELERATOR, 0, ns),
    };
    let fits = match kind {
        READ | PROGRAM => value < BYTES_LIMIT,
        _ => value < NS_LIMIT,
    };
    if !fits {
        words.extend([WIDE << KIND_SHIFT | kind, u64::from(die), value]);
    } else if kind == READ || kind == PROGRAM {
        words.push(kind << KIND_SHIFT | value << 32 | u64::from(die));
    } else {
        words.push(kind << KIND_SHIFT | value | u64::from(die));
    }
}

/// The piece at `at` in `words` and the words it takes, or `None` at the end.
pub(super) fn get(words: &[u64], at: usize) -> Option<(Work, usize)> {
    let word = *words.get(at)?;
    let (kind, die, value, width) = if word >> KIND_SHIFT == WIDE {
        let (die, value) = (*words.get(at + 1)?, *words.get(at + 2)?);
        (word & 0b111, die as u32, value, 3)
    } else {
        let kind = word >> KIND_SHIFT;
        let low = word & (NS_LIMIT - 1);
        match kind {
            READ | PROGRAM => (kind, low as u32, low >> 32, 1),
            ERASE => (kind, low as u32, 0, 1),
            _ => (kind, 0, low, 1),
        }
    };
    let work = match kind {
        READ => Work::Read { die, bytes: value },
        PROGRAM => Work::Program { die, bytes: value },
        ERASE => Work::Erase { die },
        CPU => Work::Cpu { ns: value },
        _ => Work::Accelerator { ns: value },
    };
    Some((work, width))
}

/// Every piece of `words`, in order.
#[cfg(test)]
pub(super) fn pieces(words: &[u64]) -> Vec<Work> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some((work, width)) = get(words, at) {
        out.push(work);
        at += width;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_piece_reads_back_as_recorded_in_one_word_or_three() {
        let work = [
            Work::Read { die: 0, bytes: 0 },
            Work::Read {
                die: u32::MAX,
                bytes: BYTES_LIMIT - 1,
            },
            Work::Program {
                die: 63,
                bytes: 8448,
            },
            Work::Erase { die: u32::MAX },
            Work::Cpu { ns: NS_LIMIT - 1 },
            Work::Accelerator { ns: 7 },
            // Wide: kept whole in three words.
            Work::Read {
                die: 5,
                bytes: BYTES_LIMIT,
            },
            Work::Program {
                die: u32::MAX,
                bytes: u64::MAX,
            },
            Work::Cpu { ns: u64::MAX },
            Work::Accelerator { ns: NS_LIMIT },
            Work::Erase { die: 1 },
        ];
        let mut words = Vec::new();
        for &piece in &work {
            push(&mut words, piece);
        }
        assert_eq!(words.len(), 7 + 4 * 3);
        assert_eq!(pieces(&words), work);
        // A wide piece cut short reads as the end, never as another piece.
        assert_eq!(get(&words[..words.len() - 2], words.len() - 4), None);
    }
}
