//! Power-loss protection (PinK §4.6, KAML §IV-D: the capacitor assumption), simulated flash only.
//!
//! The device keeps its state in DRAM and writes nothing for durability while it runs. When power
//! fails the controller is told ([`crate::Device::power_cut`]) and, on the capacitor's energy,
//! writes a **dump**: the partly filled data pages, then one record framed like a checkpoint
//! (`super::checkpoint`: the namespace table, the space layer's state and every index's DRAM
//! state — L0, level lists, pinned segments, Bloom filters, hash directories, dirty bucket pages,
//! in-DRAM tables and write buffers) into free blocks, then a superblock copy naming it. Only then
//! does the flash lose power. Recovery (the device's `open` module) loads the dump, writes a
//! superblock copy that names no dump ("running") and erases the dump. A superblock that names no dump at open means the last dump
//! did not complete (the capacitor ran out): open refuses with [`crate::DeviceError::DumpMissing`]
//! rather than load stale state.
//!
//! The dump's size is bounded by the DRAM budget ([`DumpBound`]): at most
//! `DUMP_EXPANSION_MAX x` each namespace's DRAM budget plus the namespace table and the space
//! layer's state, in log-framed pages, plus one open data page per namespace and log, plus one
//! superblock page and at most one erase (the superblock block, when full).

use kvssd_flash::{Geometry, SimTime, TimingProfile};
use kvssd_space::Space;

use crate::durability::journal::Journal;
use crate::durability::log::{FRAGMENT_HEADER_BYTES, PAGE_HEADER_BYTES};
use crate::{DeviceConfig, PresetKind, Result};

/// An index's dump is at most this many times the DRAM it accounts for (plus
/// [`DUMP_NAMESPACE_OVERHEAD_BYTES`]): the encodings store keys and pointers with a few bytes of
/// framing each, and a `hash` dirty bucket page's used slots take 24 bytes against 9 in DRAM.
pub const DUMP_EXPANSION_MAX: u64 = 3;
/// Fixed bytes of one namespace's part of a dump (headers, counts, the namespace table entry).
pub const DUMP_NAMESPACE_OVERHEAD_BYTES: u64 = 256;

/// What the dump at a power cut may cost at most, for a device configuration and number of
/// namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DumpBound {
    /// Most bytes of the dump record.
    pub record_bytes: u64,
    /// Most page programs: dump pages, open data pages and the superblock copy.
    pub page_programs: u64,
    /// Most erases (the superblock block, when full).
    pub erases: u64,
}

impl DumpBound {
    /// Worst-case time of the dump on `timing` when its pages are spread over `dies` dies (the
    /// durability layer takes consecutive dump blocks on consecutive dies): the pages of one die
    /// are programmed one after another, the dies in parallel, plus the erase.
    pub fn striped_ns(&self, timing: &TimingProfile, dies: u64, pages_per_block: u64) -> u64 {
        // Whole blocks go to one die each; the die with the most blocks sets the time.
        let blocks = self.page_programs.div_ceil(pages_per_block.max(1));
        let per_die = blocks.div_ceil(dies.max(1)) * pages_per_block.max(1);
        per_die.min(self.page_programs) * timing.program_ns + self.erases * timing.erase_ns
    }
}

/// What one dump wrote (measured from the flash counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DumpReport {
    /// Bytes of the dump record.
    pub record_bytes: u64,
    /// Pages programmed (dump, open data pages, superblock copy).
    pub page_programs: u64,
    /// Blocks erased.
    pub erases: u64,
    /// Simulated time from the cut to the last program, in nanoseconds.
    pub simulated_ns: u64,
    /// The bound for the device as it was at the cut.
    pub bound: DumpBound,
}

/// The DRAM budget a namespace of `preset` has under `config` on `geometry`.
fn dram_budget(config: &DeviceConfig, geometry: &Geometry, preset: PresetKind) -> u64 {
    let budget = preset.engine_factory().dram_budget_bytes(config);
    if budget == 0 {
        geometry.capacity_bytes() / 1000
    } else {
        budget
    }
}

/// The dump bound for namespaces of `presets` under `config` on `geometry`.
pub fn dump_bound(config: &DeviceConfig, geometry: &Geometry, presets: &[PresetKind]) -> DumpBound {
    let logs = u64::from(config.space.logs.max(1));
    let namespaces = presets.len() as u64;
    // The space layer's state: per block use, owner, allocation stamp and successor; per log its
    // die; per namespace its cursors.
    let space_state = 24 + geometry.blocks_total() * 22 + logs * 4 + namespaces * (16 + logs * 40);
    let indexes: u64 = presets
        .iter()
        .map(|&preset| {
            DUMP_EXPANSION_MAX * dram_budget(config, geometry, preset)
                + DUMP_NAMESPACE_OVERHEAD_BYTES
                + 1
                + crate::NAMESPACE_NAME_BYTES_MAX as u64
                + 8 * logs
        })
        .sum();
    let record_bytes = 64 + space_state + indexes;
    let payload = u64::from(geometry.page_bytes)
        .saturating_sub((PAGE_HEADER_BYTES + FRAGMENT_HEADER_BYTES) as u64)
        .max(1);
    let dump_pages = record_bytes.div_ceil(payload);
    DumpBound {
        record_bytes,
        page_programs: dump_pages + namespaces * logs + 1,
        erases: 1,
    }
}

/// Writes the dump from the parts the device published (every index's state) and the journal's
/// namespace table: a checkpoint record and a superblock copy naming it. Reports what it wrote,
/// measured from the flash counters, beside `bound`.
pub(crate) fn write_dump(
    journal: &mut Journal,
    space: &mut Space,
    at: SimTime,
    bound: DumpBound,
) -> Result<DumpReport> {
    let record_bytes = space
        .parts()
        .values()
        .map(|part| part.bytes.len() as u64)
        .sum::<u64>();
    let before = space.flash().counters();
    let done = journal.checkpoint(space, at, true)?;
    let after = space.flash().counters();
    let delta = after.total() - before.total();
    Ok(DumpReport {
        record_bytes,
        page_programs: delta.programs,
        erases: delta.erases,
        simulated_ns: done.saturating_sub(at),
        bound,
    })
}
