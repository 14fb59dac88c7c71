//! Hints to the host's caches: a simulator's speed on a card of many gigabytes is the misses of
//! host memory its reads wait for, one after another. A prefetch asks for a line without waiting
//! for it (a load that misses holds up every instruction after it from retiring), so lines asked
//! for together arrive together. Nothing here changes a value or what the simulation sees.

/// Asks the host to bring the cache line holding `item` into its caches. Where the processor has
/// no prefetch instruction this project can reach, it does nothing.
#[inline(always)]
pub fn line<T>(item: &T) {
    #[cfg(target_arch = "x86_64")]
    safe_arch::prefetch_t0(item);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = item;
}

/// Bytes of a cache line on the processors this project runs on.
pub const LINE_BYTES: usize = 64;
