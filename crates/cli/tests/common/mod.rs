//! What the `kvssd` binary's tests share: running the binary, and seeded draws.
// Each test crate uses part of this module.
#![allow(dead_code)]

use std::process::{Command, Output};

use rand_core::{Rng as _, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Runs `kvssd` with `args` and waits for it.
pub fn kvssd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kvssd"))
        .args(args)
        .output()
        .expect("the kvssd binary runs")
}

/// Seeded draws for random frames, loads and kill points.
pub struct Rng(Xoshiro256PlusPlus);

impl Rng {
    /// Draws from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(Xoshiro256PlusPlus::seed_from_u64(seed))
    }

    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}
