//! Fault injection, deterministic from a seed.
//!
//! # Fault model
//!
//! * **Power cut.** [`FaultConfig::power_cut_after_operations`] = N lets operations 1..=N (reads,
//!   programs and erases, counted from when the faults were set) run normally. Operation N+1 is *in
//!   flight* when power fails and returns [`crate::FlashError::PowerCut`]. If it is a program, its page
//!   is, chosen by the seeded generator: **torn** (the page is consumed and reads back as
//!   [`crate::FlashError::Corrupt`]) with probability [`FaultConfig::torn_program_probability`],
//!   otherwise **lost** (the page stays erased) or **completed** (the page holds the new data even though
//!   the caller was never told so), each half of the remainder. An in-flight erase either completes or
//!   does not, evenly. Every later operation fails with `PowerCut` until
//!   [`crate::Flash::restore_power`]. Programs completed before the cut are never damaged: NAND keeps
//!   what it has programmed.
//! * **Bad block.** Every program and erase on a block in [`FaultConfig::bad_blocks`] fails with
//!   [`crate::FlashError::ProgramFailed`] or [`crate::FlashError::EraseFailed`]; its page is not
//!   consumed. Reads of what the block held before still work.
//! * **Bit flips.** Each page read, with probability [`FaultConfig::bit_flip_probability`], flips one
//!   bit of the copy handed to the caller (payload or OOB). The page checksum always catches a single
//!   flipped bit, so the read returns [`crate::FlashError::Corrupt`] instead of the data. The stored page
//!   is unharmed: a retry may succeed.
//!
//! The generator is a xoshiro256++ seeded from [`FaultConfig::seed`]; the same seed and the same
//! sequence of operations give the same faults.

use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::BlockAddress;

/// Which faults to inject. The default injects none.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultConfig {
    /// Seed of the fault generator.
    pub seed: u64,
    /// Cut power when this many operations have completed; the next one is in flight.
    pub power_cut_after_operations: Option<u64>,
    /// Probability that a program in flight at the cut leaves a torn (corrupt) page.
    pub torn_program_probability: f64,
    /// Blocks whose programs and erases fail.
    pub bad_blocks: Vec<BlockAddress>,
    /// Probability that a page read returns one flipped bit (and so a checksum error).
    pub bit_flip_probability: f64,
}

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            seed: 0,
            power_cut_after_operations: None,
            torn_program_probability: 1.0 / 3.0,
            bad_blocks: Vec::new(),
            bit_flip_probability: 0.0,
        }
    }
}

/// What happens to a program in flight when power fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InFlight {
    Lost,
    Torn,
    Completed,
}

/// Live fault state: the configuration, the generator and the operation count.
#[derive(Debug, Clone)]
pub(crate) struct Faults {
    pub(crate) config: FaultConfig,
    rng: Xoshiro256PlusPlus,
    operations_since_set: u64,
    pub(crate) power_cut: bool,
}

impl Faults {
    pub(crate) fn new(config: FaultConfig) -> Self {
        Faults {
            rng: Xoshiro256PlusPlus::seed_from_u64(config.seed),
            config,
            operations_since_set: 0,
            power_cut: false,
        }
    }

    pub(crate) fn is_quiet(&self) -> bool {
        !self.power_cut
            && self.config.power_cut_after_operations.is_none()
            && self.config.bad_blocks.is_empty()
            && self.config.bit_flip_probability <= 0.0
    }

    /// Counts an operation about to run; returns true if power fails during it.
    pub(crate) fn begin_operation(&mut self) -> bool {
        let cut_now = self
            .config
            .power_cut_after_operations
            .is_some_and(|limit| self.operations_since_set >= limit);
        self.operations_since_set += 1;
        if cut_now {
            self.power_cut = true;
            self.config.power_cut_after_operations = None;
        }
        cut_now
    }

    pub(crate) fn in_flight_program(&mut self) -> InFlight {
        let draw = self.unit();
        let torn = self.config.torn_program_probability.clamp(0.0, 1.0);
        if draw < torn {
            InFlight::Torn
        } else if draw < torn + (1.0 - torn) / 2.0 {
            InFlight::Lost
        } else {
            InFlight::Completed
        }
    }

    pub(crate) fn coin(&mut self) -> bool {
        self.rng.next_u64() & 1 == 1
    }

    pub(crate) fn is_bad(&self, block: BlockAddress) -> bool {
        self.config.bad_blocks.contains(&block)
    }

    /// Returns the bit to flip in a read of `bits` bits, if this read suffers a flip.
    pub(crate) fn bit_flip(&mut self, bits: u64) -> Option<u64> {
        if self.config.bit_flip_probability <= 0.0 || bits == 0 {
            return None;
        }
        (self.unit() < self.config.bit_flip_probability).then(|| self.rng.next_u64() % bits)
    }

    /// A uniform draw in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.rng.next_u64()
    }
}
