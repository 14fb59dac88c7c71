//! Host memory a benchmark needs, estimated before it starts: a configuration that would not fit
//! the machine is refused with one line rather than swapping, or being killed, an hour in.
//!
//! The estimate of one preset's peak is what its simulated media hold plus what the process keeps
//! besides, from the profile alone:
//!
//! * **ram media** keep every block programmed, and GC programs them all in time: the whole card.
//! * **compact media** keep per record its header, key and value description on a data page
//!   ([`COMPACT_DATA_RECORD_BYTES`] beyond the key) and one index entry on a meta page (the key and
//!   [`INDEX_ENTRY_BYTES`]), plus per block half a chunk of slack and its tables. A record
//!   overwritten stays on its data page until GC erases the block, so a run that overwrites
//!   (`kvssd bench gc`) holds a data record per write, up to as many as the card's pages can
//!   take.
//! * **the process** holds more than its media: the allocator keeps freed memory for a moment,
//!   merges hold a level's new pages before they are written, and the engines, the calendars and
//!   the runner have their own; on compact media all of it is taken in proportion to the media
//!   ([`RESIDENT_PER_MEDIA_BYTE`], [`RESIDENT_PER_MEDIA_BYTE_OVERWRITING`] for a run that
//!   overwrites), on the others as a fixed part ([`FIXED_BYTES`]).
//!
//! Calibrated on one measurement, validated on another (both in docs/design.md, "Host memory"):
//! the ratio comes from `pink` on the paper profile's card at 32 blocks per die (Load of 2.75M
//! pairs, then 1M requests of C); the estimate is checked against the paper profile's own Load
//! and C (44M pairs, 10M requests). The ratio of a run that overwrites comes from the GC stress
//! on the card at 32 blocks per die, and is checked against the same stress at 64.

use crate::profile::BenchProfile;
use kvssd_flash::MediaKind;

/// Bytes a record takes on a compact data page beyond its key: its 16-byte header, its value's
/// 16-byte description with the encoding's run header, and its share of the page's padding and
/// out-of-band bytes. (The encoding has since shortened a record by 5 bytes; the estimate, a
/// guard calibrated with this figure, was left as it was.)
pub const COMPACT_DATA_RECORD_BYTES: u64 = 16 + 24 + 8;
/// Bytes an index entry takes on a meta page beyond its key (length, pointer, value length,
/// offset slot).
pub const INDEX_ENTRY_BYTES: u64 = 15;
/// Peak resident bytes of the process per byte its compact media hold after Load: 431 MB at the
/// peak against 355 MB held after the calibrating Load.
pub const RESIDENT_PER_MEDIA_BYTE: f64 = 1.21;
/// The same ratio for a run that overwrites (`kvssd bench gc`), at its peak: the runner's versions
/// of the keys it updated, the timing calendars' queues and the memory the allocator has not yet
/// reused come on top of the media. 626 MB at `lightstore`'s peak (the highest of the GC stress's
/// presets) against 442 MB modelled, on the card at 32 blocks per die.
pub const RESIDENT_PER_MEDIA_BYTE_OVERWRITING: f64 = 1.42;
/// Resident bytes of the process besides its media, on ram and file media.
pub const FIXED_BYTES: u64 = 96 << 20;

/// The expected peak resident memory of one preset's run on `profile`, bytes.
pub fn preset_peak_bytes(profile: &BenchProfile) -> u64 {
    preset_peak_bytes_overwriting(profile, 0)
}

/// The expected peak resident memory of one preset's run on `profile` that overwrites
/// `overwrites` records after Load, bytes.
pub fn preset_peak_bytes_overwriting(profile: &BenchProfile, overwrites: u64) -> u64 {
    let geometry = &profile.flash.geometry;
    let blocks = geometry.blocks_total();
    let block_bytes =
        u64::from(geometry.pages_per_block) * u64::from(geometry.page_bytes + geometry.oob_bytes);
    match &profile.media {
        MediaKind::Ram => blocks * block_bytes + FIXED_BYTES,
        MediaKind::Compact => {
            let key = profile.key_bytes as u64;
            // Data records held: every one written, until the card's pages are full of them.
            let page_bytes = u64::from(geometry.page_bytes);
            let per_page = page_bytes / profile.record_flash_bytes().min(page_bytes).max(1);
            let card_records = geometry.pages_total() * per_page;
            let data_records = profile
                .records
                .saturating_add(overwrites)
                .min(card_records.max(profile.records));
            let slot_bytes = (geometry.page_bytes + geometry.oob_bytes) as usize;
            let per_block = (kvssd_flash::compact_chunk_bytes(slot_bytes) / 2) as u64
                + 8 * u64::from(geometry.pages_per_block);
            let held = data_records * (key + COMPACT_DATA_RECORD_BYTES)
                + profile.records * (key + INDEX_ENTRY_BYTES)
                + blocks * per_block;
            let ratio = if overwrites > 0 {
                RESIDENT_PER_MEDIA_BYTE_OVERWRITING
            } else {
                RESIDENT_PER_MEDIA_BYTE
            };
            (held as f64 * ratio) as u64
        }
        MediaKind::File(_) => FIXED_BYTES,
    }
}

/// Bytes of memory the system can give now (`MemAvailable` of `/proc/meminfo`); `None` where it
/// cannot be read.
pub fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text
        .lines()
        .find(|line| line.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Checks that `presets` runs of `per_preset` bytes each, `threads` at a time, fit in `available`
/// bytes; `Err` is the one line to print.
pub fn check_fits(
    per_preset: u64,
    presets: usize,
    threads: usize,
    available: u64,
) -> Result<(), String> {
    let at_once = presets.min(threads).max(1) as u64;
    let needed = per_preset * at_once;
    if needed <= available {
        return Ok(());
    }
    let gib = |bytes: u64| bytes as f64 / (1u64 << 30) as f64;
    let advice = if at_once > 1 && per_preset <= available {
        format!(
            "run at most {} presets at once (--threads {})",
            (available / per_preset).max(1),
            (available / per_preset).max(1)
        )
    } else {
        "use a smaller card (--blocks-per-die) or fewer records (--records)".to_string()
    };
    Err(format!(
        "this run would need about {:.1} GiB of memory ({at_once} preset(s) at once, {:.1} GiB each) and {:.1} GiB is available: {advice}, or pass --no-memory-check",
        gib(needed),
        gib(per_preset),
        gib(available)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_paper_profile_on_ram_media_needs_its_whole_card() {
        let mut paper = BenchProfile::paper();
        let compact = preset_peak_bytes(&paper);
        paper.media = MediaKind::Ram;
        let ram = preset_peak_bytes(&paper);
        assert!(ram > 64 << 30, "{ram}");
        assert!(compact < ram / 4, "{compact} against {ram}");
    }

    #[test]
    fn overwrites_are_held_until_the_card_is_full_of_them() {
        let paper = BenchProfile::paper();
        let load = preset_peak_bytes(&paper);
        assert_eq!(preset_peak_bytes_overwriting(&paper, 0), load);
        let some = preset_peak_bytes_overwriting(&paper, 1_000_000);
        assert!(some > load, "{some} against {load}");
        // PinK's 100M overwrites and a billion fill the same card.
        let full = preset_peak_bytes_overwriting(&paper, 100_000_000);
        assert_eq!(preset_peak_bytes_overwriting(&paper, 1_000_000_000), full);
        assert!(full > some, "{full} against {some}");
    }

    #[test]
    fn a_run_that_does_not_fit_is_refused_with_advice() {
        let gib = 1u64 << 30;
        assert!(check_fits(7 * gib, 3, 2, 23 * gib).is_ok());
        let error = check_fits(7 * gib, 3, 3, 20 * gib).expect_err("21 GiB > 20 GiB");
        assert!(error.contains("--threads 2"), "{error}");
        let error = check_fits(30 * gib, 1, 2, 20 * gib).expect_err("one preset too big");
        assert!(error.contains("--blocks-per-die"), "{error}");
        assert!(!error.contains('\n'), "one line");
    }
}
