//! The figures the hash engines are judged by, measured on a 64 MiB array (2 × 2 dies, 64 blocks of
//! 64 pages of 4 KiB) loaded with 30,000 pairs of 16-byte keys and 100-byte values, then read with
//! 20,000 uniformly random GETs of present keys:
//!
//! * `kaml` (table in DRAM): every GET reads exactly one data page and no index page.
//! * `hash` with a bucket cache of a fifth of its table: most GETs miss the cache, so a GET costs
//!   about `1 + α` flash reads (PinK §2.3), `α` the miss ratio times the pages a probe window spans.
//!   A GET never reads more than two bucket pages (the probe window is one page of slots).
//! * `hash` with the whole table cached: no index reads, as `kaml`.
//!
//! Run with `--nocapture` to see the figures.

use kvssd_engine::hash::{HashConfig, HashEngine, HashPreset, HashStats};
use kvssd_flash::{Flash, Geometry, Purpose, TimingProfile};
use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const PAIRS: u64 = 30_000;
const GETS: u64 = 20_000;
const TABLE_PAGES: u64 = 100;

fn geometry() -> Geometry {
    Geometry {
        channels: 2,
        ways_per_channel: 2,
        blocks_per_die: 64,
        pages_per_block: 64,
        page_bytes: 4096,
        oob_bytes: 128,
    }
}

fn key_of(id: u64) -> Vec<u8> {
    format!("user{id:012}").into_bytes()
}

/// Figures of the GET phase.
struct Figures {
    index_reads_per_get: f64,
    data_reads_per_get: f64,
    index_reads_max: u32,
    data_reads_min: u64,
    data_reads_max: u64,
    hit_rate: f64,
    stats: HashStats,
}

fn measure(config: HashConfig) -> Figures {
    let flash = Flash::new(geometry(), Some(TimingProfile::pink())).expect("flash");
    let mut engine = HashEngine::open(flash, config).expect("open");
    let mut t = 0;
    for id in 0..PAIRS {
        let value = vec![(id % 251) as u8; 100];
        t = engine.put(t, &key_of(id), &value).expect("load");
    }
    // Everything on flash, so every GET reads its value from a data page.
    t = engine.sync(t).expect("sync");
    let before = engine.stats();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    let mut data_reads_min = u64::MAX;
    let mut data_reads_max = 0;
    for _ in 0..GETS {
        let id = rng.next_u64() % PAIRS;
        let user_before = engine
            .space()
            .flash()
            .counters()
            .of(Purpose::UserData)
            .reads;
        let (value, done) = engine.get(t, &key_of(id)).expect("get");
        t = done;
        assert_eq!(value.map(|v| v.len()), Some(100));
        let user = engine
            .space()
            .flash()
            .counters()
            .of(Purpose::UserData)
            .reads
            - user_before;
        data_reads_min = data_reads_min.min(user);
        data_reads_max = data_reads_max.max(user);
    }
    let stats = engine.stats();
    let index_reads = stats.flash.of(Purpose::Index).reads - before.flash.of(Purpose::Index).reads;
    let data_reads =
        stats.flash.of(Purpose::UserData).reads - before.flash.of(Purpose::UserData).reads;
    let hits = stats.cache_hits - before.cache_hits;
    let misses = stats.cache_misses - before.cache_misses;
    Figures {
        index_reads_per_get: index_reads as f64 / GETS as f64,
        data_reads_per_get: data_reads as f64 / GETS as f64,
        index_reads_max: stats.index_reads_per_get.max(),
        data_reads_min,
        data_reads_max,
        hit_rate: if hits + misses > 0 {
            hits as f64 / (hits + misses) as f64
        } else {
            1.0
        },
        stats,
    }
}

fn hash_config(cache_pages: u64) -> HashConfig {
    let mut config = HashConfig::new(HashPreset::Hash, &geometry());
    let per_page = (4096 - 24) / 9;
    config.table_slots = TABLE_PAGES * per_page;
    config.write_buffer_bytes = 64 << 10;
    config.dram_budget_bytes = config.write_buffer_bytes + TABLE_PAGES * 8 + cache_pages * 4096;
    config
}

fn print(name: &str, figures: &Figures) {
    println!(
        "{name}: index reads per GET {:.3} (max {}), data reads per GET {:.3} (min {}, max {}), flash reads per GET {:.3}, cache hit rate {:.3}\n{}",
        figures.index_reads_per_get,
        figures.index_reads_max,
        figures.data_reads_per_get,
        figures.data_reads_min,
        figures.data_reads_max,
        figures.index_reads_per_get + figures.data_reads_per_get,
        figures.hit_rate,
        figures.stats
    );
}

#[test]
fn hash_figures_kaml_reads_one_data_page_per_get() {
    let mut config = HashConfig::new(HashPreset::Kaml, &geometry());
    config.write_buffer_bytes = 64 << 10;
    config.dram_budget_bytes = config.write_buffer_bytes + (2 << 20);
    let figures = measure(config);
    print("kaml", &figures);
    assert_eq!(figures.index_reads_per_get, 0.0);
    assert_eq!((figures.data_reads_min, figures.data_reads_max), (1, 1));
    assert_eq!(figures.stats.flash.of(Purpose::Index).reads, 0);
}

#[test]
fn hash_figures_hash_with_a_fifth_of_its_table_cached() {
    let figures = measure(hash_config(TABLE_PAGES / 5));
    print("hash, cache = table / 5", &figures);
    assert_eq!(figures.stats.cache_pages_max, TABLE_PAGES / 5);
    // About a fifth of the page accesses hit; a miss costs one read.
    assert!(
        (0.15..0.30).contains(&figures.hit_rate),
        "hit rate {}",
        figures.hit_rate
    );
    assert!(figures.index_reads_per_get > 0.75);
    assert!(figures.index_reads_max <= 2);
    // PinK's O(1 + α): well over one flash read per GET, against kaml's one.
    assert!(figures.index_reads_per_get + figures.data_reads_per_get > 1.75);
    assert!(figures.data_reads_min >= 1);
}

#[test]
fn hash_figures_hash_with_its_whole_table_cached() {
    let figures = measure(hash_config(TABLE_PAGES));
    print("hash, cache = table", &figures);
    assert_eq!(figures.index_reads_per_get, 0.0);
    assert_eq!(figures.hit_rate, 1.0);
}
