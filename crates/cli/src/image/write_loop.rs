//! `kvssd write-loop` (hidden): seeded stores on an image, each announced before it and
//! acknowledged after it, for the SIGKILL tests (`crates/cli/tests/sigkill.rs`).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use kvssd_device::{Durability, NamespaceId, StoreMode, SyncPolicy};
use kvssd_flash::Flash;

use super::{
    close, device_failure, hex, image_config, open_with, CacheArgs, Failure, Outcome,
    DEFAULT_NAMESPACE,
};

/// `kvssd write-loop` (hidden).
#[derive(Debug, Args)]
pub struct WriteLoopArgs {
    /// Image file created by `kvssd format`.
    path: PathBuf,
    #[command(flatten)]
    cache: CacheArgs,
    /// Seed of keys and values.
    #[arg(long)]
    seed: u64,
    /// Stores to make.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    count: u64,
    /// Distinct keys the stores are drawn from.
    #[arg(long, default_value_t = 400, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    keys: u64,
    /// Namespace id.
    #[arg(long, default_value_t = DEFAULT_NAMESPACE)]
    ns: u32,
    /// Writer threads, each storing its own keys (thread t of T takes the keys equal to t modulo T).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    threads: u64,
    /// Group commit: the log is not synced per command; each writer calls `Device::sync` after its
    /// store, and writers share the syncs that run at the same time.
    #[arg(long)]
    group: bool,
    /// Pads each value with seeded bytes to this many bytes (without it, a value is its seed,
    /// writer and index and 1 to 64 seeded bytes), so that a few thousand stores fill a write
    /// buffer of megabytes.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    value_bytes: Option<u32>,
}

/// The `index`-th store of writer `thread` of `threads` in a write loop: its key and value (a pure
/// function of seed, thread and index). Each writer's keys are its own: key numbers equal to
/// `thread` modulo `threads`.
fn loop_pair(
    seed: u64,
    keys: u64,
    thread: u64,
    threads: u64,
    index: u64,
    value_bytes: Option<u32>,
) -> (Vec<u8>, Vec<u8>) {
    let mut state = seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ thread.rotate_left(48);
    let mut next = || {
        // SplitMix64.
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let key = format!("key{:06}", (next() % keys) * threads + thread).into_bytes();
    let len = 1 + (next() % 64) as usize;
    let mut value = format!("{seed}:{thread}:{index}:").into_bytes();
    value.extend((0..len).map(|_| next() as u8));
    if let Some(bytes) = value_bytes {
        let bytes = bytes as usize;
        while value.len() < bytes {
            value.extend_from_slice(&next().to_le_bytes()[..(bytes - value.len()).min(8)]);
        }
    }
    (key, value)
}

pub(super) fn write_loop(args: WriteLoopArgs) -> Outcome {
    let mut config = image_config(
        &Flash::probe(&args.path).map_err(|error| Failure::work(error.to_string()))?,
        args.cache,
    )?;
    if args.group {
        config.durability = Durability::WriteAheadLog(SyncPolicy::None);
    }
    let device = open_with(&args.path, config)?;
    let stdout = std::sync::Mutex::new(std::io::stdout());
    // Each line goes out whole: the writers' lines interleave, never their bytes.
    let say = |line: String| -> Result<(), Failure> {
        let mut stdout = stdout
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        writeln!(stdout, "{line}")
            .and_then(|()| stdout.flush())
            .map_err(|error| Failure::work(format!("standard output: {error}")))
    };
    let writer = |thread: u64| -> Result<(), Failure> {
        for index in 0..args.count {
            let (key, value) = loop_pair(
                args.seed,
                args.keys,
                thread,
                args.threads,
                index,
                args.value_bytes,
            );
            // The intent goes out before the store, so a kill during it leaves the reader knowing
            // which one write of this writer may or may not have happened.
            say(format!("pending {thread} {} {}", hex(&key), hex(&value)))?;
            device
                .store(0, NamespaceId(args.ns), &key, &value, StoreMode::Upsert)
                .map_err(|error| device_failure(&args.path, error))?;
            if args.group {
                device
                    .sync(0)
                    .map_err(|error| device_failure(&args.path, error))?;
            }
            say(format!("ack {thread}"))?;
        }
        Ok(())
    };
    std::thread::scope(|scope| {
        let writers: Vec<_> = (0..args.threads)
            .map(|thread| scope.spawn(move || writer(thread)))
            .collect();
        writers.into_iter().try_for_each(|handle| {
            handle
                .join()
                .unwrap_or_else(|_| Err(Failure::work("a writer thread panicked")))
        })
    })?;
    let counts = device
        .durability_counts()
        .map_err(|error| device_failure(&args.path, error))?;
    eprintln!(
        "write-loop: {} stores by {} writer(s), {} log pages written, {} syncs of the medium",
        args.count * args.threads,
        args.threads,
        counts.log_pages_written,
        counts.media_syncs
    );
    close(&args.path, device)?;
    Ok(ExitCode::SUCCESS)
}
