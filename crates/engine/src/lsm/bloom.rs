//! Bloom filters for `lightstore`, sized per level by Monkey's allocation (Dayan et al., SIGMOD'17).
//!
//! Monkey minimises the sum of the levels' false-positive rates for a fixed number of filter bits:
//! with `N_i` entries at level `i` and `p_i` its rate, minimising `Σ p_i` subject to
//! `Σ N_i · ln(1/p_i) / ln²2 = M` gives `p_i = λ · N_i` — rates proportional to level size — with
//! `λ` set by the memory. Levels whose `p_i` would reach 1 get no filter, and `λ` is solved again
//! over the rest.

use crate::cpu::CpuCounts;

/// A Bloom filter; each key's probe positions come from a generator seeded by its hash.
#[derive(Debug, Clone)]
pub(crate) struct Bloom {
    bits: Vec<u64>,
    bit_count: u64,
    /// `bit_count` as a divisor by multiplication: the probes' remainders.
    modulus: Modulus,
    hashes: u32,
    keys: u64,
}

/// A divisor whose remainders are taken by multiplication (Lemire, Kaser and Kurz, "Faster
/// Remainder by Direct Computation", 2019, with a 128-bit inverse for 64-bit values: exact for
/// every value and divisor). A filter takes one remainder per probe, and the division it
/// replaces was a sixth of building `lightstore`'s filters.
#[derive(Debug, Clone, Copy)]
struct Modulus {
    divisor: u64,
    /// `⌈2^128 / divisor⌉`, modulo 2^128 (0 for a divisor of 1, whose remainders are 0).
    inverse: u128,
}

impl Modulus {
    fn new(divisor: u64) -> Modulus {
        Modulus {
            divisor,
            inverse: (u128::MAX / u128::from(divisor.max(1))).wrapping_add(1),
        }
    }

    /// `value % divisor`: the high 64 bits of the fraction `(inverse · value mod 2^128)` times the
    /// divisor.
    fn remainder(self, value: u64) -> u64 {
        let fraction = self.inverse.wrapping_mul(u128::from(value));
        let divisor = u128::from(self.divisor);
        let low = ((fraction & u128::from(u64::MAX)) * divisor) >> 64;
        let high = (fraction >> 64) * divisor;
        ((high + low) >> 64) as u64
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// A 64-bit hash of a key: FNV-1a, then the SplitMix64 finaliser to spread the bits.
pub(crate) fn hash(key: &[u8]) -> u64 {
    let mut state = FNV_OFFSET;
    for &byte in key {
        state ^= u64::from(byte);
        state = state.wrapping_mul(FNV_PRIME);
    }
    finish(state)
}

fn finish(mut state: u64) -> u64 {
    state ^= state >> 30;
    state = state.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    state ^= state >> 27;
    state = state.wrapping_mul(0x94d0_49bb_1331_11eb);
    state ^ (state >> 31)
}

/// [`hash`] of four keys. FNV-1a takes a multiplication a byte, each waiting for the last; four
/// keys of one length are hashed side by side so that the processor overlaps their chains.
fn hash_four(keys: [&[u8]; 4]) -> [u64; 4] {
    let length = keys[0].len();
    if keys.iter().any(|key| key.len() != length) {
        return keys.map(hash);
    }
    let mut states = [FNV_OFFSET; 4];
    for (((&a, &b), &c), &d) in keys[0].iter().zip(keys[1]).zip(keys[2]).zip(keys[3]) {
        for (state, byte) in states.iter_mut().zip([a, b, c, d]) {
            *state ^= u64::from(byte);
            *state = state.wrapping_mul(FNV_PRIME);
        }
    }
    states.map(finish)
}

impl Bloom {
    /// The filter as bytes (checkpoints): bit count, hashes, keys, then the bit words.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.bit_count.to_le_bytes());
        out.extend_from_slice(&self.hashes.to_le_bytes());
        out.extend_from_slice(&self.keys.to_le_bytes());
        for word in &self.bits {
            out.extend_from_slice(&word.to_le_bytes());
        }
    }

    /// A filter from its parts as [`Bloom::encode`] wrote them; `None` if they do not agree.
    pub(crate) fn from_parts(
        bit_count: u64,
        hashes: u32,
        keys: u64,
        bits: Vec<u64>,
    ) -> Option<Bloom> {
        (bit_count > 0 && bits.len() as u64 == bit_count.div_ceil(64) && (1..=16).contains(&hashes))
            .then_some(Bloom {
                bits,
                bit_count,
                modulus: Modulus::new(bit_count),
                hashes,
                keys,
            })
    }

    /// A filter over `keys` with `bits_per_key` bits each (at least 64 bits in all).
    pub(crate) fn build<'a>(
        keys: impl ExactSizeIterator<Item = &'a [u8]>,
        bits_per_key: f64,
        cpu: &mut CpuCounts,
    ) -> Bloom {
        let count = keys.len() as u64;
        let bit_count = ((count as f64 * bits_per_key).ceil() as u64).max(64);
        let hashes = ((bits_per_key * std::f64::consts::LN_2).round() as u32).clamp(1, 16);
        let mut bloom = Bloom {
            bits: vec![0; bit_count.div_ceil(64) as usize],
            bit_count,
            modulus: Modulus::new(bit_count),
            hashes,
            keys: count,
        };
        cpu.bloom_builds += 1;
        let mut add = |key: &[u8], key_hash: u64| {
            cpu.bytes_hashed += key.len() as u64;
            cpu.bloom_probes += u64::from(hashes);
            let mut state = key_hash;
            for _ in 0..hashes {
                let bit = bloom.modulus.remainder(next_probe(&mut state));
                bloom.bits[(bit / 64) as usize] |= 1 << (bit % 64);
            }
        };
        let mut keys = keys.peekable();
        while keys.peek().is_some() {
            let mut group: [&[u8]; 4] = [&[]; 4];
            let mut taken = 0;
            for (slot, key) in group.iter_mut().zip(keys.by_ref()) {
                *slot = key;
                taken += 1;
            }
            if taken == 4 {
                for (key, key_hash) in group.into_iter().zip(hash_four(group)) {
                    add(key, key_hash);
                }
            } else {
                for &key in &group[..taken] {
                    add(key, hash(key));
                }
            }
        }
        bloom
    }

    /// Whether the key may be in the set (false positives possible, false negatives not).
    #[cfg(test)]
    pub(crate) fn may_contain(&self, key: &[u8], cpu: &mut CpuCounts) -> bool {
        self.may_contain_hashed(key, hash(key), cpu)
    }

    /// [`Bloom::may_contain`] of a key whose [`hash`] is `key_hash`: a lookup hashes its key once
    /// for every level's filter (its work is counted for each filter as before).
    pub(crate) fn may_contain_hashed(
        &self,
        key: &[u8],
        key_hash: u64,
        cpu: &mut CpuCounts,
    ) -> bool {
        cpu.bytes_hashed += key.len() as u64;
        let mut state = key_hash;
        for _ in 0..self.hashes {
            cpu.bloom_probes += 1;
            let bit = self.modulus.remainder(next_probe(&mut state));
            if self.bits[(bit / 64) as usize] & (1 << (bit % 64)) == 0 {
                return false;
            }
        }
        true
    }

    /// DRAM the filter takes.
    pub(crate) fn dram_bytes(&self) -> u64 {
        self.bit_count.div_ceil(8)
    }

    /// The false-positive rate this filter's size and hash count predict: `(1 - e^{-kn/m})^k`.
    pub(crate) fn predicted_fpr(&self) -> f64 {
        let k = f64::from(self.hashes);
        let exponent = -k * self.keys as f64 / self.bit_count as f64;
        (1.0 - exponent.exp()).powf(k)
    }
}

/// The next probe position: a SplitMix64 step from the key's hash. Plain double hashing
/// (`h1 + i·h2 mod m`) was tried first and measured far above its predicted rate on small filters:
/// when `h2` shares a factor with `m` the probes cycle over a few bits.
fn next_probe(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut mixed = *state;
    mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    mixed ^ (mixed >> 31)
}

/// Monkey's bits per key for levels with `entries[i]` entries sharing `memory_bits`.
pub(crate) fn monkey_bits_per_key(entries: &[u64], memory_bits: f64) -> Vec<f64> {
    let ln2_squared = std::f64::consts::LN_2 * std::f64::consts::LN_2;
    let mut filtered: Vec<bool> = entries.iter().map(|&n| n > 0).collect();
    loop {
        let total: f64 = entries
            .iter()
            .zip(&filtered)
            .filter(|(_, &on)| on)
            .map(|(&n, _)| n as f64)
            .sum();
        if total == 0.0 {
            return vec![0.0; entries.len()];
        }
        let weighted: f64 = entries
            .iter()
            .zip(&filtered)
            .filter(|(_, &on)| on)
            .map(|(&n, _)| n as f64 * (n as f64).ln())
            .sum();
        // ln λ from Σ N_i ln(1 / (λ N_i)) = M ln²2.
        let ln_lambda = -(weighted + memory_bits * ln2_squared) / total;
        let mut changed = false;
        let rates: Vec<f64> = entries
            .iter()
            .zip(filtered.iter_mut())
            .map(|(&n, on)| {
                if !*on {
                    return 1.0;
                }
                let rate = (ln_lambda + (n as f64).ln()).exp();
                if rate >= 1.0 {
                    *on = false;
                    changed = true;
                }
                rate.min(1.0)
            })
            .collect();
        if !changed {
            return rates
                .iter()
                .map(|&rate| {
                    if rate >= 1.0 {
                        0.0
                    } else {
                        -rate.ln() / ln2_squared
                    }
                })
                .collect();
        }
    }
}

/// The false-positive rate Monkey assigns to a level with `bits_per_key`: `e^{-b ln²2}`.
pub(crate) fn monkey_fpr(bits_per_key: f64) -> f64 {
    let ln2_squared = std::f64::consts::LN_2 * std::f64::consts::LN_2;
    (-bits_per_key * ln2_squared).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bloom_has_no_false_negatives_and_about_the_predicted_rate() {
        let keys: Vec<Vec<u8>> = (0..2000u32)
            .map(|i| format!("key{i}").into_bytes())
            .collect();
        let mut cpu = CpuCounts::default();
        let bloom = Bloom::build(keys.iter().map(|k| &k[..]), 6.0, &mut cpu);
        assert!(keys.iter().all(|key| bloom.may_contain(key, &mut cpu)));
        let trials = 20_000u32;
        let positives = (0..trials)
            .filter(|i| bloom.may_contain(format!("absent{i}").as_bytes(), &mut cpu))
            .count();
        let measured = positives as f64 / f64::from(trials);
        let predicted = bloom.predicted_fpr();
        assert!(
            (measured - predicted).abs() < 0.02,
            "{measured} vs {predicted}"
        );
    }

    proptest::proptest! {
        #[test]
        fn remainders_by_multiplication_are_exact(value: u64, divisor in 1u64..) {
            proptest::prop_assert_eq!(Modulus::new(divisor).remainder(value), value % divisor);
        }

        #[test]
        fn four_keys_hash_as_one_at_a_time(
            keys in proptest::collection::vec(proptest::collection::vec(0u8..4, 0..3), 4),
            length in 0usize..40,
        ) {
            // Keys of one length (the common case) and keys of several.
            let same: Vec<Vec<u8>> = keys.iter().map(|key| key.repeat(length)).collect();
            for group in [&keys, &same] {
                let four = [&group[0][..], &group[1][..], &group[2][..], &group[3][..]];
                proptest::prop_assert_eq!(hash_four(four), four.map(hash));
            }
        }
    }

    #[test]
    fn small_divisors_and_extreme_values_take_exact_remainders() {
        for divisor in [1, 2, 3, 63, 64, 65, 1 << 32, u64::MAX - 1, u64::MAX] {
            for value in [0, 1, divisor - 1, divisor, u64::MAX - 1, u64::MAX] {
                assert_eq!(Modulus::new(divisor).remainder(value), value % divisor);
            }
        }
    }

    #[test]
    fn monkey_gives_smaller_levels_lower_rates_and_spends_the_memory() {
        let entries = [100u64, 1_000, 10_000];
        let memory = 8.0 * 11_100.0;
        let bits = monkey_bits_per_key(&entries, memory);
        assert!(bits[0] > bits[1] && bits[1] > bits[2]);
        let spent: f64 = bits.iter().zip(entries).map(|(b, n)| b * n as f64).sum();
        assert!((spent - memory).abs() / memory < 1e-6);
        // Rates proportional to level size.
        let ratio = monkey_fpr(bits[2]) / monkey_fpr(bits[1]);
        assert!((ratio - 10.0).abs() < 1e-6, "{ratio}");
    }
}
