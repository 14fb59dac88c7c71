//! YCSB core workloads, as PinK's evaluation uses them (ATC'20 Table 1), generated deterministically
//! from a seed.
//!
//! | workload | operations | request distribution |
//! | --- | --- | --- |
//! | Load | 100% insert of unique keys | uniform order |
//! | A | 50% read, 50% update | zipfian |
//! | B | 95% read, 5% update | zipfian |
//! | C | 100% read | zipfian |
//! | D | 95% read, 5% insert | latest |
//! | E | 95% scan (length uniform in 1..=100), 5% insert | zipfian |
//! | F | 50% read, 50% read-modify-write | zipfian |
//!
//! The generators follow YCSB core (`site.ycsb.generator`):
//! * **zipfian** is Gray et al.'s algorithm ("Quickly generating billion-record synthetic databases",
//!   SIGMOD'94) with constant 0.99, *scrambled* as YCSB does: a zipfian draw over 10^10 items (with
//!   YCSB's precomputed zeta for that count) hashed with 64-bit FNV-1a and reduced modulo the key space,
//!   so that popular keys are spread over the key space instead of clustered at its start;
//! * **latest** is YCSB's skewed-latest: the most recently inserted key minus a zipfian draw over the
//!   keys inserted so far;
//! * **uniform** draws uniformly over the loaded keys.
//!
//! Keys are numbered 0.. in insertion order; key number `n` is the text `user` followed by the 20-digit
//! decimal of a bijective 64-bit mix of `n`, padded or cut to the configured key size (32 B by
//! default). YCSB hashes key numbers with FNV instead; a bijection keeps YCSB's effect (inserts arrive in
//! uniformly random key order) and also guarantees that distinct key numbers give distinct keys.
//! A value is the 16-byte description of its write (key number, version, a seal of both and the
//! length) repeated to its length ([`value_of`]), so any reader can check it ([`described`]) and
//! compact media keep it in a few bytes.
//!
//! Like YCSB, a workload with inserts draws zipfian key numbers over the loaded keys plus twice the
//! expected inserts, and redraws any number not yet inserted.

use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// YCSB's zipfian constant.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;
/// Items of YCSB's scrambled zipfian generator.
const SCRAMBLED_ITEM_COUNT: u64 = 10_000_000_000;
/// YCSB's precomputed zeta(10^10, 0.99) for the scrambled generator.
const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;
/// Longest scan of workload E by default (YCSB's `maxscanlength`).
pub const SCAN_LENGTH_MAX: u32 = 100;
/// Smallest key size the text key format fits in: "user" and at least 8 of its digits. Shorter
/// keys are binary ([`key_of`]).
pub const KEY_BYTES_MIN: usize = 12;
/// Smallest key size of all: a binary key of 4 bytes, as IterKVSSD loads.
pub const KEY_BYTES_SHORTEST: usize = 4;

/// How keys of existing records are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    /// Every loaded key equally likely.
    Uniform,
    /// Scrambled zipfian with constant 0.99.
    Zipfian,
    /// The latest inserts most likely (skewed latest).
    Latest,
}

/// A workload: the share of each operation and how keys are chosen.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadSpec {
    /// `load`, `a` .. `f`.
    pub name: &'static str,
    /// Share of reads.
    pub read: f64,
    /// Share of updates (blind overwrites of existing keys).
    pub update: f64,
    /// Share of inserts of new keys.
    pub insert: f64,
    /// Share of scans.
    pub scan: f64,
    /// Share of read-modify-writes.
    pub read_modify_write: f64,
    /// Key choice for reads, updates, scans and read-modify-writes.
    pub distribution: Distribution,
    /// Scans are 1 to this many records long, uniformly (YCSB's `maxscanlength`).
    pub scan_length_max: u32,
}

impl WorkloadSpec {
    /// Names accepted by [`WorkloadSpec::by_name`], in the order PinK runs them.
    pub const NAMES: [&'static str; 7] = ["load", "a", "b", "c", "d", "e", "f"];

    /// The YCSB core workload with a name.
    pub fn by_name(name: &str) -> Option<WorkloadSpec> {
        let spec =
            |name, read, update, insert, scan, read_modify_write, distribution| WorkloadSpec {
                name,
                read,
                update,
                insert,
                scan,
                read_modify_write,
                distribution,
                scan_length_max: SCAN_LENGTH_MAX,
            };
        use Distribution::*;
        Some(match name {
            "load" => spec("load", 0.0, 0.0, 1.0, 0.0, 0.0, Uniform),
            "a" => spec("a", 0.5, 0.5, 0.0, 0.0, 0.0, Zipfian),
            "b" => spec("b", 0.95, 0.05, 0.0, 0.0, 0.0, Zipfian),
            "c" => spec("c", 1.0, 0.0, 0.0, 0.0, 0.0, Zipfian),
            "d" => spec("d", 0.95, 0.0, 0.05, 0.0, 0.0, Latest),
            "e" => spec("e", 0.0, 0.0, 0.05, 0.95, 0.0, Zipfian),
            "f" => spec("f", 0.5, 0.0, 0.0, 0.0, 0.5, Zipfian),
            _ => return None,
        })
    }
}

/// One request of a workload. Keys are key numbers; see [`key_of`] and [`value_of`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Read one key.
    Read(u64),
    /// Overwrite an existing key.
    Update(u64),
    /// Insert a new key.
    Insert(u64),
    /// Read `length` records in key order starting at the key.
    Scan {
        /// Key number of the start key.
        start: u64,
        /// Records to read.
        length: u32,
    },
    /// Read a key, then write it back modified.
    ReadModifyWrite(u64),
}

/// Gray et al.'s zipfian generator over `0..items`, as YCSB's `ZipfianGenerator`, with incremental
/// growth of the item count (for skewed latest).
#[derive(Debug, Clone)]
struct Zipfian {
    items: u64,
    theta: f64,
    alpha: f64,
    zeta2: f64,
    zetan: f64,
    eta: f64,
}

impl Zipfian {
    fn new(items: u64, theta: f64) -> Zipfian {
        let zetan = zeta(0, items, theta, 0.0);
        Zipfian::with_zetan(items, theta, zetan)
    }

    fn with_zetan(items: u64, theta: f64, zetan: f64) -> Zipfian {
        let zeta2 = zeta(0, 2, theta, 0.0);
        let mut generator = Zipfian {
            items,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zeta2,
            zetan,
            eta: 0.0,
        };
        generator.eta = generator.eta_for(items);
        generator
    }

    fn eta_for(&self, items: u64) -> f64 {
        (1.0 - (2.0 / items as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2 / self.zetan)
    }

    /// Grows the item count, extending zeta incrementally.
    fn grow_to(&mut self, items: u64) {
        if items > self.items {
            self.zetan = zeta(self.items, items, self.theta, self.zetan);
            self.items = items;
            self.eta = self.eta_for(items);
        }
    }

    fn next(&self, rng: &mut Xoshiro256PlusPlus) -> u64 {
        let u = unit(rng);
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1;
        }
        let value = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        value.min(self.items - 1)
    }
}

/// `zeta(n) = sum_{i=1..n} 1 / i^theta`, continued from `zeta(from) = partial`.
fn zeta(from: u64, to: u64, theta: f64, partial: f64) -> f64 {
    let mut sum = partial;
    for i in from..to {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
    }
    sum
}

fn unit(rng: &mut Xoshiro256PlusPlus) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// YCSB's `Utils.fnvhash64`: 64-bit FNV-1a of the eight little-endian bytes of `value`, then the
/// absolute value of the result read as a signed 64-bit number.
pub fn fnv_hash64(value: u64) -> u64 {
    let mut hash: u64 = 0xCBF2_9CE4_8422_2325;
    for byte in value.to_le_bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01B3);
    }
    (hash as i64).wrapping_abs() as u64
}

/// A bijective mix of 64-bit numbers (the splitmix64 finaliser): distinct inputs, distinct outputs.
fn mix64(value: u64) -> u64 {
    let mut z = value.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The key of key number `number`, `key_bytes` long (at least [`KEY_BYTES_SHORTEST`]). Keys of
/// fewer than [`KEY_BYTES_MIN`] bytes are binary: the big-endian bytes of a bijective mix of the
/// key number (32-bit below 8 bytes, 64-bit from 8), padded with zero bytes; distinct key numbers
/// give distinct keys up to [`distinct_keys_max`].
pub fn key_of(number: u64, key_bytes: usize) -> Vec<u8> {
    if key_bytes < KEY_BYTES_MIN {
        let key_bytes = key_bytes.max(KEY_BYTES_SHORTEST);
        let mut key = if key_bytes >= 8 {
            mix64(number).to_be_bytes().to_vec()
        } else {
            mix32(number as u32).to_be_bytes().to_vec()
        };
        key.resize(key_bytes, 0);
        return key;
    }
    // `user` and the mix's 20 decimal digits, zero-padded (a u64 has 20 at most), written
    // digit by digit: a run makes one key a request, and `format!` was a few percent of a Load.
    let mut key = Vec::with_capacity(key_bytes.max(24));
    key.extend_from_slice(b"user");
    let mut digits = [b'0'; 20];
    let mut rest = mix64(number);
    for digit in digits.iter_mut().rev() {
        *digit = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    key.extend_from_slice(&digits);
    key.resize(key_bytes, b'x');
    key
}

/// How many key numbers (from 0) have distinct keys of `key_bytes` ([`key_of`]): binary keys of
/// fewer than 8 bytes hold a 32-bit mix.
pub fn distinct_keys_max(key_bytes: usize) -> u64 {
    if key_bytes < 8 {
        1 << 32
    } else {
        u64::MAX
    }
}

/// A bijection of the 32-bit integers that spreads consecutive ones (MurmurHash3's finaliser).
fn mix32(value: u32) -> u32 {
    let mut h = value ^ (value >> 16);
    h = h.wrapping_mul(0x85EB_CA6B);
    h ^= h >> 13;
    h = h.wrapping_mul(0xC2B2_AE35);
    h ^ (h >> 16)
}

/// Bytes of a value's description (see [`value_of`]).
pub const DESCRIPTION_BYTES: usize = 16;

/// The seal of a description: binds the key number, version and length, so that a value of
/// another write, or of another length, or cut or damaged bytes, do not pass for this one.
fn seal(number: u64, version: u32, value_bytes: usize) -> u32 {
    mix64(mix64(number ^ u64::from(version).rotate_left(32)) ^ value_bytes as u64) as u32
}

/// The 16-byte description of write `version` of key number `number` with a `value_bytes` value:
/// the key number (u64), the version's low 32 bits (u32) and a seal of the three (u32), little-endian.
pub fn description_of(number: u64, version: u64, value_bytes: usize) -> [u8; DESCRIPTION_BYTES] {
    let version = version as u32;
    let mut description = [0u8; DESCRIPTION_BYTES];
    description[..8].copy_from_slice(&number.to_le_bytes());
    description[8..12].copy_from_slice(&version.to_le_bytes());
    description[12..].copy_from_slice(&seal(number, version, value_bytes).to_le_bytes());
    description
}

/// The value written for key number `number` at `version`, `value_bytes` long: its description
/// ([`description_of`]) repeated to its length (and cut there), so a reader can tell which write it
/// sees, and compact media ([`kvssd_flash::MediaKind::Compact`]) keep it in a few bytes however long
/// it is. Values differ per key, version and length.
pub fn value_of(number: u64, version: u64, value_bytes: usize) -> Vec<u8> {
    let description = description_of(number, version, value_bytes);
    let mut value = Vec::with_capacity(value_bytes);
    // Whole descriptions, then the cut one: a copy per 16 bytes, not a step per byte.
    while value.len() + DESCRIPTION_BYTES <= value_bytes {
        value.extend_from_slice(&description);
    }
    value.extend_from_slice(&description[..value_bytes - value.len()]);
    value
}

/// What a value read back says about itself: the write it is, if it is exactly the value
/// [`value_of`] gives for its key number, version and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Described {
    /// Key number.
    pub number: u64,
    /// Version (its low 32 bits).
    pub version: u32,
}

/// Reads a value's description and checks the whole value against it: `None` if the value is not
/// one [`value_of`] writes (too short to carry a description, a wrong seal, or any byte differing).
pub fn described(value: &[u8]) -> Option<Described> {
    let description = value.get(..DESCRIPTION_BYTES)?;
    let word = |range: std::ops::Range<usize>| -> Option<u64> {
        let mut bytes = [0u8; 8];
        bytes[..range.len()].copy_from_slice(description.get(range)?);
        Some(u64::from_le_bytes(bytes))
    };
    let number = word(0..8)?;
    let version = word(8..12)? as u32;
    if word(12..16)? as u32 != seal(number, version, value.len()) {
        return None;
    }
    // Every byte equals the byte a description before it: one comparison of the value with
    // itself shifted, not one per description (a run checks every value it reads).
    let repeats = value[DESCRIPTION_BYTES..] == value[..value.len() - DESCRIPTION_BYTES];
    repeats.then_some(Described { number, version })
}

/// Draws the requests of one workload run.
#[derive(Debug, Clone)]
pub struct Generator {
    spec: WorkloadSpec,
    rng: Xoshiro256PlusPlus,
    /// Keys inserted so far (numbers `0..inserted`).
    inserted: u64,
    /// Key numbers zipfian draws range over (loaded keys plus twice the expected inserts).
    zipfian_items: u64,
    scrambled: Zipfian,
    latest: Zipfian,
    load_next: u64,
}

impl Generator {
    /// A generator for `spec` over `loaded` keys already inserted (none for Load), expecting
    /// `operations` requests, seeded by `seed`.
    pub fn new(spec: WorkloadSpec, loaded: u64, operations: u64, seed: u64) -> Generator {
        let expected_inserts = (operations as f64 * spec.insert * 2.0) as u64;
        Generator {
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            inserted: loaded,
            zipfian_items: (loaded + expected_inserts).max(1),
            scrambled: Zipfian::with_zetan(SCRAMBLED_ITEM_COUNT, ZIPFIAN_CONSTANT, SCRAMBLED_ZETAN),
            latest: Zipfian::new(loaded.max(1), ZIPFIAN_CONSTANT),
            load_next: loaded,
            spec,
        }
    }

    /// Keys inserted so far, loaded ones included.
    pub fn inserted(&self) -> u64 {
        self.inserted
    }

    /// The next request.
    pub fn next_request(&mut self) -> Request {
        let spec = &self.spec;
        let draw = unit(&mut self.rng);
        let mut threshold = spec.read;
        if draw < threshold {
            return Request::Read(self.existing_key());
        }
        threshold += spec.update;
        if draw < threshold {
            return Request::Update(self.existing_key());
        }
        threshold += spec.scan;
        if draw < threshold {
            let longest = u64::from(spec.scan_length_max.max(1));
            let start = self.existing_key();
            let length = 1 + (self.rng.next_u64() % longest) as u32;
            return Request::Scan { start, length };
        }
        threshold += spec.read_modify_write;
        if draw < threshold && spec.read_modify_write > 0.0 {
            return Request::ReadModifyWrite(self.existing_key());
        }
        let number = self.load_next;
        self.load_next += 1;
        self.inserted = self.load_next;
        Request::Insert(number)
    }

    fn existing_key(&mut self) -> u64 {
        let inserted = self.inserted.max(1);
        match self.spec.distribution {
            Distribution::Uniform => self.rng.next_u64() % inserted,
            Distribution::Latest => {
                // Grown here rather than at each insert: zeta is summed term by term either way,
                // and a Load (44M inserts at PinK's scale) draws nothing from it.
                self.latest.grow_to(self.inserted);
                inserted - 1 - self.latest.next(&mut self.rng).min(inserted - 1)
            }
            Distribution::Zipfian => loop {
                let draw = self.scrambled.next(&mut self.rng);
                let number = fnv_hash64(draw) % self.zipfian_items;
                if number < inserted {
                    break number;
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};

    #[test]
    fn workload_keys_are_unique_and_sized() {
        let keys: HashSet<Vec<u8>> = (0..100_000).map(|n| key_of(n, 32)).collect();
        assert_eq!(keys.len(), 100_000);
        assert!(keys
            .iter()
            .all(|key| key.len() == 32 && key.starts_with(b"user")));
        assert_eq!(key_of(7, 16).len(), 16);
        assert_eq!(key_of(7, 1).len(), KEY_BYTES_SHORTEST);
    }

    #[test]
    fn workload_keys_are_ycsbs_user_and_twenty_digits() {
        for number in (0..20_000).chain([u64::MAX - 1, u64::MAX]) {
            for key_bytes in [16, 24, 32, 48] {
                let mut expected = format!("user{:020}", mix64(number)).into_bytes();
                expected.resize(key_bytes, b'x');
                assert_eq!(
                    key_of(number, key_bytes),
                    expected,
                    "key {number} of {key_bytes} B"
                );
            }
        }
    }

    #[test]
    fn workload_short_keys_are_binary_and_unique() {
        for key_bytes in [4, 6, 8, 11] {
            let keys: HashSet<Vec<u8>> = (0..100_000).map(|n| key_of(n, key_bytes)).collect();
            assert_eq!(keys.len(), 100_000, "{key_bytes} B keys collide");
            assert!(keys.iter().all(|key| key.len() == key_bytes));
        }
        // The 32-bit mix is a bijection: the keys of 0..2^32 are all the 4-byte strings.
        let sample: HashSet<u32> = (0..1u64 << 16)
            .map(|n| u32::from_be_bytes(key_of(n << 16, 4).try_into().expect("4 bytes")))
            .collect();
        assert_eq!(sample.len(), 1 << 16);
        assert_eq!(distinct_keys_max(4), 1 << 32);
    }

    #[test]
    fn workload_values_identify_their_write() {
        let value = value_of(42, 3, 1024);
        assert_eq!(value.len(), 1024);
        assert_eq!(&value[..8], &42u64.to_le_bytes());
        assert_eq!(&value[8..12], &3u32.to_le_bytes());
        assert_ne!(value, value_of(42, 4, 1024));
        assert_ne!(value[..1000], value_of(42, 3, 1000));
        assert_eq!(value, value_of(42, 3, 1024));
        assert_eq!(value_of(1, 1, 5).len(), 5);
        assert!(value_of(1, 1, 0).is_empty());
        assert!(
            kvssd_flash::is_periodic(&value),
            "compact media keep it small"
        );
        assert_eq!(
            described(&value),
            Some(Described {
                number: 42,
                version: 3
            })
        );
        assert_eq!(described(&value_of(7, 1, 16)).map(|d| d.number), Some(7));
        // Any other bytes are not a description: another length, a changed byte, a short value.
        assert_eq!(described(&value[..1000]), None);
        let mut damaged = value.clone();
        damaged[700] ^= 1;
        assert_eq!(described(&damaged), None);
        damaged[700] ^= 1;
        damaged[1023] ^= 1;
        assert_eq!(described(&damaged), None, "the last byte");
        damaged[1023] ^= 1;
        damaged[12] ^= 1;
        assert_eq!(described(&damaged), None);
        assert_eq!(described(&value[..15]), None);
    }

    #[test]
    fn workload_fnv_matches_ycsb() {
        // FNV-1a 64 of eight zero bytes is 0xA8C7_F832_281A_39C5, negative as a signed number.
        assert_eq!(fnv_hash64(0), 0x5738_07CD_D7E5_C63B);
    }

    #[test]
    fn workload_zeta_of_ycsb_scrambled_count_is_consistent() {
        // zeta(10^10, 0.99) is precomputed; check the first terms of our zeta against a direct sum.
        let direct: f64 = (1..=1000).map(|i| 1.0 / f64::powf(i as f64, 0.99)).sum();
        assert!((zeta(0, 1000, 0.99, 0.0) - direct).abs() < 1e-9);
        assert!((zeta(500, 1000, 0.99, zeta(0, 500, 0.99, 0.0)) - direct).abs() < 1e-9);
    }

    #[test]
    fn workload_zipfian_is_skewed_like_zipf() {
        let items = 1000;
        let zipf = Zipfian::new(items, ZIPFIAN_CONSTANT);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let mut counts = vec![0u64; items as usize];
        let draws = 200_000;
        for _ in 0..draws {
            counts[zipf.next(&mut rng) as usize] += 1;
        }
        // P(0) = 1 / zeta(n); P(1) = 2^-0.99 / zeta(n).
        let zetan = zeta(0, items, 0.99, 0.0);
        let p0 = counts[0] as f64 / draws as f64;
        assert!(
            (p0 - 1.0 / zetan).abs() < 0.01,
            "p0 {p0} vs {}",
            1.0 / zetan
        );
        let p1 = counts[1] as f64 / draws as f64;
        assert!((p1 - 0.5f64.powf(0.99) / zetan).abs() < 0.01);
        assert!(counts[0] > counts[10] && counts[10] > counts[500]);
    }

    #[test]
    fn workload_mix_follows_the_spec() {
        for name in WorkloadSpec::NAMES {
            let spec = WorkloadSpec::by_name(name).expect("named workload");
            let total = spec.read + spec.update + spec.insert + spec.scan + spec.read_modify_write;
            assert!((total - 1.0).abs() < 1e-9, "{name}");
            let loaded = if name == "load" { 0 } else { 10_000 };
            let operations = 50_000;
            let mut generator = Generator::new(spec.clone(), loaded, operations, 9);
            let mut counts: HashMap<&str, u64> = HashMap::new();
            for _ in 0..operations {
                let request = generator.next_request();
                let (kind, number) = match request {
                    Request::Read(n) => ("read", n),
                    Request::Update(n) => ("update", n),
                    Request::Insert(n) => ("insert", n),
                    Request::Scan { start, length } => {
                        assert!((1..=SCAN_LENGTH_MAX).contains(&length));
                        ("scan", start)
                    }
                    Request::ReadModifyWrite(n) => ("rmw", n),
                };
                if kind != "insert" {
                    assert!(number < generator.inserted(), "{name}: {request:?}");
                }
                *counts.entry(kind).or_default() += 1;
            }
            for (kind, share) in [
                ("read", spec.read),
                ("update", spec.update),
                ("insert", spec.insert),
                ("scan", spec.scan),
                ("rmw", spec.read_modify_write),
            ] {
                let measured = *counts.get(kind).unwrap_or(&0) as f64 / operations as f64;
                assert!(
                    (measured - share).abs() < 0.01,
                    "{name} {kind}: {measured} vs {share}"
                );
            }
        }
        assert!(WorkloadSpec::by_name("g").is_none());
    }

    #[test]
    fn workload_load_inserts_each_key_once_in_order() {
        let spec = WorkloadSpec::by_name("load").expect("load");
        let mut generator = Generator::new(spec, 0, 1000, 1);
        for expected in 0..1000 {
            assert_eq!(generator.next_request(), Request::Insert(expected));
        }
        // Load's keys arrive in uniformly random key order: about half of consecutive pairs descend.
        let descending = (0..999u64)
            .filter(|&n| key_of(n, 32) > key_of(n + 1, 32))
            .count();
        assert!((400..600).contains(&descending), "{descending}");
    }

    #[test]
    fn workload_latest_prefers_recent_inserts() {
        let spec = WorkloadSpec::by_name("d").expect("d");
        let loaded = 100_000;
        let mut generator = Generator::new(spec, loaded, 20_000, 3);
        let mut recent = 0;
        let mut reads = 0;
        for _ in 0..20_000 {
            if let Request::Read(number) = generator.next_request() {
                reads += 1;
                if generator.inserted() - number <= 1_000 {
                    recent += 1;
                }
            }
        }
        // The newest 1% of keys take far more than 1% of reads.
        assert!(recent * 4 > reads, "{recent} of {reads}");
    }

    #[test]
    fn latest_zipfian_grown_at_once_equals_grown_per_insert() {
        // The generator grows skewed-latest's zeta when it draws, not at every insert: the sum
        // must come out bit for bit as when it grew one key at a time.
        let mut stepwise = Zipfian::new(1_000, ZIPFIAN_CONSTANT);
        for items in 1_001..=50_000 {
            stepwise.grow_to(items);
        }
        let mut at_once = Zipfian::new(1_000, ZIPFIAN_CONSTANT);
        at_once.grow_to(50_000);
        assert_eq!(stepwise.zetan.to_bits(), at_once.zetan.to_bits());
        assert_eq!(stepwise.eta.to_bits(), at_once.eta.to_bits());
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let mut again = rng.clone();
        for _ in 0..1_000 {
            assert_eq!(stepwise.next(&mut rng), at_once.next(&mut again));
        }
    }

    #[test]
    fn workload_scrambled_zipfian_spreads_hot_keys() {
        let spec = WorkloadSpec::by_name("c").expect("c");
        let loaded = 100_000;
        let mut generator = Generator::new(spec, loaded, 100_000, 4);
        let mut counts: HashMap<u64, u64> = HashMap::new();
        for _ in 0..100_000 {
            if let Request::Read(number) = generator.next_request() {
                *counts.entry(number).or_default() += 1;
            }
        }
        let mut hottest: Vec<(u64, u64)> = counts.into_iter().collect();
        hottest.sort_by_key(|&(number, count)| (std::cmp::Reverse(count), number));
        // Skewed: the hottest key alone takes a few percent of requests...
        assert!(hottest[0].1 > 2_000, "{:?}", &hottest[..3]);
        // ...and the ten hottest are not clustered at the start of the key space.
        assert!(hottest[..10].iter().any(|&(number, _)| number > loaded / 2));
    }

    #[test]
    fn workload_is_deterministic_from_the_seed() {
        let spec = WorkloadSpec::by_name("e").expect("e");
        let run = |seed| {
            let mut generator = Generator::new(spec.clone(), 5_000, 1_000, seed);
            (0..1_000)
                .map(|_| generator.next_request())
                .collect::<Vec<_>>()
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
    }
}
