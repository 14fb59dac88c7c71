//! The benchmarks' device and data-set sizes ([`BenchProfile`]) and the device configuration
//! each preset gets on them.

use kvssd_device::{DeviceConfig, Durability, PresetKind};
use kvssd_engine::hash::{HashConfig, HashPreset};
use kvssd_engine::{EngineConfig, Preset};
use kvssd_flash::{MediaKind, Profile};

/// A device and data-set size for the workload benchmarks.
#[derive(Debug, Clone)]
pub struct BenchProfile {
    /// Name users type (`--profile NAME`).
    pub name: &'static str,
    /// The simulated flash.
    pub flash: Profile,
    /// Where the simulated flash keeps its pages: [`MediaKind::Ram`] keeps every page's bytes,
    /// [`MediaKind::Compact`] keeps the benchmarks' values as their 16-byte descriptions (same
    /// figures, a fraction of the memory; values must be descriptions of themselves).
    pub media: MediaKind,
    /// Keys loaded before the workloads.
    pub records: u64,
    /// Requests per workload (A-F).
    pub operations: u64,
    /// Closed-loop clients.
    pub clients: u32,
    /// Key size, bytes.
    pub key_bytes: usize,
    /// Value size, bytes.
    pub value_bytes: usize,
    /// L0 (write buffer) size, bytes.
    pub l0_bytes: u64,
    /// Size factor between levels.
    pub size_factor: u32,
    /// Capacity of L1 in entries.
    pub l1_entries: u64,
    /// Levels below L0; the last one takes whatever the levels above it do not hold.
    pub levels_below_l0: u32,
    /// DRAM budget for indexing, as a fraction of the flash capacity.
    pub dram_fraction: f64,
}

impl BenchProfile {
    /// Names accepted by [`BenchProfile::by_name`].
    pub const NAMES: [&'static str; 2] = ["default", "paper"];

    /// PinK's setup scaled down so that Load and A-F for three presets run in minutes on a laptop:
    /// the same card (8 x 8 dies, 8 KiB pages, 2 MiB blocks) with 1/16 of the capacity (4 GiB), the
    /// same DRAM ratio for indexing (0.1%), the same key and value sizes, and everything else sized
    /// by capacity divided by 16 too: the pairs loaded (2.75M of 44M, filling the card as PinK's
    /// does), L0 (64 KiB of 1 MiB) and L1 (625 of 10,000 entries). L0 then holds 61 pairs where
    /// the paper profile's holds 978, so both trees see the same sequence of merges, and after Load
    /// both hold the same share of their entries per level (docs/design.md, "The default profile's
    /// tree"): L0 and four levels below it (h = 5), L1-L3 pinned in DRAM, only the last level on
    /// flash. (Smaller devices leave too few blocks: 64 append points keep 128 blocks open, and GC
    /// keeps its reserve.)
    pub fn scaled() -> BenchProfile {
        BenchProfile {
            name: "default",
            flash: Profile::pink_with_blocks(32),
            media: MediaKind::Ram,
            records: 2_750_000,
            operations: 100_000,
            clients: 64,
            key_bytes: 32,
            value_bytes: 1024,
            l0_bytes: 64 << 10,
            size_factor: 10,
            l1_entries: 625,
            levels_below_l0: 4,
            dram_fraction: 0.001,
        }
    }

    /// PinK's evaluation at full size (§5.1): 64 GiB, 64 MiB of DRAM for indexing, 44M pairs of 32 B
    /// keys and 1 KiB values, 10M requests per workload, 64 clients. On compact media: ram media
    /// would need as much host memory as the card holds.
    pub fn paper() -> BenchProfile {
        BenchProfile {
            name: "paper",
            flash: Profile::pink(),
            media: MediaKind::Compact,
            records: 44_000_000,
            operations: 10_000_000,
            l0_bytes: 1 << 20,
            l1_entries: 10_000,
            ..BenchProfile::scaled()
        }
    }

    /// The same profile on a card with `blocks_per_die` blocks per die. What is sized by capacity
    /// scales with it: the pairs loaded (Load leaves the card as full as before), L0 and L1, so
    /// every level keeps its share of the data (the last level's size over L3's stays as it was:
    /// whole-level merges into it cost in proportion). Per-die costs (an open block per log and
    /// stream, the GC reserve) do not: this is how to see what the default profile's 1/16 of PinK's
    /// capacity does to GC.
    pub fn with_blocks_per_die(mut self, blocks_per_die: u32) -> Result<BenchProfile, String> {
        let base = self.flash.geometry.blocks_per_die;
        let mut geometry = self.flash.geometry;
        geometry.blocks_per_die = blocks_per_die;
        geometry
            .validate()
            .map_err(|error| format!("--blocks-per-die {blocks_per_die}: {error}"))?;
        kvssd_space::SpaceConfig::for_geometry(&geometry)
            .check(&geometry)
            .map_err(|error| format!("--blocks-per-die {blocks_per_die}: {error}"))?;
        let scale = |value: u64| -> Result<u64, String> {
            let scaled = u128::from(value) * u128::from(blocks_per_die) / u128::from(base.max(1));
            match u64::try_from(scaled) {
                Ok(scaled) if scaled > 0 => Ok(scaled),
                _ => Err(format!(
                    "--blocks-per-die {blocks_per_die}: the profile cannot be scaled to this size"
                )),
            }
        };
        self.records = scale(self.records)?;
        self.l1_entries = scale(self.l1_entries)?;
        self.l0_bytes = scale(self.l0_bytes)?;
        self.flash.geometry = geometry;
        Ok(self)
    }

    /// Bytes of flash one record of the profile takes: its header, key and value rounded up to
    /// the space layer's chunks, or whole pages for a value larger than a page.
    pub fn record_flash_bytes(&self) -> u64 {
        let geometry = &self.flash.geometry;
        let space = kvssd_space::SpaceConfig::for_geometry(geometry);
        let page = u64::from(geometry.page_bytes);
        let (key, value) = (self.key_bytes as u64, self.value_bytes as u64);
        let small = kvssd_space::RECORD_HEADER_BYTES as u64 + key + value;
        if small > page {
            let per_page = page.saturating_sub(kvssd_space::LARGE_HEADER_BYTES as u64 + key);
            value.div_ceil(per_page.max(1)) * page
        } else {
            small.div_ceil(u64::from(space.chunk_bytes)) * u64::from(space.chunk_bytes)
        }
    }

    /// Checks that the card can hold what Load writes: every record, and the index twice over (a
    /// merge into the last level writes the new level before it frees the old one), beside the
    /// blocks the space layer keeps open (two per log) and its GC reserve. Load writes unique
    /// keys, so GC finds nothing to reclaim but superseded index pages: on a card that cannot hold
    /// this, it moves every block in vain and fails minutes in, or crawls at the edge of it.
    /// `Err` is the one line to print.
    pub fn check_capacity(&self) -> Result<(), String> {
        let geometry = &self.flash.geometry;
        let space = kvssd_space::SpaceConfig::for_geometry(geometry);
        let page = u64::from(geometry.page_bytes);
        let (key, value) = (self.key_bytes as u64, self.value_bytes as u64);
        let record = self.record_flash_bytes();
        let index = key + crate::memory::INDEX_ENTRY_BYTES;
        let needed = u128::from(self.records) * u128::from(record + 2 * index);
        let kept = space.blocks_kept(geometry);
        let blocks = geometry.blocks_total();
        let block_bytes = u64::from(geometry.pages_per_block) * page;
        let usable = u128::from(blocks.saturating_sub(kept)) * u128::from(block_bytes);
        if needed <= usable {
            return Ok(());
        }
        let mib = |bytes: u128| bytes >> 20;
        Err(format!(
            "{} pairs of {key} B keys and {value} B values need {} MiB of flash (their records, and their index twice over while a merge rewrites it), but the card's {blocks} blocks leave {} MiB beside {} blocks kept open or in GC's reserve: use a larger --blocks-per-die or fewer --records",
            self.records,
            mib(needed),
            mib(usable),
            kept
        ))
    }

    /// The LSM-tree's entries after Load, by level (L0 first), as the engine's policy leaves them
    /// for unique keys: L0 flushes when the next pair would not fit, and after each flush every
    /// level over its capacity, top first, merges whole into the next (the last level takes the
    /// rest). Arithmetic only, so it gives the paper profile's shape without running its Load; on
    /// the default profile it is what `kvssd bench ycsb` prints after Load.
    pub fn tree_after_load(&self) -> Vec<u64> {
        let per_flush = kvssd_engine::lsm::l0_pairs(
            self.l0_bytes,
            self.key_bytes as u64,
            self.value_bytes as u64,
        );
        let levels = self.levels_below_l0.max(1) as usize;
        let mut tree = vec![0u64; levels + 1];
        // The last pairs stay in L0: it flushes only when a pair would not fit.
        let flushes = self.records.saturating_sub(1) / per_flush;
        tree[0] = self.records - flushes * per_flush;
        for _ in 0..flushes {
            tree[1] += per_flush;
            let mut capacity = self.l1_entries;
            for level in 1..levels {
                if tree[level] > capacity {
                    tree[level + 1] += std::mem::take(&mut tree[level]);
                }
                capacity = capacity.saturating_mul(u64::from(self.size_factor));
            }
        }
        tree
    }

    /// The profile with a name, if there is one.
    pub fn by_name(name: &str) -> Option<BenchProfile> {
        match name {
            "default" => Some(BenchProfile::scaled()),
            "paper" => Some(BenchProfile::paper()),
            _ => None,
        }
    }

    /// The engine configuration of a preset on this profile.
    pub fn engine_config(&self, preset: Preset) -> EngineConfig {
        let mut config = EngineConfig::new(preset, &self.flash.geometry);
        let geometry = &self.flash.geometry;
        config.l0_bytes = self.l0_bytes;
        config.size_factor = self.size_factor;
        config.l1_entries = self.l1_entries;
        config.levels_max = self.levels_below_l0;
        // PinK's budget (0.1% of capacity) is for indexing: level lists and pinned segments. Its write
        // buffer comes on top (§5.1), and so does the engine's reservation for it: L0, the largest
        // value, and for GC re-insertion a block's worth of relocated values.
        let indexing = (geometry.capacity_bytes() as f64 * self.dram_fraction) as u64;
        // `pink-gcrewrite` is `pink` with another GC policy and gets `pink`'s DRAM, so the two
        // differ in the policy alone (`pink-hw` re-inserts, as `pink` does).
        let reinsertion = if config.features.gc == kvssd_engine::GcPolicy::Reinsert
            || preset == Preset::PinkGcRewrite
        {
            geometry.block_bytes()
        } else {
            0
        };
        config.dram_budget_bytes =
            indexing + self.l0_bytes + config.value_bytes_max(geometry) as u64 + reinsertion;
        config.expected_key_bytes = self.key_bytes as u32;
        config.expected_value_bytes = self.value_bytes as u32;
        config
    }
}

impl BenchProfile {
    /// The hash engine configuration of a preset on this profile. `hash` gets the same indexing
    /// DRAM as the LSM presets (0.1% of capacity) plus its write buffer, as PinK's baseline; `kaml`
    /// keeps its whole table in DRAM, as KAML assumes, so its budget is sized to hold it.
    pub fn hash_config(&self, preset: HashPreset) -> HashConfig {
        let geometry = &self.flash.geometry;
        let mut config = HashConfig::new(preset, geometry);
        config.expected_key_bytes = self.key_bytes as u32;
        config.expected_value_bytes = self.value_bytes as u32;
        // The same write buffer as the LSM presets' L0, as PinK gives every design (§5.1): a larger
        // one would serve more reads of recent writes from DRAM and flatter the hash designs.
        config.write_buffer_bytes = self.l0_bytes;
        let indexing = (geometry.capacity_bytes() as f64 * self.dram_fraction) as u64;
        config.dram_budget_bytes = match preset {
            HashPreset::Hash => indexing + config.write_buffer_bytes,
            // Slots of 16 bytes at load factor 0.5 after doubling, for every pair the device holds.
            HashPreset::Kaml => {
                let pairs = geometry.capacity_bytes() / (self.key_bytes + self.value_bytes) as u64;
                pairs * 16 * 4 + config.write_buffer_bytes
            }
        };
        config
    }
}

/// Presets the key-value benchmarks accept: every preset of the device whose keys are keys
/// (`block` addresses logical blocks; `kvssd bench kaml-micro` drives it).
pub fn preset_names() -> Vec<&'static str> {
    let config = DeviceConfig::test_min();
    PresetKind::ALL
        .iter()
        .filter(|preset| preset.logical_block_bytes(&config).is_none())
        .map(|preset| preset.name())
        .collect()
}

impl BenchProfile {
    /// A device configuration for this profile with `durability`: every preset's engine template
    /// set as the profile sizes it (the LSM template for `preset` when it is an LSM preset).
    pub fn device_config(&self, preset: PresetKind, durability: Durability) -> DeviceConfig {
        let mut config = DeviceConfig::new(&self.flash);
        let lsm = preset.name().parse::<Preset>().unwrap_or(Preset::Pink);
        config.engine = self.engine_config(lsm);
        config.hash = self.hash_config(HashPreset::Hash);
        config.kaml = self.hash_config(HashPreset::Kaml);
        config.durability = durability;
        config
    }
}

#[cfg(test)]
mod tests {
    use super::BenchProfile;

    #[test]
    fn profile_sized_by_blocks_per_die_keeps_the_fill() {
        let base = BenchProfile::scaled();
        let doubled = BenchProfile::scaled()
            .with_blocks_per_die(2 * base.flash.geometry.blocks_per_die)
            .expect("a card twice the size is valid");
        assert_eq!(
            doubled.flash.geometry.capacity_bytes(),
            2 * base.flash.geometry.capacity_bytes()
        );
        assert_eq!(doubled.records, 2 * base.records);
        assert_eq!(doubled.l1_entries, 2 * base.l1_entries);
        assert_eq!(doubled.l0_bytes, 2 * base.l0_bytes);
        // The rest of the shape stays as it was.
        assert_eq!(doubled.levels_below_l0, base.levels_below_l0);
        assert_eq!(doubled.size_factor, base.size_factor);
        assert_eq!(doubled.dram_fraction, base.dram_fraction);

        let error = BenchProfile::scaled()
            .with_blocks_per_die(1)
            .expect_err("64 blocks cannot hold 64 logs' open blocks");
        assert!(error.contains("open blocks"), "{error}");
    }

    /// Load fails on a card of 12 blocks per die (`GC cannot free the blocks this write needs`,
    /// after minutes of GC) and completes on 13: the check refuses the first up front and lets
    /// the second run. The profiles users run by default pass.
    #[test]
    fn a_card_that_cannot_hold_the_load_is_refused() {
        for name in BenchProfile::NAMES {
            let profile = BenchProfile::by_name(name).expect("a profile");
            assert_eq!(profile.check_capacity(), Ok(()), "{name}");
        }
        let paper = || BenchProfile::by_name("paper").expect("the paper profile");
        let small = paper().with_blocks_per_die(12).expect("a valid card");
        let error = small
            .check_capacity()
            .expect_err("12 blocks per die are too few");
        assert!(error.contains("--blocks-per-die"), "{error}");
        assert!(error.contains("1031250 pairs"), "{error}");
        let edge = paper().with_blocks_per_die(13).expect("a valid card");
        assert_eq!(edge.check_capacity(), Ok(()));
        // Fewer pairs fit the small card.
        let fewer = BenchProfile {
            records: small.records / 2,
            ..small
        };
        assert_eq!(fewer.check_capacity(), Ok(()));
    }

    /// The default profile is the paper profile on a card of 1/16 the size, so that both trees go
    /// through the same merges during Load and end it with the same share of entries per level.
    #[test]
    fn default_profile_is_the_paper_profile_scaled_to_its_card() {
        let default = BenchProfile::scaled();
        let paper = BenchProfile::paper()
            .with_blocks_per_die(default.flash.geometry.blocks_per_die)
            .expect("the default card is valid");
        assert_eq!(paper.flash.geometry, default.flash.geometry);
        assert_eq!(paper.records, default.records);
        assert_eq!(paper.l0_bytes, default.l0_bytes);
        assert_eq!(paper.l1_entries, default.l1_entries);
        assert_eq!(paper.size_factor, default.size_factor);
        assert_eq!(paper.levels_below_l0, default.levels_below_l0);
        assert_eq!(paper.dram_fraction, default.dram_fraction);
        assert_eq!(
            (paper.key_bytes, paper.value_bytes),
            (default.key_bytes, default.value_bytes)
        );
    }

    /// The default profile's tree after Load holds the same share of its entries per level as the
    /// paper profile's after its 44M-pair Load, within half a percentage point (the shapes are in
    /// docs/design.md).
    #[test]
    fn default_tree_after_load_has_the_paper_trees_shape() {
        let shares = |profile: &BenchProfile| -> Vec<f64> {
            let tree = profile.tree_after_load();
            assert_eq!(tree.iter().sum::<u64>(), profile.records);
            tree.iter()
                .map(|&entries| 100.0 * entries as f64 / profile.records as f64)
                .collect()
        };
        let default = shares(&BenchProfile::scaled());
        let paper = shares(&BenchProfile::paper());
        assert_eq!(default.len(), paper.len());
        for (level, (d, p)) in default.iter().zip(&paper).enumerate() {
            assert!(
                (d - p).abs() < 0.5,
                "L{level}: {default:?} against {paper:?}"
            );
        }
        // Every level above the last holds entries, so pinning and range pointers have work.
        assert!(default[1..default.len() - 1]
            .iter()
            .all(|&share| share > 0.0));
        assert_eq!(
            BenchProfile::scaled().tree_after_load(),
            [59, 183, 5_368, 60_390, 2_684_000]
        );
    }

    /// PinK's setup (§5.1): h = 5 and the top three levels pinned, on the paper profile and on the
    /// default one scaled from it, so a GET reads at most one meta page from flash.
    #[test]
    fn pink_pins_three_of_four_levels_on_both_profiles() {
        for profile in [BenchProfile::scaled(), BenchProfile::paper()] {
            let flash = kvssd_flash::Flash::new(profile.flash.geometry, None).expect("flash");
            let config = profile.engine_config(kvssd_engine::Preset::Pink);
            let engine = kvssd_engine::LsmEngine::open(flash, config).expect("open");
            let plan = engine.plan();
            assert_eq!(plan.height, 5, "{}: {plan:?}", profile.name);
            assert_eq!(plan.pinned_levels, 3, "{}: {plan:?}", profile.name);
            assert_eq!(plan.worst_case_meta_reads, 1, "{}: {plan:?}", profile.name);
        }
    }
}
