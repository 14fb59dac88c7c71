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
//! (`crates/flash/src/pool.rs`), and on Linux once more in 1 GiB pages where the kernel has them
//! reserved (`echo 3 > /sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages` as root; where
//! it has none, that row says so). Where the kernel offers no transparent huge pages, the first two
//! rows are the same; on systems other than Linux, each size is measured once, in the system's
//! pages.

use memmap2::{Advice, MmapMut, MmapOptions};
use std::time::Instant;

const LINE_WORDS: usize = 8;
const READS: usize = 20_000_000;
const CHAINS: usize = 8;

/// How a buffer's memory is mapped.
#[derive(Clone, Copy)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
enum Pages {
    /// An ordinary mapping, given this advice if any.
    Advised(Option<Advice>),
    /// A mapping of 1 GiB pages from the kernel's reserved pool (`MAP_HUGETLB`).
    Gigantic,
}

/// The kinds of page each size is measured in, and how to map them.
#[cfg(target_os = "linux")]
const PAGES: [(&str, Pages); 3] = [
    ("4 KiB pages", Pages::Advised(Some(Advice::NoHugePage))),
    ("huge pages", Pages::Advised(Some(Advice::HugePage))),
    ("1 GiB pages", Pages::Gigantic),
];
#[cfg(not(target_os = "linux"))]
const PAGES: [(&str, Pages); 1] = [("the system's pages", Pages::Advised(None))];

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
        for (name, pages) in PAGES {
            let Some((dependent, independent)) = measure(mib, pages) else {
                println!("{mib} MiB, {name}: none reserved, not measured");
                continue;
            };
            println!(
                "{mib} MiB, {name}: {dependent:.1} ns a dependent read, {independent:.1} ns a \
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

/// Nanoseconds per read in a mapping of `pages`: one chain, then `CHAINS` chains interleaved;
/// `None` if the mapping is of 1 GiB pages and the kernel has too few reserved.
fn measure(mib: usize, pages: Pages) -> Option<(f64, f64)> {
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
    let bytes = lines * LINE_WORDS * 8;
    let mut words = match pages {
        Pages::Advised(advice) => {
            let words = MmapMut::map_anon(bytes).unwrap_or_else(|error| {
                eprintln!("host_memory_latency: cannot map {mib} MiB: {error}");
                std::process::exit(1);
            });
            // Advice only: a kernel without huge pages leaves both buffers in 4 KiB pages.
            if let Some(advice) = advice {
                let _ = words.advise(advice);
            }
            words
        }
        // 2^30 bytes a page; the kernel refuses the mapping when its pool is short.
        Pages::Gigantic => MmapOptions::new()
            .len(bytes)
            .huge(Some(30))
            .map_anon()
            .ok()?,
    };
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
    Some((dependent, independent))
}
