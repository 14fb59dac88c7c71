//! The `pink` profile (64 GiB, 8 KiB pages) at its default configuration: what the engine plans for
//! a full device (levels, DRAM, pinned levels, worst-case reads per GET), and the controller-CPU
//! ordering of PinK Fig. 11(a) on a smaller card: `pink-noopt` spends the most CPU per GET,
//! `pink-range` less, `pink` the least.

use kvssd_engine::{EngineConfig, LsmEngine, Preset};
use kvssd_flash::{Flash, Profile};

#[test]
fn pink_profile_plan_matches_the_back_of_envelope() {
    let profile = Profile::pink();
    for preset in [Preset::Pink, Preset::Lightstore] {
        let flash = Flash::new(profile.geometry, Some(profile.timing.clone())).expect("flash");
        let config = EngineConfig::new(preset, &profile.geometry);
        let engine = LsmEngine::open(flash, config).expect("open");
        let plan = engine.plan();
        println!(
            "{preset}: {plan:#?}, budget {} B",
            engine.dram_budget_bytes()
        );
        assert_eq!(plan.height, 6, "L0 and five levels for 57M pairs at T = 10");
        if preset == Preset::Pink {
            assert_eq!(plan.pinned_levels, 2);
            assert_eq!(plan.worst_case_meta_reads, 3);
        } else {
            assert_eq!(plan.pinned_levels, 0);
            assert!(plan.bloom_bits_per_key.iter().all(|&bits| bits > 0.0));
        }
    }
}

/// Keys whose first bytes vary (hashed ids), so 4-byte prefixes mostly decide comparisons.
fn key_of(id: u64) -> String {
    format!("{:016x}", id.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

fn get_cpu_ns(preset: Preset) -> (u64, u64) {
    let profile = Profile::pink_with_blocks(16);
    let flash = Flash::new(profile.geometry, Some(profile.timing)).expect("flash");
    let mut config = EngineConfig::new(preset, &profile.geometry);
    config.l0_bytes = 16 << 10;
    config.size_factor = 4;
    config.expected_key_bytes = 16;
    config.expected_value_bytes = 32;
    config.dram_budget_bytes = 16 << 20;
    config.space.logs = 8;
    config.space.gc_reserve_blocks = 12;
    let mut engine = LsmEngine::open(flash, config).expect("open");
    let keys = 20_000u64;
    let mut now = 0;
    for id in 0..keys {
        let key = key_of(id * 7919 % keys);
        now = engine.put(now, key.as_bytes(), &[1u8; 32]).expect("put");
    }
    now = engine.flush_l0(now).expect("flush");
    let before = engine.stats().cpu_ns;
    let start = now;
    for id in 0..keys {
        let key = key_of(id * 104_729 % keys);
        let (value, done) = engine.get(now, key.as_bytes()).expect("get");
        assert!(value.is_some());
        now = done;
    }
    (engine.stats().cpu_ns - before, now - start)
}

#[test]
fn pink_cpu_per_get_orders_noopt_range_pink() {
    let (noopt, noopt_time) = get_cpu_ns(Preset::PinkNoopt);
    let (range, range_time) = get_cpu_ns(Preset::PinkRange);
    let (pink, pink_time) = get_cpu_ns(Preset::Pink);
    println!(
        "CPU ns for 20K GETs: pink-noopt {noopt}, pink-range {range}, pink {pink}; \
         simulated time {noopt_time} / {range_time} / {pink_time} ns"
    );
    assert!(noopt > range && range > pink, "{noopt} {range} {pink}");
}
