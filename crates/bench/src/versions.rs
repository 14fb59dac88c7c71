//! The runner's record of which write of each key a GET must return.

use std::collections::HashMap;

/// The version of each key's latest update, as a value's description keeps it (its low 32 bits),
/// in chunks of [`Versions::CHUNK_KEYS`] keys allocated when a key in them is first updated. A
/// key takes one byte there; the few keys whose version passes [`Versions::IN_BYTE_MAX`] (a
/// zipfian workload's hottest) keep it in a map beside. A map of every key updated took 20 to 30
/// bytes a key (1 GB for the 40M keys PinK's GC stress overwrites), and four bytes a key took 176
/// MB for its 44M keys.
#[derive(Default)]
pub(crate) struct Versions {
    chunks: Vec<Option<Box<[u8]>>>,
    /// Versions of the keys whose byte is [`Versions::IN_MAP`].
    large: HashMap<u64, u32>,
}

impl Versions {
    pub(crate) const CHUNK_KEYS: usize = 1 << 16;
    /// The largest version a key's byte holds.
    const IN_BYTE_MAX: u32 = 254;
    /// A key's byte when its version is in the map.
    const IN_MAP: u8 = u8::MAX;

    fn split(number: u64) -> (usize, usize) {
        let number = usize::try_from(number).unwrap_or(usize::MAX);
        (number / Self::CHUNK_KEYS, number % Self::CHUNK_KEYS)
    }

    /// The version of `number`'s latest update, if this run updated it.
    pub(crate) fn get(&self, number: u64) -> Option<u32> {
        let (chunk, at) = Self::split(number);
        match self.chunks.get(chunk)?.as_ref()?[at] {
            0 => None,
            Self::IN_MAP => self.large.get(&number).copied(),
            version => Some(u32::from(version)),
        }
    }

    /// Records an update of `number` and returns its version: 2 for the first (the key's
    /// first write, load or insert, is 1), then one more each time. 0 means "not updated", so
    /// a version that wraps to it skips to 1.
    pub(crate) fn bump(&mut self, number: u64) -> u32 {
        let latest = self.get(number).unwrap_or(0);
        let version = match latest.wrapping_add(1) {
            1 => 2,
            0 => 1,
            next => next,
        };
        let (chunk, at) = Self::split(number);
        if chunk >= self.chunks.len() {
            self.chunks.resize_with(chunk + 1, || None);
        }
        let byte = &mut self.chunks[chunk]
            .get_or_insert_with(|| vec![0; Self::CHUNK_KEYS].into_boxed_slice())[at];
        match u8::try_from(version) {
            Ok(small) if version <= Self::IN_BYTE_MAX => {
                *byte = small;
                self.large.remove(&number);
            }
            _ => {
                *byte = Self::IN_MAP;
                self.large.insert(number, version);
            }
        }
        version
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_count_updates_per_key_and_allocate_only_where_keys_are_updated() {
        let mut versions = Versions::default();
        let far = 3 * Versions::CHUNK_KEYS as u64 + 5;
        assert_eq!(versions.get(far), None);
        assert_eq!(
            versions.bump(far),
            2,
            "a key's first update is its second write"
        );
        assert_eq!(versions.bump(far), 3);
        assert_eq!(versions.get(far), Some(3));
        assert_eq!(versions.get(far + 1), None, "its neighbour was not updated");
        assert_eq!(versions.get(0), None);
        assert_eq!(versions.get(u64::MAX), None);
        let allocated = versions
            .chunks
            .iter()
            .filter(|chunk| chunk.is_some())
            .count();
        assert_eq!(allocated, 1, "one chunk, the updated key's");
        versions.bump(Versions::CHUNK_KEYS as u64 - 1);
        assert_eq!(versions.get(Versions::CHUNK_KEYS as u64 - 1), Some(2));
        assert_eq!(versions.get(Versions::CHUNK_KEYS as u64), None);
    }

    /// A key updated hundreds of times goes on counting in the map, its neighbours in their bytes.
    #[test]
    fn versions_past_a_byte_go_on_counting() {
        let mut versions = Versions::default();
        assert_eq!(versions.bump(8), 2);
        for expected in 2..=600u32 {
            assert_eq!(versions.bump(7), expected);
            assert_eq!(versions.get(7), Some(expected));
        }
        assert_eq!(versions.bump(8), 3);
        assert_eq!(versions.get(8), Some(3));
        assert_eq!(versions.large.len(), 1, "key 7 alone is in the map");
        // A version that wraps past u32::MAX does not read as "not updated".
        versions.large.insert(7, u32::MAX);
        assert_eq!(versions.bump(7), 1);
        assert_eq!(versions.get(7), Some(1));
        assert!(versions.large.is_empty(), "back in its byte");
    }
}
