//! `kvssd bench ycsb --heights`: PinK's Fig. 13, flash reads per GET as the LSM-tree gets taller
//! in the same DRAM.
//!
//! Every height h (L0 included) gets its own fresh device of the profile, with the same data, the
//! same L0 and the same DRAM budget; only the tree's shape changes. The profile's own height keeps
//! the profile's tree exactly (the default profile: h = 5, T = 10, L1 of 625 entries), so that
//! run is the plain `kvssd bench ycsb` run. Any other height gets h − 1 levels below L0 and the
//! smallest size factor T >= 2 with `L0 pairs × T^(h−1) >= records`, that is
//! T = ceil((records / L0 pairs)^(1/(h−1))), and L1 = T × L0 pairs: the last level is the first
//! whose capacity reaches the data. The engine then plans as it always does: it pins L1..Lk while
//! the budget holds them at capacity, so a taller tree pins fewer of its levels and a GET may read
//! up to h − k − 1 meta pages (PinK §5.2: for h = 6, 7 and 8, pinning all but the last level
//! needs 176, 292 and 437 MB of 64 MB).

use crate::report::{BenchReport, BenchResult};
use crate::ycsb::{run_jobs, run_phases, BenchProfile, YcsbConfig, YcsbProgress};

/// Lowest height: L0 and one level.
pub const HEIGHT_MIN: u32 = 2;
/// Highest height accepted.
pub const HEIGHT_MAX: u32 = 12;

/// Why a height cannot be swept on a profile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeightError {
    /// Outside `HEIGHT_MIN..=HEIGHT_MAX`.
    #[error("height {height} is outside {HEIGHT_MIN} to {HEIGHT_MAX} (h counts L0)")]
    OutOfRange {
        /// The height asked for.
        height: u32,
    },
    /// The data does not reach the last level even at the smallest size factor.
    #[error("height {height}: {records} records in an L0 of {l0_pairs} pairs reach only {reached} levels at size factor 2; load more records or ask for a lower height")]
    TooFewRecords {
        /// The height asked for.
        height: u32,
        /// Records loaded.
        records: u64,
        /// Pairs per L0 flush.
        l0_pairs: u64,
        /// Height the data reaches (L0 included).
        reached: usize,
    },
}

impl BenchProfile {
    /// The profile with an LSM-tree of `height` levels (L0 included) holding the same data with
    /// the same L0 and DRAM budget (the rule is in the [module docs](self)).
    pub fn with_height(&self, height: u32) -> Result<BenchProfile, HeightError> {
        if !(HEIGHT_MIN..=HEIGHT_MAX).contains(&height) {
            return Err(HeightError::OutOfRange { height });
        }
        if height == self.levels_below_l0 + 1 {
            return Ok(self.clone());
        }
        let l0_pairs = self.l0_pairs();
        let size_factor = size_factor_for(self.records, l0_pairs, height - 1);
        let mut profile = self.clone();
        profile.levels_below_l0 = height - 1;
        profile.size_factor = size_factor;
        profile.l1_entries = l0_pairs.saturating_mul(u64::from(size_factor));
        let tree = profile.tree_after_load();
        let reached = tree.iter().rposition(|&entries| entries > 0).unwrap_or(0) + 1;
        if reached < height as usize {
            return Err(HeightError::TooFewRecords {
                height,
                records: self.records,
                l0_pairs,
                reached,
            });
        }
        Ok(profile)
    }

    /// Pairs L0 holds before it flushes, at the profile's key and value sizes.
    pub fn l0_pairs(&self) -> u64 {
        kvssd_engine::lsm::l0_pairs(
            self.l0_bytes,
            self.key_bytes as u64,
            self.value_bytes as u64,
        )
    }
}

/// The smallest T >= 2 with `l0_pairs × T^levels >= records` (integers, so no rounding).
pub fn size_factor_for(records: u64, l0_pairs: u64, levels: u32) -> u32 {
    let reaches = |t: u64| -> bool {
        let mut capacity = u128::from(l0_pairs.max(1));
        for _ in 0..levels {
            capacity = capacity.saturating_mul(u128::from(t));
        }
        capacity >= u128::from(records)
    };
    let (mut low, mut high) = (2u64, u64::from(u32::MAX));
    if reaches(low) {
        return 2;
    }
    // Invariant: `low` does not reach, `high` does (or is the largest T there is).
    while high - low > 1 {
        let middle = low + (high - low) / 2;
        if reaches(middle) {
            high = middle;
        } else {
            low = middle;
        }
    }
    high as u32
}

/// One height sweep: a YCSB run (presets, workloads, profile, seed) at every height.
#[derive(Debug, Clone)]
pub struct HeightsConfig {
    /// The run at every height; its profile is the base the heights reshape.
    pub ycsb: YcsbConfig,
    /// Heights h, L0 included.
    pub heights: Vec<u32>,
}

impl HeightsConfig {
    /// The profile of each height, in order; the first height that cannot be built is the error.
    pub fn profiles(&self) -> Result<Vec<(u32, BenchProfile)>, HeightError> {
        self.heights
            .iter()
            .map(|&height| Ok((height, self.ycsb.profile.with_height(height)?)))
            .collect()
    }

    /// The label of each run (height and preset), in run order: heights outer, presets inner.
    pub fn labels(&self) -> Vec<String> {
        self.heights
            .iter()
            .flat_map(|height| {
                self.ycsb
                    .presets
                    .iter()
                    .map(move |preset| label(preset, *height))
            })
            .collect()
    }
}

fn label(preset: &str, height: u32) -> String {
    format!("{preset} h={height}")
}

/// Runs every preset at every height, each on its own fresh device, `threads` at a time; progress
/// is reported under [`HeightsConfig::labels`]. Results are in label order, each with `params`:
/// `height`, `size_factor`, `l1_entries`, `levels_after_load` (h as built), `pinned_levels` (k)
/// and `worst_case_index_reads` (h − k − 1).
pub fn run(
    config: &HeightsConfig,
    threads: usize,
    progress: YcsbProgress<'_>,
) -> Result<BenchReport, String> {
    let profiles = config.profiles().map_err(|error| error.to_string())?;
    let jobs: Vec<(&BenchProfile, u32, &str)> = profiles
        .iter()
        .flat_map(|(height, profile)| {
            config
                .ycsb
                .presets
                .iter()
                .map(move |preset| (profile, *height, preset.as_str()))
        })
        .collect();
    let mut report = BenchReport::simulated(config.ycsb.profile.name, config.ycsb.seed);
    for outcome in run_jobs(&jobs, threads, |&(profile, height, preset)| {
        run_height(&config.ycsb, profile, height, preset, progress)
    }) {
        let (results, notes) = outcome?;
        report.results.extend(results);
        report.notes.extend(notes);
    }
    Ok(report)
}

fn run_height(
    base: &YcsbConfig,
    profile: &BenchProfile,
    height: u32,
    preset: &str,
    progress: YcsbProgress<'_>,
) -> Result<(Vec<BenchResult>, Vec<String>), String> {
    let config = YcsbConfig {
        profile: profile.clone(),
        ..base.clone()
    };
    let name = label(preset, height);
    let (mut results, notes, target) = run_phases(&config, preset, &name, progress)
        .map_err(|error| format!("h={height}: {error}"))?;
    let (built, pinned) = target
        .tree()
        .ok_or_else(|| format!("{preset} has no LSM-tree to sweep the height of"))?;
    for result in &mut results {
        let params = result.params.get_or_insert_with(Default::default);
        params.insert("height".into(), height.into());
        params.insert("size_factor".into(), profile.size_factor.into());
        params.insert("l1_entries".into(), profile.l1_entries.into());
        params.insert("levels_after_load".into(), built.into());
        params.insert("pinned_levels".into(), pinned.into());
        params.insert(
            "worst_case_index_reads".into(),
            built.saturating_sub(pinned + 1).into(),
        );
    }
    let notes = notes
        .into_iter()
        .map(|note| {
            format!(
                "h={height} (T = {}, L1 = {} entries): {note}",
                profile.size_factor, profile.l1_entries
            )
        })
        .collect();
    Ok((results, notes))
}

/// The sweep's own table: per height and preset, the plan (T, k, worst-case index reads) beside
/// the flash and index reads of each point GET (mean, p99.99, largest) and throughput.
pub fn table(report: &BenchReport) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>2} {:>3} {:>6} {:<11} {:>2} {:>10} {:<5} {:>21} {:>21} {:>9}",
        "h",
        "T",
        "L1",
        "preset",
        "k",
        "worst idx",
        "wl",
        "flash reads/GET avg",
        "index reads/GET avg",
        "KIOPS"
    );
    let _ = writeln!(
        out,
        "{:>2} {:>3} {:>6} {:<11} {:>2} {:>10} {:<5} {:>21} {:>21} {:>9}",
        "", "", "", "", "", "(h-k-1)", "", "p99.99 max", "p99.99 max", ""
    );
    for result in &report.results {
        let Some(params) = &result.params else {
            continue;
        };
        let get = |key: &str| {
            params
                .get(key)
                .and_then(|value| value.as_u64())
                .unwrap_or(0)
        };
        let reads = |pick: fn(&crate::counts::GetReads) -> crate::counts::CountSummary| {
            result.point_get_reads.as_ref().map_or_else(
                || "-".to_string(),
                |reads| {
                    let summary = pick(reads);
                    format!("{:.2} {:>5} {:>4}", summary.avg, summary.p9999, summary.max)
                },
            )
        };
        let _ = writeln!(
            out,
            "{:>2} {:>3} {:>6} {:<11} {:>2} {:>10} {:<5} {:>21} {:>21} {:>9.1}",
            get("height"),
            get("size_factor"),
            get("l1_entries"),
            result.preset,
            get("pinned_levels"),
            get("worst_case_index_reads"),
            result.workload,
            reads(|reads| reads.flash),
            reads(|reads| reads.index),
            result.throughput_kops
        );
    }
    out
}

#[cfg(test)]
mod tests;
