use super::{run, SeekConfig, SeekError};
use crate::ycsb::BenchProfile;

/// A card of 4 blocks per die with 1% of it as indexing DRAM, so the level lists of a card full
/// of 128 B pairs fit.
fn tiny_grid() -> SeekConfig {
    let mut profile = BenchProfile::scaled()
        .with_blocks_per_die(4)
        .expect("a card of 4 blocks per die is valid");
    profile.dram_fraction = 0.01;
    SeekConfig {
        profile,
        presets: vec!["pink".into()],
        degrees: vec![0, 2],
        keys: 1_500,
        value_bytes: vec![128, 4096],
        scan_lengths: vec![8, 32],
        seeks: 12,
        index_prefetch: vec![true, false],
        seed: 3,
    }
}

/// Every combination of the lists is measured and reported once, with its parameters.
#[test]
fn seek_grid_reports_every_combination() {
    let config = tiny_grid();
    let phases = std::sync::Mutex::new(std::collections::BTreeSet::new());
    let report = run(&config, 1, &|_, phase, _, _| {
        phases.lock().expect("lock").insert(phase.to_string());
    })
    .expect("grid");
    let mut seen = std::collections::BTreeSet::new();
    for result in &report.results {
        let params = result.params.as_ref().expect("params");
        let key = (
            params["value_bytes"].as_u64().expect("value"),
            params["scan_length"].as_u64().expect("scan"),
            params["index_prefetch"].as_bool().expect("index prefetch"),
            params["prefetch_degree"].as_u64().expect("degree"),
        );
        assert!(seen.insert(key), "{key:?} reported twice");
        assert_eq!(result.ops, config.seeks);
        let nexts = result.next_latency_us.expect("per-Next latency");
        assert!(nexts.avg > 0.0, "{key:?}");
    }
    let mut expected = std::collections::BTreeSet::new();
    for &value in &config.value_bytes {
        for &scan in &config.scan_lengths {
            for &index in &config.index_prefetch {
                for &degree in &config.degrees {
                    expected.insert((value as u64, scan as u64, index, degree as u64));
                }
            }
        }
    }
    assert_eq!(seen, expected);
    // One load per value size: the other combinations share its device.
    let phases = phases.into_inner().expect("lock");
    let loads: Vec<&String> = phases.iter().filter(|p| p.starts_with("load")).collect();
    assert_eq!(loads, ["load v=128", "load v=4096"]);
    // Labelled apart for the table and plots.
    let labelled = report.labelled(&super::GRID_LABELS);
    let names: std::collections::BTreeSet<&str> =
        labelled.results.iter().map(|r| r.preset.as_str()).collect();
    assert_eq!(names.len(), report.results.len());
}

#[test]
fn seek_limits_are_errors_before_the_run() {
    let mut config = tiny_grid();
    config.value_bytes = vec![4096, 2 << 20];
    let too_large = config.check().expect_err("2 MiB values on a 512 MiB card");
    assert!(
        matches!(too_large, SeekError::ValueTooLarge { value_bytes, .. } if value_bytes == 2 << 20)
            || matches!(too_large, SeekError::TooMuchData { .. }),
        "{too_large}"
    );
    let mut config = tiny_grid();
    config.keys = 1_000_000;
    let error = config
        .check()
        .expect_err("4 GB of values on a 512 MiB card");
    assert!(matches!(error, SeekError::TooMuchData { .. }), "{error}");
    assert_eq!(error.to_string().lines().count(), 1);
    assert!(run(&config, 1, &|_, _, _, _| {}).is_err());
    let mut config = tiny_grid();
    config.profile.dram_fraction = 0.001;
    config.value_bytes = vec![128];
    let error = config
        .check()
        .expect_err("0.1% cannot list a card full of 128 B pairs");
    assert!(
        matches!(
            &error,
            SeekError::Namespace {
                value_bytes: 128,
                ..
            }
        ) && error.to_string().contains("DRAM"),
        "{error}"
    );
    let mut config = tiny_grid();
    config.scan_lengths.clear();
    assert_eq!(config.check(), Err(SeekError::Empty("scan-length")));
    assert_eq!(tiny_grid().check(), Ok(()));
}

/// IterKVSSD's 4 B keys on compact media give the figures of full media, and every entry read is
/// checked (none mismatched).
#[test]
fn seek_on_compact_media_with_short_keys_matches_ram_media() {
    let mut config = tiny_grid();
    config.profile.key_bytes = 4;
    config.degrees = vec![0, 4];
    config.index_prefetch = vec![true];
    let ram = run(&config, 1, &|_, _, _, _| {}).expect("ram media");
    config.profile.media = kvssd_flash::MediaKind::Compact;
    let compact = run(&config, 1, &|_, _, _, _| {}).expect("compact media");
    assert_eq!(ram.results.len(), compact.results.len());
    for (ram, compact) in ram.results.iter().zip(&compact.results) {
        assert_eq!(ram.value_mismatches, 0, "{:?}", ram.first_value_mismatch);
        assert_eq!(compact.value_mismatches, 0);
        assert_eq!(ram.next_latency_us, compact.next_latency_us);
        assert_eq!(ram.seek_latency_us, compact.seek_latency_us);
        assert_eq!(ram.flash_reads_per_query, compact.flash_reads_per_query);
    }
}

/// An entry whose value is not the load's write of its key counts as a mismatch.
#[test]
fn seek_checks_each_entry_against_its_key() {
    use crate::workload::{key_of, value_of};
    let entry = |number: u64, value: Vec<u8>| kvssd_device::IterEntry {
        key: key_of(number, 4),
        value_len: value.len(),
        value: Some(value),
    };
    let mut checked = super::Checked::default();
    checked.entries(&[entry(5, value_of(5, 1, 128))], 4, 128);
    assert_eq!(checked.mismatches, 0);
    let mut damaged = value_of(6, 1, 128);
    damaged[100] ^= 1;
    checked.entries(
        &[
            entry(5, value_of(6, 1, 128)), // another key's value
            entry(6, damaged),
            entry(7, value_of(7, 2, 128)), // a version never loaded
            entry(8, value_of(8, 1, 64)),  // a value of another size
        ],
        4,
        128,
    );
    assert_eq!(checked.mismatches, 4);
    assert!(checked.first.is_some());
}

#[test]
fn seek_refuses_more_keys_than_the_key_size_holds() {
    let mut config = tiny_grid();
    config.profile.key_bytes = 4;
    config.keys = (1 << 32) + 1;
    assert!(matches!(
        config.check(),
        Err(SeekError::TooManyKeys { key_bytes: 4, .. })
    ));
}
