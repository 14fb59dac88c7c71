use super::{size_factor_for, table, HeightError, HeightsConfig};
use crate::workload::WorkloadSpec;
use crate::ycsb::{BenchProfile, YcsbConfig};

/// A card of 4 blocks per die with a few thousand pairs and an L0 of 7, so that heights 3 to 5
/// build in a debug test; its own tree is L0 + 3 levels (L1 of 70 entries, T = 10).
fn tiny() -> BenchProfile {
    let mut profile = BenchProfile::scaled()
        .with_blocks_per_die(4)
        .expect("a card of 4 blocks per die is valid");
    profile.records = 6_000;
    profile.operations = 2_000;
    profile.clients = 8;
    profile.l0_bytes = 8 << 10;
    profile.l1_entries = 70;
    profile.size_factor = 10;
    profile.levels_below_l0 = 3;
    // Indexing DRAM for the level lists of a full card and a few meta segments, so the taller
    // trees cannot pin all but their last level.
    profile.dram_fraction = 0.0003;
    profile
}

#[test]
fn size_factor_is_the_smallest_whose_last_level_holds_the_data() {
    // Default profile: 2.75M pairs, L0 of 61.
    assert_eq!(size_factor_for(2_750_000, 61, 5), 9);
    assert_eq!(size_factor_for(2_750_000, 61, 6), 6);
    assert_eq!(size_factor_for(2_750_000, 61, 7), 5);
    // Exact powers are enough: 10 × 10^2 = 1,000.
    assert_eq!(size_factor_for(1_000, 10, 2), 10);
    assert_eq!(size_factor_for(1_001, 10, 2), 11);
    assert_eq!(size_factor_for(5, 10, 3), 2, "never below 2");
}

#[test]
fn the_profiles_own_height_keeps_its_tree_and_others_follow_the_rule() {
    let default = BenchProfile::scaled();
    let same = default.with_height(5).expect("h = 5 is the default tree");
    assert_eq!(
        (same.size_factor, same.l1_entries, same.levels_below_l0),
        (10, 625, 4)
    );
    for (height, size_factor) in [(6, 9), (7, 6), (8, 5)] {
        let profile = default.with_height(height).expect("buildable");
        assert_eq!(profile.size_factor, size_factor, "h = {height}");
        assert_eq!(profile.l1_entries, 61 * u64::from(size_factor));
        let tree = profile.tree_after_load();
        assert_eq!(tree.len(), height as usize);
        // The data reaches the last level (a level above it may be empty right after a
        // whole-level merge into the next).
        assert!(tree.last().is_some_and(|&entries| entries > 0), "{tree:?}");
        // Same data, L0 and DRAM.
        assert_eq!(profile.records, default.records);
        assert_eq!(profile.l0_bytes, default.l0_bytes);
        assert_eq!(profile.dram_fraction, default.dram_fraction);
    }
    assert_eq!(
        default
            .with_height(1)
            .expect_err("h = 1 has no level below L0"),
        HeightError::OutOfRange { height: 1 }
    );
    let mut few = tiny();
    few.records = 20;
    assert!(matches!(
        few.with_height(6),
        Err(HeightError::TooFewRecords { height: 6, .. })
    ));
}

/// Every height builds a tree of that height, and no point GET of `pink` reads more meta pages
/// than h − k − 1.
#[test]
fn sweep_builds_each_height_and_bounds_pinks_index_reads() {
    let heights = vec![3, 4, 5];
    let config = HeightsConfig {
        ycsb: YcsbConfig {
            profile: tiny(),
            presets: vec!["pink".into(), "lightstore".into()],
            workloads: ["load", "c"]
                .iter()
                .map(|name| WorkloadSpec::by_name(name).expect("workload"))
                .collect(),
            seed: 7,
        },
        heights: heights.clone(),
    };
    let labels = config.labels();
    assert_eq!(labels.len(), 6);
    let seen = std::sync::Mutex::new(std::collections::BTreeSet::new());
    let report = super::run(&config, 2, &|label, _, _, _| {
        seen.lock().expect("lock").insert(label.to_string());
    })
    .expect("sweep");
    assert_eq!(
        seen.into_inner().expect("lock"),
        labels.iter().cloned().collect(),
        "progress under every label"
    );
    assert_eq!(report.results.len(), 12, "load and c per preset and height");
    for &height in &heights {
        for preset in ["pink", "lightstore"] {
            let c = report
                .results
                .iter()
                .find(|result| {
                    result.preset == preset
                        && result.workload == "c"
                        && result.params.as_ref().and_then(|p| p["height"].as_u64())
                            == Some(u64::from(height))
                })
                .expect("every height and preset reported");
            let params = c.params.as_ref().expect("params");
            assert_eq!(params["levels_after_load"], height, "{preset} h={height}");
            let reads = c.point_get_reads.expect("workload C makes point GETs");
            assert!(reads.flash.p9999 <= reads.flash.max);
            assert!(reads.flash.avg >= 1.0, "every GET reads its value");
            if preset == "pink" {
                let worst = params["worst_case_index_reads"].as_u64().expect("worst");
                let pinned = params["pinned_levels"].as_u64().expect("k");
                assert_eq!(worst, u64::from(height) - pinned - 1);
                assert!(
                    reads.index.max <= worst,
                    "h={height}: {} index reads, bound {worst}",
                    reads.index.max
                );
            }
        }
    }
    let printed = table(&report);
    assert_eq!(printed.lines().count(), 2 + 12, "{printed}");
}
