//! Key and value generators shared by the engines' model tests (`model.rs`, `hash_model.rs`).

use rand_core::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// The key of id `id`: variable lengths, shared prefixes (so 4-byte prefixes often tie) and a
/// few 255-byte keys.
pub fn key_of(id: u64) -> Vec<u8> {
    let mut key = format!("key{id:05}").into_bytes();
    let extra = match id % 11 {
        0 => 0,
        1 => 40,
        _ => (id % 7) as usize,
    };
    key.extend(std::iter::repeat_n(b'a' + (id % 26) as u8, extra));
    if id % 97 == 5 {
        key.resize(255, b'z');
    }
    key
}

/// A value for `id` at `version`: mostly small, some empty, a few spanning pages (up to `max`).
pub fn value_of(rng: &mut Xoshiro256PlusPlus, id: u64, version: u64, max: usize) -> Vec<u8> {
    let roll = rng.next_u64() % 100;
    let len = if roll < 2 {
        // Multi-page values.
        600 + (rng.next_u64() % (max as u64 - 600)) as usize
    } else if roll < 5 {
        0
    } else {
        (rng.next_u64() % 100) as usize
    };
    (0..len)
        .map(|i| (id as usize * 31 + version as usize * 7 + i) as u8)
        .collect()
}
