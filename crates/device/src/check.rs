//! The consistency checker (`kvssd check`): reads every live page of a device and checks the
//! index invariants, collecting every problem instead of stopping at the first.
//!
//! What is read, all through the same read paths the device uses (so a page whose checksum fails
//! surfaces as the flash layer's `Corrupt` error, after the flash layer's read retries):
//!
//! * the durable structures the newest superblock copy names: every page of the checkpoint (which
//!   must also decode), and every programmed page of the live log's blocks;
//! * for every namespace, every level's meta segments (from flash, or from DRAM for pinned
//!   levels) and the value record of every entry that is the newest version of its key.
//!
//! Invariants checked per level: start keys of the level list strictly increasing; each segment's
//! keys strictly increasing, its first key equal to the start key the list holds for it and its
//! last key before the next segment's start key (so the level's ranges are disjoint and ordered);
//! meta pages in blocks the namespace owns. Per entry: the pointer resolves to a record of this
//! namespace carrying exactly that key and a value of the indexed length.
//!
//! Entries shadowed by a newer version of their key (in L0 or a level above) are not resolved:
//! their records are garbage that GC may already have erased, which is not a problem.
//!
//! Log pages after a crash may end in a torn page until the next checkpoint trims the log; run the
//! check after [`crate::Device::checkpoint`] (as `kvssd check` does) so that a problem there is real.
//! [`crate::Device::check`] runs it.

use std::collections::BTreeSet;
use std::fmt;

use kvssd_engine::lsm::inspect::{decode_meta_page, IndexEntry};
use kvssd_engine::LevelsView;
use kvssd_flash::{Purpose, SimTime};
use kvssd_space::{PageIndex, RecordPointer, Space};

use crate::durability::recovery;

/// Why a meta page a level list names cannot be checked (reported as a [`Problem`]).
#[derive(Debug, thiserror::Error)]
enum MetaPageError {
    /// Its block belongs to another namespace, or to none.
    #[error("the block belongs to {owner:?}, not to this namespace")]
    ForeignBlock {
        /// The block's owner.
        owner: Option<u32>,
    },
    /// The read failed (after the space layer's retries).
    #[error("unreadable: {0}")]
    Unreadable(kvssd_space::SpaceError),
    /// The page does not decode as a meta segment.
    #[error("does not decode: {0}")]
    Undecodable(kvssd_engine::EngineError),
}
use crate::{NamespaceId, Result};

/// One problem the checker found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The namespace it concerns (`None` for the device's durable structures).
    pub namespace: Option<NamespaceId>,
    /// Where: the page (device-wide page index, with its block and page within the block) or the
    /// index position.
    pub location: String,
    /// What is wrong, in one line.
    pub what: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.namespace {
            Some(namespace) => write!(f, "namespace {namespace}, {}: {}", self.location, self.what),
            None => write!(f, "{}: {}", self.location, self.what),
        }
    }
}

/// What a check read and found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// Namespaces checked.
    pub namespaces: usize,
    /// Levels below L0 checked, summed over namespaces.
    pub levels: usize,
    /// Meta pages read from flash.
    pub meta_pages_read: u64,
    /// Meta segments checked from DRAM (pinned levels).
    pub pinned_segments: u64,
    /// Index entries checked.
    pub entries: u64,
    /// Value records read and matched against their entries.
    pub records_read: u64,
    /// Checkpoint and log pages read.
    pub system_pages_read: u64,
    /// Namespaces whose engine the checker cannot inspect (skipped, not a problem).
    pub namespaces_skipped: usize,
    /// Every problem found, in the order found.
    pub problems: Vec<Problem>,
}

impl CheckReport {
    /// Whether the device passed.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

fn page_location(space: &Space, page: PageIndex) -> String {
    let pages_per_block = u64::from(space.geometry().pages_per_block);
    format!(
        "page {} (block {}, page {} of the block)",
        page.0,
        page.0 / pages_per_block,
        page.0 % pages_per_block
    )
}

fn printable(key: &[u8]) -> String {
    key.iter()
        .flat_map(|&byte| std::ascii::escape_default(byte))
        .map(char::from)
        .collect()
}

/// Checks one namespace's levels: L0's keys and each level's list (see the module documentation);
/// returns when the reads complete.
pub(crate) fn check_levels(
    space: &mut Space,
    namespace: NamespaceId,
    view: LevelsView,
    at: SimTime,
    report: &mut CheckReport,
) -> SimTime {
    let mut checker = TreeChecker {
        space,
        namespace,
        report,
        newer: view.l0.into_iter().map(|(key, _)| key).collect(),
        t: at,
    };
    for (level, segments) in view.levels.iter().enumerate() {
        checker.report.levels += 1;
        checker.level(level + 1, segments);
    }
    checker.t
}

/// Checks the checkpoint and live log the newest superblock copy names.
pub(crate) fn check_durable(
    space: &mut Space,
    at: SimTime,
    report: &mut CheckReport,
) -> Result<SimTime> {
    let flash = space.flash_mut();
    let geometry = *flash.geometry();
    let mut t = at;
    let root = match recovery::read_superblock(flash, t) {
        Ok(Some((_, root, _, done))) => {
            t = t.max(done);
            root
        }
        Ok(None) => {
            report.problems.push(Problem {
                namespace: None,
                location: "superblock".into(),
                what: "no superblock copy found".into(),
            });
            return Ok(t);
        }
        Err(error) => {
            report.problems.push(Problem {
                namespace: None,
                location: "superblock".into(),
                what: error.to_string(),
            });
            return Ok(t);
        }
    };
    if let Some(location) = &root.checkpoint {
        for extent in &location.extents {
            for page in extent.first_page..extent.first_page + extent.pages {
                t = read_system_page(flash, t, "checkpoint", extent.block, page, report)?;
            }
        }
    }
    for &block in &root.log_blocks {
        let programmed = flash
            .programmed_pages(geometry.block_at(block))
            .map_err(|error| crate::DeviceError::Space(error.into()))?;
        for page in 0..programmed {
            t = read_system_page(flash, t, "log", block, page, report)?;
        }
    }
    if root.checkpoint.is_some() {
        if let Err(error) = recovery::read_checkpoint(flash, t, &root) {
            report.problems.push(Problem {
                namespace: None,
                location: "checkpoint".into(),
                what: error.to_string(),
            });
        }
    }
    Ok(t)
}

/// Reads one page of the durable structures; a page that stays unreadable is a problem.
fn read_system_page(
    flash: &mut kvssd_flash::Flash,
    at: SimTime,
    what: &str,
    block: u64,
    page: u32,
    report: &mut CheckReport,
) -> Result<SimTime> {
    let geometry = *flash.geometry();
    let address = geometry.block_at(block).page(page);
    let (bytes, done) = recovery::read_page(flash, at, address)?;
    report.system_pages_read += 1;
    if bytes.is_none() {
        report.problems.push(Problem {
            namespace: None,
            location: format!(
                "{what} page {} (block {block}, page {page} of the block)",
                block * u64::from(geometry.pages_per_block) + u64::from(page)
            ),
            what: "unreadable: checksum failure (or erased)".into(),
        });
    }
    Ok(at.max(done))
}

struct TreeChecker<'a> {
    space: &'a mut Space,
    namespace: NamespaceId,
    report: &'a mut CheckReport,
    /// Keys with a newer version (L0 and the levels checked so far).
    newer: BTreeSet<Vec<u8>>,
    t: SimTime,
}

impl TreeChecker<'_> {
    fn problem(&mut self, location: String, what: String) {
        self.report.problems.push(Problem {
            namespace: Some(self.namespace),
            location,
            what,
        });
    }

    fn level(&mut self, level: usize, segments: &[kvssd_engine::lsm::inspect::SegmentView]) {
        let mut seen_here = Vec::new();
        for (index, segment) in segments.iter().enumerate() {
            let position = format!("L{level} segment {index}");
            if index > 0 && segments[index - 1].start_key >= segment.start_key {
                self.problem(
                    position.clone(),
                    format!(
                        "start key '{}' is not after the previous segment's '{}'",
                        printable(&segment.start_key),
                        printable(&segments[index - 1].start_key)
                    ),
                );
            }
            let (entries, location) = match (&segment.entries, segment.page) {
                (Some(entries), _) => {
                    self.report.pinned_segments += 1;
                    (entries.clone(), format!("{position} (pinned)"))
                }
                (None, Some(page)) => {
                    let location = format!("{position}, meta {}", page_location(self.space, page));
                    match self.read_meta(page) {
                        Ok(entries) => (entries, location),
                        Err(error) => {
                            self.problem(location, error.to_string());
                            continue;
                        }
                    }
                }
                (None, None) => {
                    self.problem(
                        position,
                        "neither pinned entries nor a flash address".into(),
                    );
                    continue;
                }
            };
            self.segment(&location, segment, segments.get(index + 1), &entries);
            seen_here.extend(entries.into_iter().map(|entry| entry.key));
        }
        self.newer.extend(seen_here);
    }

    fn read_meta(
        &mut self,
        page: PageIndex,
    ) -> std::result::Result<Vec<IndexEntry>, MetaPageError> {
        let block = page.0 / u64::from(self.space.geometry().pages_per_block);
        let owner = self.space.block_owner(block);
        if owner != Some(self.namespace.0) {
            return Err(MetaPageError::ForeignBlock { owner });
        }
        self.report.meta_pages_read += 1;
        let (bytes, done) = self
            .space
            .read_page(self.t, page, Purpose::Index)
            .map_err(MetaPageError::Unreadable)?;
        self.t = self.t.max(done);
        decode_meta_page(&bytes, page).map_err(MetaPageError::Undecodable)
    }

    fn segment(
        &mut self,
        location: &str,
        segment: &kvssd_engine::lsm::inspect::SegmentView,
        next: Option<&kvssd_engine::lsm::inspect::SegmentView>,
        entries: &[IndexEntry],
    ) {
        let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
            self.problem(location.into(), "the segment has no entries".into());
            return;
        };
        if first.key != segment.start_key {
            self.problem(
                location.into(),
                format!(
                    "first key '{}' differs from the level list's start key '{}'",
                    printable(&first.key),
                    printable(&segment.start_key)
                ),
            );
        }
        if let Some(next) = next {
            if last.key >= next.start_key {
                self.problem(
                    location.into(),
                    format!(
                        "last key '{}' is not before the next segment's start key '{}' (ranges overlap)",
                        printable(&last.key),
                        printable(&next.start_key)
                    ),
                );
            }
        }
        for pair in entries.windows(2) {
            if pair[0].key >= pair[1].key {
                self.problem(
                    location.into(),
                    format!(
                        "keys out of order: '{}' then '{}'",
                        printable(&pair[0].key),
                        printable(&pair[1].key)
                    ),
                );
            }
        }
        for entry in entries {
            self.report.entries += 1;
            if self.newer.contains(&entry.key) {
                continue;
            }
            if let Some(pointer) = entry.pointer {
                self.record(location, entry, pointer);
            }
        }
    }

    fn record(&mut self, location: &str, entry: &IndexEntry, pointer: RecordPointer) {
        let where_ = format!(
            "record of key '{}' at data {} chunk {} (indexed in {location})",
            printable(&entry.key),
            page_location(self.space, pointer.page()),
            pointer.chunk()
        );
        self.report.records_read += 1;
        match self.space.read_record(self.t, pointer, Purpose::UserData) {
            Err(error) => self.problem(where_, format!("unreadable: {error}")),
            Ok((record, done)) => {
                self.t = self.t.max(done);
                if record.key != entry.key {
                    self.problem(
                        where_,
                        format!("the record carries key '{}'", printable(&record.key)),
                    );
                } else if record.namespace != self.namespace.0 {
                    self.problem(
                        where_,
                        format!("the record belongs to namespace {}", record.namespace),
                    );
                } else if record.value.len() != entry.value_len as usize {
                    self.problem(
                        where_,
                        format!(
                            "the value is {} bytes, the index says {}",
                            record.value.len(),
                            entry.value_len
                        ),
                    );
                }
            }
        }
    }
}
