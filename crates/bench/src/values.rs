//! The runner's check of every value a read returns: a GET's, and each pair of a scan.

use crate::runner::TargetError;
use crate::versions::Versions;
use crate::workload::{described, key_of, value_of, Described};

/// Which write of each key a read must return, and the values read that were something else.
pub(crate) struct Values {
    /// Version of the latest write of each key this run updated. A key it inserted and never
    /// updated is at version 1; one loaded before the run and not updated in it, at any version.
    /// Inserts are not recorded, so that loading 44M keys costs no memory here.
    versions: Versions,
    /// Keys numbered below this were inserted before the run.
    loaded: u64,
    value_bytes: usize,
    key_bytes: usize,
    /// Values read that were not the expected write of their key, and scans that returned
    /// pairs out of order.
    pub(crate) mismatches: u64,
    /// What was wrong with the first of them.
    pub(crate) first_mismatch: Option<String>,
}

impl Values {
    /// Values of a run whose keys numbered below `loaded` were written before it.
    pub(crate) fn new(loaded: u64, value_bytes: usize, key_bytes: usize) -> Values {
        Values {
            versions: Versions::default(),
            loaded,
            value_bytes,
            key_bytes,
            mismatches: 0,
            first_mismatch: None,
        }
    }

    /// The value of the next update of `number`, recording its version.
    pub(crate) fn next_update(&mut self, number: u64) -> Vec<u8> {
        let version = self.versions.bump(number);
        value_of(number, u64::from(version), self.value_bytes)
    }

    /// A GET of an existing key must return that key's value: its latest write when the run knows
    /// it, some write of the key otherwise, at the run's value size. A GET that finds nothing stops
    /// the run; any other wrong value is counted (the run's result reports it and fails).
    pub(crate) fn check(&mut self, number: u64, value: Option<&[u8]>) -> Result<(), TargetError> {
        let Some(value) = value else {
            return Err(TargetError::Failed(format!(
                "key number {number} was written but a GET found nothing"
            )));
        };
        if let Some(wrong) = self.wrong(number, value, described(value)) {
            self.count(format!("a GET of key number {number} returned {wrong}"));
        }
        Ok(())
    }

    /// A scan from key number `start` (a key written before it) for `length` pairs must return
    /// at most `length` pairs in increasing key order, the first at its start key, each with the
    /// value a GET of its key must return ([`Values::check`]); each value that is not, and a
    /// scan whose pairs are not so ordered, count as a mismatch. The run does not know the keys'
    /// order, so a scan that leaves out a key after its first goes unnoticed here.
    pub(crate) fn check_scan(&mut self, start: u64, length: usize, pairs: &[(Vec<u8>, Vec<u8>)]) {
        let start_key = key_of(start, self.key_bytes);
        let disordered = if pairs.len() > length {
            Some(format!(
                "{} pairs where {length} were asked for",
                pairs.len()
            ))
        } else if pairs.is_empty() {
            Some("no pair".to_string())
        } else if pairs[0].0 != start_key {
            Some("a first pair that is not its start key".to_string())
        } else {
            (1..pairs.len())
                .find(|&at| pairs[at - 1].0 >= pairs[at].0)
                .map(|at| format!("pair {at} out of key order"))
        };
        if let Some(wrong) = disordered {
            self.count(format!("a scan from key number {start} returned {wrong}"));
        }
        for (key, value) in pairs {
            let found = described(value);
            let wrong = match found {
                // The value names its key; a value of another key is wrong under this one.
                Some(found) if key_of(found.number, self.key_bytes) != *key => Some(format!(
                    "the value of key number {} under another key",
                    found.number
                )),
                Some(found) => self
                    .wrong(found.number, value, Some(found))
                    .map(|wrong| format!("{wrong} for key number {}", found.number)),
                None => self.malformed(value, None),
            };
            if let Some(wrong) = wrong {
                self.count(format!("a scan from key number {start} returned {wrong}"));
            }
        }
    }

    /// What is wrong with `value` (described as `found`) as a read of key number `number`.
    fn wrong(&self, number: u64, value: &[u8], found: Option<Described>) -> Option<String> {
        if let Some(malformed) = self.malformed(value, found) {
            return Some(malformed);
        }
        let found = found?;
        if found.number != number {
            return Some(format!("the value of key number {}", found.number));
        }
        let expected_version = match self.versions.get(number) {
            Some(version) => version,
            None if number >= self.loaded => 1,
            // Loaded before the run and not updated in it: any write of the key will do.
            None => return None,
        };
        (found.version != expected_version)
            .then(|| format!("version {} instead of {expected_version}", found.version))
    }

    /// What is wrong with `value` (described as `found`) as any value the run writes: its
    /// length, or bytes that describe no write.
    fn malformed(&self, value: &[u8], found: Option<Described>) -> Option<String> {
        if value.len() != self.value_bytes {
            return Some(format!(
                "{} bytes instead of {}",
                value.len(),
                self.value_bytes
            ));
        }
        found
            .is_none()
            .then(|| "bytes that are not a value the benchmark writes".to_string())
    }

    /// Counts a mismatch, and keeps the first one's description.
    fn count(&mut self, what: String) {
        self.mismatches += 1;
        self.first_mismatch.get_or_insert(what);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_the_latest_write_of_keys_the_run_wrote() {
        let mut values = Values::new(10, 64, 16);
        // Loaded before the run: any write of the key will do.
        values.check(4, Some(&value_of(4, 9, 64))).expect("check");
        // Inserted by the run: its first write.
        values.check(12, Some(&value_of(12, 1, 64))).expect("check");
        assert_eq!(values.mismatches, 0);
        values.check(12, Some(&value_of(12, 2, 64))).expect("check");
        assert_eq!(values.mismatches, 1);
        // Updated by the run: its latest write, not an earlier one.
        let latest = values.next_update(4);
        values.check(4, Some(&latest)).expect("check");
        assert_eq!(values.mismatches, 1);
        values.check(4, Some(&value_of(4, 9, 64))).expect("check");
        values.check(4, Some(&latest[..32])).expect("check");
        assert_eq!(values.mismatches, 3);
        assert!(values.check(4, None).is_err(), "a lost write stops the run");
    }

    /// The pairs of keys `numbers` at their versions, in key order.
    fn pairs_of(numbers: &[(u64, u64)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut pairs: Vec<_> = numbers
            .iter()
            .map(|&(number, version)| (key_of(number, 16), value_of(number, version, 64)))
            .collect();
        pairs.sort();
        pairs
    }

    /// `pairs` with key number `number`'s value replaced by `value`.
    fn with_value(
        pairs: &[(Vec<u8>, Vec<u8>)],
        number: u64,
        value: Vec<u8>,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut pairs = pairs.to_vec();
        for pair in &mut pairs {
            if pair.0 == key_of(number, 16) {
                pair.1 = value.clone();
            }
        }
        pairs
    }

    #[test]
    fn a_scan_must_return_its_keys_values_in_order_from_its_start() {
        let mut values = Values::new(10, 64, 16);
        assert!(values.next_update(3) == value_of(3, 2, 64));
        let right = pairs_of(&[(1, 1), (3, 2), (5, 7), (12, 1)]);
        let start = described(&right[0].1).map_or(0, |found| found.number);
        values.check_scan(start, 4, &right);
        values.check_scan(start, 9, &right);
        assert_eq!(values.mismatches, 0, "{:?}", values.first_mismatch);
        let mut expect = |pairs: &[(Vec<u8>, Vec<u8>)], length: usize, what: &str| {
            let before = values.mismatches;
            values.first_mismatch = None;
            values.check_scan(start, length, pairs);
            assert_eq!(values.mismatches, before + 1, "{what}");
            let first = values.first_mismatch.clone().unwrap_or_default();
            assert!(first.contains(what), "{first} lacks {what}");
        };
        // More pairs than asked for; a scan that does not start at its key; two pairs swapped.
        expect(&right, 3, "4 pairs where 3");
        expect(&right[1..], 4, "not its start key");
        expect(&[], 4, "returned no pair");
        let mut swapped = right.clone();
        swapped.swap(1, 2);
        expect(&swapped, 4, "pair 2 out of key order");
        // An earlier write of an updated key; a later write of one the run inserted.
        expect(
            &with_value(&right, 3, value_of(3, 1, 64)),
            4,
            "version 1 instead of 2",
        );
        expect(
            &with_value(&right, 12, value_of(12, 2, 64)),
            4,
            "version 2 instead of 1",
        );
        // The value of another key; bytes the benchmark never wrote; a value cut short.
        expect(
            &with_value(&right, 5, value_of(8, 1, 64)),
            4,
            "key number 8 under another",
        );
        let mut damaged = value_of(5, 7, 64);
        damaged[40] ^= 1;
        expect(
            &with_value(&right, 5, damaged),
            4,
            "not a value the benchmark writes",
        );
        let short = value_of(5, 7, 64)[..32].to_vec();
        expect(&with_value(&right, 5, short), 4, "32 bytes instead of 64");
    }
}
