//! GC's flash work holds writers back. Under the threads model GC runs as background jobs whose
//! effects on the space happen at once, so without a wait a writer could queue GC jobs faster than
//! the background thread plays them, without bound. A writer whose write queues a GC job while
//! `GC_JOBS_IN_FLIGHT_MAX` are still running waits for the oldest: with one writer, the GC lane
//! never holds more than that many jobs plus the one just waited for.

use kvssd_engine::hash::{HashConfig, HashEngine, HashPreset};
use kvssd_engine::GC_JOBS_IN_FLIGHT_MAX;
use kvssd_flash::{ControllerModel, Flash, Geometry, Lane, TimingProfile};

fn geometry() -> Geometry {
    Geometry {
        channels: 2,
        ways_per_channel: 2,
        blocks_per_die: 32,
        pages_per_block: 32,
        page_bytes: 4096,
        oob_bytes: 128,
    }
}

#[test]
fn gc_jobs_in_flight_stay_bounded_under_sustained_overwrites() {
    let mut timing = TimingProfile::pink();
    timing.controller = ControllerModel::Threads;
    let flash = Flash::new(geometry(), Some(timing)).expect("flash");
    let mut config = HashConfig::new(HashPreset::Hash, &geometry());
    config.write_buffer_bytes = 16 << 10;
    config.dram_budget_bytes = 256 << 10;
    let mut engine = HashEngine::open(flash, config).expect("open");
    let keys = 6_000u64;
    let value = vec![7u8; 400];
    let mut t = 0;
    let mut most_queued = 0;
    for step in 0..keys * 8 {
        let key = format!("user{:08}", (step * 7_919) % keys).into_bytes();
        t = engine.put(t, &key, &value).expect("put");
        let queued = engine.space().flash().background_jobs_queued(Lane::Gc);
        most_queued = most_queued.max(queued);
        assert!(
            queued <= GC_JOBS_IN_FLIGHT_MAX + 1,
            "after put {step}: {queued} GC jobs queued"
        );
    }
    let stats = engine.stats();
    assert!(
        stats.gc_data_victims + stats.gc_meta_victims > 0,
        "the overwrites never made GC run: {stats:?}"
    );
    assert!(most_queued > 0, "GC never ran as a background job");
    eprintln!("most GC jobs queued at once: {most_queued}");
}
