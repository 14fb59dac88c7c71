//! A read-only view of a tree's index for consistency checkers (`kvssd check`): L0's keys, each
//! level's list, pinned segments' entries, and a decoder for meta pages read from flash.
//!
//! Nothing here changes the tree or does I/O; the checker reads pages through the space layer
//! itself, so a damaged page surfaces as the flash layer's checksum error.

use kvssd_space::{PageIndex, RecordPointer};

use super::segment::{Entry, SegmentPage};
use super::LsmTree;
use crate::EngineError;

/// One entry of a meta segment: a key and where its value record is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    /// The key.
    pub key: Vec<u8>,
    /// The value record, or `None` for a tombstone.
    pub pointer: Option<RecordPointer>,
    /// Length of the value, in bytes.
    pub value_len: u32,
}

/// One meta segment as the level list names it.
#[derive(Debug, Clone)]
pub struct SegmentView {
    /// The start key the level list holds for it.
    pub start_key: Vec<u8>,
    /// Where it is on flash (`None` while its level is pinned).
    pub page: Option<PageIndex>,
    /// Its entries, when its level is pinned (held in DRAM).
    pub entries: Option<Vec<IndexEntry>>,
}

fn view(entry: &Entry) -> IndexEntry {
    IndexEntry {
        key: entry.key.to_vec(),
        pointer: (!entry.is_tombstone()).then(|| RecordPointer::from_raw(entry.pointer)),
        value_len: entry.value_len,
    }
}

/// Decodes a meta page read from flash (`page` names it in errors).
pub fn decode_meta_page(bytes: &[u8], page: PageIndex) -> Result<Vec<IndexEntry>, EngineError> {
    let entries = SegmentPage::parse(bytes, page.0)?.entries()?;
    Ok(entries.iter().map(view).collect())
}

impl LsmTree {
    /// L0's keys in order, each with whether it is a tombstone.
    pub fn inspect_l0(&self) -> Vec<(Vec<u8>, bool)> {
        self.l0
            .iter()
            .map(|(key, value)| (key.to_vec(), value.value.is_none()))
            .collect()
    }

    /// Every level below L0 (L1 first): its level list, with pinned segments' entries.
    pub fn inspect_levels(&self) -> Vec<Vec<SegmentView>> {
        self.levels
            .iter()
            .map(|level| {
                level
                    .segments
                    .iter()
                    .map(|segment| SegmentView {
                        start_key: segment.start_key.to_vec(),
                        page: segment.page,
                        entries: segment
                            .entries
                            .as_ref()
                            .map(|entries| entries.iter().map(view).collect()),
                    })
                    .collect()
            })
            .collect()
    }
}
