//! The tree's DRAM state as bytes, for checkpoints and power-loss dumps, and its restoration.
//!
//! ```text
//! "KLSM" | version u32 = 1 | pinned_target u32 | key_len_max_seen u32
//! L0:     count u32, then per pair: key_len u8 | key | kind u8 (0 tombstone, 1 value, 2 value
//!         re-inserted by GC) | [value_len u32 | value]
//! levels: count u32, then per level: pinned u8 | entries u64 | key_bytes u64 | segments u32,
//!         then per segment: key_len u8 | start key | page (u8 flag, u64) |
//!         entries (u8 flag, count u32, then key_len u8 | key | pointer u64 | value_len u32 |
//!         from_gc u8) | Bloom filter (u8 flag, bit_count u64 | hashes u32 | keys u64 | words)
//! ```
//!
//! Little-endian. Prefixes and range pointers are recomputed, not saved. The whole L0 is saved
//! because `pink`'s GC re-inserts live values into it: those are in no log record.

use std::collections::BTreeMap;
use std::sync::Arc;

use kvssd_flash::codec::ByteReader;
use kvssd_flash::{Purpose, SimTime};
use kvssd_space::{PageIndex, RecordPointer, Space};

use super::bloom::Bloom;
use super::level::{Level, Segment};
use super::segment::{Entry, SegmentPage};
use super::{LsmTree, Result};
use crate::config::EngineConfig;
use crate::EngineError;

const MAGIC: &[u8; 4] = b"KLSM";
const VERSION: u32 = 1;

fn bad(what: &'static str) -> EngineError {
    EngineError::CheckpointMalformed(what)
}

fn put_key(out: &mut Vec<u8>, key: &[u8]) {
    out.push(key.len() as u8);
    out.extend_from_slice(key);
}

/// Levels a restored tree may have beyond its configuration's plan (`levels_max`).
const RESTORED_LEVELS_BEYOND_PLAN: usize = 3;

impl LsmTree {
    /// The tree's DRAM state (L0, level lists, pinned segments, Bloom filters) as bytes; see the
    /// module documentation for the layout.
    pub fn durable_state(&self) -> Vec<u8> {
        // Sized up front: the pinned levels of a few million keys take tens of megabytes, and a
        // buffer grown by doubling copies them again and faults in fresh memory at each step.
        let mut out = Vec::with_capacity(self.durable_state_bytes());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&(self.pinned_target as u32).to_le_bytes());
        out.extend_from_slice(&(self.key_len_max_seen as u32).to_le_bytes());
        out.extend_from_slice(&(self.l0.len() as u32).to_le_bytes());
        for (key, value) in self.l0.iter() {
            put_key(&mut out, key);
            match &value.value {
                None => out.push(0),
                Some(bytes) => {
                    out.push(if value.from_gc { 2 } else { 1 });
                    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
                    out.extend_from_slice(bytes);
                }
            }
        }
        out.extend_from_slice(&(self.levels.len() as u32).to_le_bytes());
        for level in &self.levels {
            out.push(u8::from(level.pinned));
            out.extend_from_slice(&level.entries.to_le_bytes());
            out.extend_from_slice(&level.key_bytes.to_le_bytes());
            out.extend_from_slice(&(level.segments.len() as u32).to_le_bytes());
            for segment in level.segments.iter() {
                put_key(&mut out, &segment.start_key);
                match segment.page {
                    None => out.push(0),
                    Some(page) => {
                        out.push(1);
                        out.extend_from_slice(&page.0.to_le_bytes());
                    }
                }
                match &segment.entries {
                    None => out.push(0),
                    Some(entries) => {
                        out.push(1);
                        out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
                        for entry in entries.iter() {
                            put_key(&mut out, &entry.key);
                            out.extend_from_slice(&entry.pointer.to_le_bytes());
                            out.extend_from_slice(&entry.value_len.to_le_bytes());
                            out.push(u8::from(entry.from_gc));
                        }
                    }
                }
                match &segment.bloom {
                    None => out.push(0),
                    Some(bloom) => {
                        out.push(1);
                        bloom.encode(&mut out);
                    }
                }
            }
        }
        out
    }

    /// About the bytes [`LsmTree::durable_state`] takes (at least them, short of Bloom filters'
    /// rounding): L0's pairs as counted, each pinned entry's key and 14 bytes, each segment's
    /// start key, flags and filter.
    fn durable_state_bytes(&self) -> usize {
        let mut bytes = 24 + self.l0_bytes;
        for level in &self.levels {
            bytes += 21;
            if level.pinned {
                bytes += level.key_bytes + 14 * level.entries;
            }
            for segment in level.segments.iter() {
                let bloom = segment
                    .bloom
                    .as_ref()
                    .map_or(0, |bloom| 20 + bloom.dram_bytes());
                bytes += 17 + segment.start_key.len() as u64 + bloom;
            }
        }
        usize::try_from(bytes).unwrap_or(0)
    }

    /// A tree rebuilt from [`LsmTree::durable_state`] bytes, writing to `space` under
    /// `config.namespace`. Never panics on bad bytes: they give
    /// [`EngineError::CheckpointMalformed`]. Call [`LsmTree::account_valid`] once every tree is
    /// restored, so the space layer's valid bytes match what the trees reference.
    pub fn restore(space: &Space, config: EngineConfig, bytes: &[u8]) -> Result<LsmTree> {
        let mut tree = LsmTree::open(space, config)?;
        let mut reader = ByteReader::new(bytes);
        if reader.take(4)? != MAGIC {
            return Err(bad("wrong magic"));
        }
        if reader.u32()? != VERSION {
            return Err(bad("unsupported version"));
        }
        tree.pinned_target = (reader.u32()? as usize).min(tree.pinned_target);
        tree.key_len_max_seen = (reader.u32()? as usize).clamp(1, crate::KEY_BYTES_MAX);
        let pages_total = space.geometry().pages_total();
        let l0 = reader.count(2)?;
        for _ in 0..l0 {
            let key = reader.key()?;
            let (value, from_gc) = match reader.u8()? {
                0 => (None, false),
                kind @ (1 | 2) => {
                    let len = reader.u32()? as usize;
                    (Some(std::sync::Arc::from(reader.take(len)?)), kind == 2)
                }
                _ => return Err(bad("unknown L0 entry kind")),
            };
            tree.key_len_max_seen = tree.key_len_max_seen.max(key.len());
            tree.l0_insert(super::L0Key::new(&key), value, from_gc);
        }
        let levels = reader.count(21)?;
        // A tree formed under another DRAM budget may have more levels than this configuration
        // plans: a file image's L0 grows with its opener's budget, up to 32 times PinK's, and its
        // levels with it (T = 10: two levels fewer), so up to three more than the plan are taken.
        if levels > tree.levels_max.max(1) + RESTORED_LEVELS_BEYOND_PLAN {
            return Err(bad("more levels than the configuration allows"));
        }
        for _ in 0..levels {
            let pinned = reader.u8()? != 0;
            let entries = reader.u64()?;
            let key_bytes = reader.u64()?;
            let count = reader.count(5)?;
            let mut segments = Vec::with_capacity(count);
            for _ in 0..count {
                let start_key = reader.key()?;
                let page = match reader.u8()? {
                    0 => None,
                    _ => {
                        let page = reader.u64()?;
                        if page >= pages_total {
                            return Err(bad("a meta page outside the device"));
                        }
                        Some(PageIndex(page))
                    }
                };
                let entries = match reader.u8()? {
                    0 => None,
                    _ => {
                        let n = reader.count(15)?;
                        let mut list = Vec::with_capacity(n);
                        for _ in 0..n {
                            let key = reader.key()?;
                            let pointer = reader.u64()?;
                            let value_len = reader.u32()?;
                            let from_gc = reader.u8()? != 0;
                            list.push(Entry {
                                key: key.into(),
                                pointer,
                                value_len,
                                from_gc,
                            });
                        }
                        Some(Arc::new(list))
                    }
                };
                if page.is_some() == entries.is_some() {
                    return Err(bad(
                        "a segment must be on flash or pinned, not both or neither",
                    ));
                }
                let bloom = match reader.u8()? {
                    0 => None,
                    _ => {
                        let bit_count = reader.u64()?;
                        let hashes = reader.u32()?;
                        let keys = reader.u64()?;
                        let words = bit_count.div_ceil(64) as usize;
                        if words.saturating_mul(8) > bytes.len() {
                            return Err(bad("a Bloom filter larger than the checkpoint"));
                        }
                        let mut bits = Vec::with_capacity(words);
                        for _ in 0..words {
                            bits.push(reader.u64()?);
                        }
                        Some(Arc::new(
                            Bloom::from_parts(bit_count, hashes, keys, bits)
                                .ok_or_else(|| bad("an inconsistent Bloom filter"))?,
                        ))
                    }
                };
                segments.push(Segment::new(start_key.into(), page, entries, bloom));
            }
            let mut level = Level {
                entries,
                key_bytes,
                pinned,
                ..Level::default()
            };
            level.set_segments(segments);
            tree.levels.push(level);
        }
        reader.finish()?;
        for index in 0..tree.levels.len() {
            tree.relink(index);
        }
        // The levels came from flash: a broken invariant is a malformed checkpoint, reported as
        // such, not an assertion failure.
        for (index, level) in tree.levels.iter().enumerate() {
            level
                .check_invariants(tree.levels.get(index + 1))
                .map_err(bad)?;
        }
        Ok(tree)
    }

    /// Reports every meta page and record the tree references to the space layer's accounting
    /// (after a restart, when the accounting starts at zero). Reads the unpinned meta segments.
    pub fn account_valid(&mut self, space: &mut Space, at: SimTime) -> Result<SimTime> {
        let mut t = at;
        let mut records: BTreeMap<u64, (usize, usize)> = BTreeMap::new();
        for level in &self.levels {
            for segment in level.segments.iter() {
                let entries = match (&segment.entries, segment.page) {
                    (Some(entries), _) => entries.as_ref().clone(),
                    (None, Some(page)) => {
                        space.account_meta_page(page);
                        // The space layer retries a page that fails its checksum; a failure
                        // here is final.
                        let (bytes, done) = space.read_page(t, page, Purpose::Recovery)?;
                        t = t.max(done);
                        SegmentPage::parse(&bytes, page.0)?.entries()?
                    }
                    (None, None) => continue,
                };
                for entry in entries {
                    if !entry.is_tombstone() {
                        records.insert(entry.pointer, (entry.key.len(), entry.value_len as usize));
                    }
                }
            }
        }
        // A key has one live entry per level at most, but only the newest version is referenced:
        // the accounting counts every record a level still points at, as the running tree does.
        for (pointer, (key_len, value_len)) in records {
            space.account_record(RecordPointer::from_raw(pointer), key_len, value_len);
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    //! The read-retry policy as recovery sees it: a meta page that fails its checksum on every
    //! read is read exactly [`READ_ATTEMPTS_MAX`] times, once per attempt of the flash layer's
    //! policy, and then reported. (The tree used to retry the space layer's retries, which read
    //! such a page `READ_ATTEMPTS_MAX` squared times.)

    use kvssd_flash::{FaultConfig, Flash, FlashError, Profile, Purpose, READ_ATTEMPTS_MAX};
    use kvssd_space::Space;

    use super::LsmTree;
    use crate::{EngineConfig, EngineError, Preset};

    /// A file image's L0 grows with the DRAM budget its opener gives, and its levels' plan with
    /// it: a tree written under a small L0 reopens under one 32 times larger, with all its keys.
    #[test]
    fn durable_tree_of_a_small_l0_restores_under_one_32_times_larger() {
        let profile = Profile::test_min();
        let flash = Flash::new(profile.geometry, None).expect("flash");
        let mut config = EngineConfig::test_min(Preset::Pink);
        config.space.over_provisioning_percent = 10;
        let mut space = Space::open(flash, config.space.clone()).expect("space");
        let mut tree = LsmTree::open(&space, config.clone()).expect("tree");
        let mut now = 0;
        let keys = 2_500u32;
        for id in 0..keys {
            let key = format!("k{id:06}");
            now = tree
                .put(&mut space, now, key.as_bytes(), &[id as u8; 8])
                .expect("put");
        }
        let levels = tree.levels.len();
        let state = tree.durable_state();
        let mut larger = config;
        larger.l0_bytes *= 32;
        larger.dram_budget_bytes *= 32;
        larger.l1_entries = 0;
        let planned = LsmTree::open(&space, larger.clone())
            .expect("tree")
            .levels_max;
        assert!(
            levels > planned + 1,
            "{levels} levels against a plan of {planned}: the test needs a deeper tree"
        );
        let mut restored = LsmTree::restore(&space, larger, &state).expect("restores");
        assert_eq!(restored.levels.len(), levels);
        for id in 0..keys {
            let key = format!("k{id:06}");
            let (value, done) = restored.get(&mut space, now, key.as_bytes()).expect("get");
            now = done;
            assert_eq!(value, Some(vec![id as u8; 8]), "{key}");
        }
    }

    #[test]
    fn durable_persistently_corrupt_meta_page_is_read_read_attempts_max_times() {
        let profile = Profile::test_min();
        let flash = Flash::new(profile.geometry, Some(profile.timing)).expect("flash");
        // `lightstore` pins nothing, so the first flush leaves a meta segment on flash only.
        let config = EngineConfig::test_min(Preset::Lightstore);
        let mut space = Space::open(flash, config.space.clone()).expect("space");
        let mut tree = LsmTree::open(&space, config).expect("tree");
        let on_flash = |tree: &LsmTree| {
            tree.levels
                .iter()
                .flat_map(|level| level.segments.iter())
                .any(|segment| segment.entries.is_none() && segment.page.is_some())
        };
        let mut now = 0;
        for id in 0u32..10_000 {
            if on_flash(&tree) {
                break;
            }
            let key = format!("key{id:05}");
            now = tree
                .put(&mut space, now, key.as_bytes(), &[id as u8; 40])
                .expect("put");
        }
        assert!(on_flash(&tree), "no meta segment reached flash");
        // Every read now flips a bit, so the page fails its checksum however often it is read.
        space.flash_mut().set_faults(FaultConfig {
            bit_flip_probability: 1.0,
            ..FaultConfig::default()
        });
        let reads_before = space.flash().counters().of(Purpose::Recovery).reads;
        let result = tree.account_valid(&mut space, now);
        let reads = space.flash().counters().of(Purpose::Recovery).reads - reads_before;
        assert!(
            matches!(result, Err(EngineError::Flash(FlashError::Corrupt { .. }))),
            "a corrupt page is reported, got {result:?}"
        );
        assert_eq!(reads, u64::from(READ_ATTEMPTS_MAX));
    }

    /// The size `durable_state` reserves is what it writes, but for Bloom filters' rounding to
    /// whole words (at most 7 bytes each), and not far above it.
    #[test]
    fn durable_state_reserves_about_what_it_writes() {
        let (mut space, mut tree) = super::super::test_tree();
        let mut now = 0;
        for id in 0u32..1_500 {
            let key = format!("key{:04}", id * 7919 % 600);
            now = tree
                .put(&mut space, now, key.as_bytes(), &[id as u8; 8])
                .expect("put");
        }
        assert!(tree
            .levels
            .iter()
            .any(|level| level.pinned && level.entries > 0));
        let filters = tree
            .levels
            .iter()
            .flat_map(|level| level.segments.iter())
            .filter(|segment| segment.bloom.is_some())
            .count();
        let written = tree.durable_state().len();
        let reserved = tree.durable_state_bytes();
        assert!(written <= reserved + 7 * filters, "{written} > {reserved}");
        assert!(reserved <= written * 2, "{reserved} is far above {written}");
    }
}
