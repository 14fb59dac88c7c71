//! Compact media change no simulated figure: the same seed gives the same throughput, latencies,
//! reads per request, DRAM, write amplification and flash counters on ram and compact media, with
//! GC erasing blocks under the load.

use kvssd_bench::gc::{self, GcConfig};
use kvssd_bench::report::BenchReport;
use kvssd_bench::workload::WorkloadSpec;
use kvssd_bench::ycsb::{self, BenchProfile, YcsbConfig};
use kvssd_flash::{Geometry, MediaKind};

/// PinK's card shape on a few small dies: a few thousand pairs fill it enough for GC to run.
fn small_profile(media: MediaKind) -> BenchProfile {
    let mut profile = BenchProfile::scaled();
    profile.flash.geometry = Geometry {
        channels: 2,
        ways_per_channel: 2,
        blocks_per_die: 40,
        pages_per_block: 32,
        page_bytes: 8192,
        oob_bytes: 256,
    };
    profile.media = media;
    profile.records = 12_000;
    profile.operations = 4_000;
    profile.clients = 8;
    profile.l0_bytes = 32 << 10;
    profile.l1_entries = 200;
    profile
}

/// The report as JSON, without the one figure that is not simulated (the simulator's speed).
/// The report without what measures the host rather than the simulated device: the simulator's
/// speed, and the memory the media take (the one thing that should differ).
fn simulated_figures(report: &BenchReport) -> serde_json::Value {
    let mut json = serde_json::to_value(report).expect("a report is JSON");
    if let Some(results) = json["results"].as_array_mut() {
        for result in results {
            result["sim_requests_per_wall_s"] = 0.into();
        }
    }
    if let Some(notes) = json["notes"].as_array_mut() {
        notes.retain(|note| {
            !note
                .as_str()
                .is_some_and(|note| note.contains("simulated media hold"))
        });
    }
    json
}

#[test]
fn media_compact_and_ram_give_identical_ycsb_figures() {
    let run = |media| {
        let config = YcsbConfig {
            profile: small_profile(media),
            presets: vec!["pink".into(), "hash".into()],
            workloads: ["load", "a", "e"]
                .iter()
                .map(|name| WorkloadSpec::by_name(name).expect("workload"))
                .collect(),
            seed: 3,
        };
        ycsb::run(&config, 2, &|_, _, _, _| {}).expect("run")
    };
    let ram = run(MediaKind::Ram);
    let compact = run(MediaKind::Compact);
    assert_eq!(ram.results.len(), 6);
    assert!(ram.value_mismatch_error().is_none());
    assert!(ram
        .results
        .iter()
        .all(|result| result.throughput_kops > 0.0));
    assert_eq!(simulated_figures(&ram), simulated_figures(&compact));
}

#[test]
fn media_compact_and_ram_give_identical_gc_counters() {
    let run = |media| {
        let config = GcConfig {
            profile: small_profile(media),
            presets: vec!["pink".into()],
            overwrites: 30_000,
            seed: 5,
        };
        gc::run(&config, 1, &|_, _, _, _| {}).expect("run")
    };
    let ram = run(MediaKind::Ram);
    let compact = run(MediaKind::Compact);
    let params = ram.results[0].params.as_ref().expect("gc params");
    assert!(
        params["blocks_erased"].as_u64().unwrap_or(0) > 0,
        "GC erased blocks: {params:?}"
    );
    assert_eq!(simulated_figures(&ram), simulated_figures(&compact));
}
