//! How long this host takes to read a random cache line of a buffer of a given size: what bounds
//! the simulator's wall-clock speed at PinK's scale, where a request's work is a chain of reads of
//! random places in gigabytes of page encodings and index structures (docs/design.md, "What bounds
//! a GET's wall time").
//!
//! `cargo run --release -p kvssd-bench --example host_memory_latency -- 64 4096` prints, per size
//! in MiB, the time of one read that depends on the one before (a random cycle through every cache
//! line of the buffer) and of one read among eight independent chains run together: once in a
//! mapping advised not to use transparent huge pages (4 KiB pages, as the allocator's memory
//! mostly is) and once in one advised to use them, as compact media's chunks are
//! (`crates/flash/src/pool.rs`). Where the kernel offers no huge pages, both rows are the same;
//! on systems other than Linux, each size is measured once, in the system's pages.

use memmap2::{Advice, MmapMut};
use std::time::Instant;

const LINE_WORDS: usize = 8;
const READS: usize = 20_000_000;
const CHAINS: usize = 8;
/// The kinds of page each size is measured in, and the advice that asks for them.
#[cfg(target_os = "linux")]
const PAGES: [(&str, Option<Advice>); 2] = [
    ("4 KiB pages", Some(Advice::NoHugePage)),
    ("huge pages", Some(Advice::HugePage)),
];
#[cfg(not(target_os = "linux"))]
const PAGES: [(&str, Option<Advice>); 1] = [("the system's pages", None)];

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .map(|arg| match arg.parse::<usize>() {
            Ok(mib) if (1..=1 << 20).contains(&mib) => mib,
            _ => {
                eprintln!("host_memory_latency: sizes are MiB from 1 to 1048576, not {arg:?}");
                std::process::exit(2);
            }
        })
        .collect();
    let sizes = if sizes.is_empty() {
        vec![64, 4096]
    } else {
        sizes
    };
    for mib in sizes {
        for (pages, advice) in PAGES {
            let (dependent, independent) = measure(mib, advice);
            println!(
                "{mib} MiB, {pages}: {dependent:.1} ns a dependent read, {independent:.1} ns a \
                 read of {CHAINS} independent chains"
            );
        }
    }
}

/// The word at index `at` of `words` (native byte order).
fn word(words: &[u8], at: usize) -> usize {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&words[at * 8..at * 8 + 8]);
    usize::from_ne_bytes(bytes)
}

/// Nanoseconds per read in a mapping given `advice`: one chain, then `CHAINS` chains interleaved.
fn measure(mib: usize, advice: Option<Advice>) -> (f64, f64) {
    let lines = (mib << 20) / (LINE_WORDS * 8);
    // A random cyclic order of the lines (Sattolo's shuffle), each line holding the next's index.
    let mut order: Vec<usize> = (0..lines).collect();
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    for i in (1..lines).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        order.swap(i, (state % i as u64) as usize);
    }
    let mut words = MmapMut::map_anon(lines * LINE_WORDS * 8).unwrap_or_else(|error| {
        eprintln!("host_memory_latency: cannot map {mib} MiB: {error}");
        std::process::exit(1);
    });
    // Advice only: a kernel without huge pages leaves both buffers in 4 KiB pages.
    if let Some(advice) = advice {
        let _ = words.advise(advice);
    }
    for (i, &line) in order.iter().enumerate() {
        let next = order[(i + 1) % lines] * LINE_WORDS;
        let at = line * LINE_WORDS * 8;
        words[at..at + 8].copy_from_slice(&next.to_ne_bytes());
    }
    drop(order);
    let mut at = 0;
    let started = Instant::now();
    for _ in 0..READS {
        at = word(&words, at);
    }
    let dependent = started.elapsed().as_nanos() as f64 / READS as f64;
    let mut chains: [usize; CHAINS] =
        std::array::from_fn(|chain| (chain * lines / CHAINS) * LINE_WORDS);
    let started = Instant::now();
    for _ in 0..READS / CHAINS {
        for position in chains.iter_mut() {
            *position = word(&words, *position);
        }
    }
    let independent = started.elapsed().as_nanos() as f64 / READS as f64;
    std::hint::black_box((at, chains));
    (dependent, independent)
}
