//! The three stores behind one small interface, each opened fresh in a directory of its own, and
//! how `--sync` maps onto each.

use std::path::Path;
use std::sync::{Condvar, Mutex};

use kvssd_device::{
    Device, DeviceConfig, Durability, NamespaceId, NamespaceSpec, StoreMode, SyncPolicy,
};
use kvssd_engine::Preset;
use kvssd_flash::Profile;

/// Blocks per die of the smallest card kvssd is given (4 GiB, the benchmarks' default profile).
const KVSSD_BLOCKS_PER_DIE_MIN: u32 = 32;
/// Times the bytes the run writes that the card holds, so GC always finds room.
const KVSSD_CAPACITY_FACTOR: u64 = 4;

/// The stores compared, in their default order.
pub const STORE_NAMES: [&str; 3] = ["kvssd", "rocksdb", "fjall"];

/// When a write is made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// No sync per write: each store's default, durable only when it decides to sync.
    None,
    /// Writes unsynced, then the client threads share syncs: a write returns once a sync that
    /// began after it completed has finished ([`GroupCommit`]).
    Group,
    /// Every write synced before it returns.
    Every,
}

impl SyncMode {
    /// The mode named on the command line.
    pub fn parse(name: &str) -> Option<SyncMode> {
        match name {
            "none" => Some(SyncMode::None),
            "group" => Some(SyncMode::Group),
            "every" => Some(SyncMode::Every),
            _ => None,
        }
    }

    /// The command line's name.
    pub fn name(self) -> &'static str {
        match self {
            SyncMode::None => "none",
            SyncMode::Group => "group",
            SyncMode::Every => "every",
        }
    }
}

/// What `--sync` means for one store, in words, for the output.
pub fn sync_mapping(store: &str, mode: SyncMode) -> &'static str {
    match (store, mode) {
        ("kvssd", SyncMode::None) => {
            "write-ahead log SyncPolicy::None: log pages written when full, never synced per write"
        }
        ("kvssd", SyncMode::Group) => {
            "SyncPolicy::None per write; the group's leader calls Device::sync (log page programmed and fdatasync'ed)"
        }
        ("kvssd", SyncMode::Every) => {
            "write-ahead log SyncPolicy::EveryCommand: each store's record programmed and fdatasync'ed before it returns"
        }
        ("rocksdb", SyncMode::None) => "WriteOptions sync=false (WAL in the page cache, no fsync)",
        ("rocksdb", SyncMode::Group) => {
            "WriteOptions sync=false per write; the group's leader calls FlushWAL(sync=true)"
        }
        ("rocksdb", SyncMode::Every) => {
            "WriteOptions sync=true (RocksDB's own write groups may share one WAL sync)"
        }
        ("fjall", SyncMode::None) => {
            "insert only (journal written to the OS, no fsync; fjall's default)"
        }
        ("fjall", SyncMode::Group) => {
            "insert per write; the group's leader calls Database::persist(PersistMode::SyncData)"
        }
        ("fjall", SyncMode::Every) => "insert, then Database::persist(PersistMode::SyncData)",
        _ => "unknown store",
    }
}

/// A store's error, as text (each library has its own error type).
pub type StoreResult<T> = Result<T, String>;

/// What every store offers the workloads. Implementations are shared by the client threads.
pub trait Store: Send + Sync {
    /// Writes `value` under `key`; with [`SyncMode::Every`], durable on return.
    fn put(&self, key: &[u8], value: &[u8]) -> StoreResult<()>;
    /// The value of `key`, if any.
    fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>>;
    /// Up to `count` pairs with keys `>= start`, in key order, into `pairs` (cleared first).
    fn scan(
        &self,
        start: &[u8],
        count: usize,
        pairs: &mut Vec<(Vec<u8>, Vec<u8>)>,
    ) -> StoreResult<()>;
    /// Makes every write that has returned durable.
    fn sync(&self) -> StoreResult<()>;
    /// Settings worth printing beside the figures.
    fn settings(&self) -> String;
    /// Closes the store cleanly.
    fn close(self: Box<Self>) -> StoreResult<()>;
}

/// Opens store `name` fresh in `directory`.
pub fn open(
    name: &str,
    directory: &Path,
    mode: SyncMode,
    cache_bytes: u64,
    written_bytes_max: u64,
) -> StoreResult<Box<dyn Store>> {
    std::fs::create_dir_all(directory)
        .map_err(|error| format!("{}: {error}", directory.display()))?;
    match name {
        "kvssd" => Ok(Box::new(Kvssd::open(
            directory,
            mode,
            cache_bytes,
            written_bytes_max,
        )?)),
        "rocksdb" => Ok(Box::new(Rocks::open(directory, mode, cache_bytes)?)),
        "fjall" => Ok(Box::new(Fjall::open(directory, mode, cache_bytes)?)),
        other => Err(format!(
            "unknown store {other} (stores: kvssd, rocksdb, fjall)"
        )),
    }
}

/// kvssd on a file image: one `pink` namespace under a write-ahead log, timing off (the file's
/// own speed).
struct Kvssd {
    device: Device,
    namespace: NamespaceId,
    settings: String,
}

impl Kvssd {
    fn open(
        directory: &Path,
        mode: SyncMode,
        cache_bytes: u64,
        written_bytes_max: u64,
    ) -> StoreResult<Kvssd> {
        let mut profile = Profile::pink_with_blocks(KVSSD_BLOCKS_PER_DIE_MIN);
        let block_bytes = profile.geometry.block_bytes();
        let dies =
            profile.geometry.capacity_bytes() / block_bytes / u64::from(KVSSD_BLOCKS_PER_DIE_MIN);
        let blocks_needed =
            (written_bytes_max * KVSSD_CAPACITY_FACTOR).div_ceil(block_bytes * dies);
        let blocks_per_die = u32::try_from(blocks_needed)
            .unwrap_or(u32::MAX)
            .max(KVSSD_BLOCKS_PER_DIE_MIN);
        profile = Profile::pink_with_blocks(blocks_per_die);
        let geometry = profile.geometry;
        // The file-image default is a host's share (a sixteenth of the card, at most 256 MiB);
        // the comparison gives kvssd the same DRAM the other stores get as block cache, if that
        // is more: its index pins what it can, its cache of index pages takes the rest.
        let default_budget = DeviceConfig::file_image_dram_default_bytes(&geometry);
        let mut config = DeviceConfig::for_file_image_with_dram(
            &geometry,
            Some(default_budget.max(cache_bytes)),
        )
        .map_err(|error| format!("kvssd: {error}"))?;
        config.durability = Durability::WriteAheadLog(match mode {
            SyncMode::Every => SyncPolicy::EveryCommand,
            SyncMode::None | SyncMode::Group => SyncPolicy::None,
        });
        let settings = format!(
            "preset pink, card {} GiB ({blocks_per_die} blocks per die), DRAM budget {} MiB (file-image default {} MiB; the index page cache takes what pinning leaves of it), timing off",
            geometry.capacity_bytes() >> 30,
            config.engine.dram_budget_bytes >> 20,
            default_budget >> 20,
        );
        let path = directory.join("kvssd.img");
        let device = Device::create(&path, geometry, None, config)
            .map_err(|error| format!("kvssd: {error}"))?;
        let namespace = device
            .create_namespace(NamespaceSpec::new(Preset::Pink))
            .map_err(|error| format!("kvssd: {error}"))?;
        Ok(Kvssd {
            device,
            namespace,
            settings,
        })
    }
}

impl Store for Kvssd {
    fn put(&self, key: &[u8], value: &[u8]) -> StoreResult<()> {
        self.device
            .store(0, self.namespace, key, value, StoreMode::Upsert)
            .map(drop)
            .map_err(|error| format!("kvssd store: {error}"))
    }

    fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        self.device
            .retrieve(0, self.namespace, key, None)
            .map(|(found, _)| found.map(|retrieved| retrieved.value))
            .map_err(|error| format!("kvssd retrieve: {error}"))
    }

    fn scan(
        &self,
        start: &[u8],
        count: usize,
        pairs: &mut Vec<(Vec<u8>, Vec<u8>)>,
    ) -> StoreResult<()> {
        let (found, _) = self
            .device
            .scan(
                0,
                self.namespace,
                start,
                count.min(kvssd_device::SCAN_PAIRS_MAX),
            )
            .map_err(|error| format!("kvssd scan: {error}"))?;
        *pairs = found;
        Ok(())
    }

    fn sync(&self) -> StoreResult<()> {
        self.device
            .sync(0)
            .map(drop)
            .map_err(|error| format!("kvssd sync: {error}"))
    }

    fn settings(&self) -> String {
        self.settings.clone()
    }

    fn close(self: Box<Self>) -> StoreResult<()> {
        self.device
            .close(0)
            .map(drop)
            .map_err(|error| format!("kvssd close: {error}"))
    }
}

/// RocksDB (the system's library): defaults but for a block cache of `--cache-mib` and a 10-bit
/// Bloom filter (fjall and kvssd's PinK preset avoid most needless flash reads on a miss too).
struct Rocks {
    db: rocksdb::DB,
    write: rocksdb::WriteOptions,
    settings: String,
}

impl Rocks {
    fn open(directory: &Path, mode: SyncMode, cache_bytes: u64) -> StoreResult<Rocks> {
        let cache = rocksdb::Cache::new_lru_cache(cache_bytes as usize)
            .map_err(|error| format!("rocksdb: {error}"))?;
        let mut table = rocksdb::BlockBasedOptions::default();
        table.set_block_cache(&cache);
        table.set_bloom_filter(10.0, false);
        let mut options = rocksdb::Options::default();
        options.create_if_missing(true);
        options.set_block_based_table_factory(&table);
        let db = rocksdb::DB::open(&options, directory.join("rocksdb"))
            .map_err(|error| format!("rocksdb: {error}"))?;
        let mut write = rocksdb::WriteOptions::default();
        write.set_sync(mode == SyncMode::Every);
        let settings = format!(
            "defaults (compression, 64 MiB write buffer, 2 background jobs) with an LRU block cache of {} MiB and a 10 bits/key Bloom filter",
            cache_bytes >> 20
        );
        Ok(Rocks {
            db,
            write,
            settings,
        })
    }
}

impl Store for Rocks {
    fn put(&self, key: &[u8], value: &[u8]) -> StoreResult<()> {
        self.db
            .put_opt(key, value, &self.write)
            .map_err(|error| format!("rocksdb put: {error}"))
    }

    fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        self.db
            .get_pinned(key)
            .map(|found| found.map(|value| value.to_vec()))
            .map_err(|error| format!("rocksdb get: {error}"))
    }

    fn scan(
        &self,
        start: &[u8],
        count: usize,
        pairs: &mut Vec<(Vec<u8>, Vec<u8>)>,
    ) -> StoreResult<()> {
        pairs.clear();
        let mut iterator = self.db.raw_iterator();
        iterator.seek(start);
        while iterator.valid() && pairs.len() < count {
            if let (Some(key), Some(value)) = (iterator.key(), iterator.value()) {
                pairs.push((key.to_vec(), value.to_vec()));
            }
            iterator.next();
        }
        iterator
            .status()
            .map_err(|error| format!("rocksdb scan: {error}"))
    }

    fn sync(&self) -> StoreResult<()> {
        self.db
            .flush_wal(true)
            .map_err(|error| format!("rocksdb sync: {error}"))
    }

    fn settings(&self) -> String {
        self.settings.clone()
    }

    fn close(self: Box<Self>) -> StoreResult<()> {
        drop(self.db);
        Ok(())
    }
}

/// fjall: defaults but for a cache of `--cache-mib`.
struct Fjall {
    database: fjall::Database,
    keyspace: fjall::Keyspace,
    every: bool,
    settings: String,
}

impl Fjall {
    fn open(directory: &Path, mode: SyncMode, cache_bytes: u64) -> StoreResult<Fjall> {
        let database = fjall::Database::builder(directory.join("fjall"))
            .cache_size(cache_bytes)
            .open()
            .map_err(|error| format!("fjall: {error}"))?;
        let keyspace = database
            .keyspace("ycsb", fjall::KeyspaceCreateOptions::default)
            .map_err(|error| format!("fjall: {error}"))?;
        let settings = format!("defaults with a cache of {} MiB", cache_bytes >> 20);
        Ok(Fjall {
            database,
            keyspace,
            every: mode == SyncMode::Every,
            settings,
        })
    }
}

impl Store for Fjall {
    fn put(&self, key: &[u8], value: &[u8]) -> StoreResult<()> {
        self.keyspace
            .insert(key, value)
            .map_err(|error| format!("fjall insert: {error}"))?;
        if self.every {
            self.sync()?;
        }
        Ok(())
    }

    fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        self.keyspace
            .get(key)
            .map(|found| found.map(|value| value.to_vec()))
            .map_err(|error| format!("fjall get: {error}"))
    }

    fn scan(
        &self,
        start: &[u8],
        count: usize,
        pairs: &mut Vec<(Vec<u8>, Vec<u8>)>,
    ) -> StoreResult<()> {
        pairs.clear();
        for guard in self.keyspace.range(start..).take(count) {
            let (key, value) = guard
                .into_inner()
                .map_err(|error| format!("fjall scan: {error}"))?;
            pairs.push((key.to_vec(), value.to_vec()));
        }
        Ok(())
    }

    fn sync(&self) -> StoreResult<()> {
        self.database
            .persist(fjall::PersistMode::SyncData)
            .map_err(|error| format!("fjall sync: {error}"))
    }

    fn settings(&self) -> String {
        self.settings.clone()
    }

    fn close(self: Box<Self>) -> StoreResult<()> {
        let Fjall {
            database, keyspace, ..
        } = *self;
        drop(keyspace);
        drop(database);
        Ok(())
    }
}

/// Group commit shared by the client threads, the same for every store: a writer takes a ticket
/// once its write has returned, then waits until a sync that began after that has finished. The
/// first writer to find no sync running leads the next one, for every ticket taken so far.
#[derive(Default)]
pub struct GroupCommit {
    state: Mutex<GroupState>,
    finished: Condvar,
}

#[derive(Default)]
struct GroupState {
    tickets: u64,
    durable: u64,
    syncing: bool,
    syncs: u64,
}

impl GroupCommit {
    /// Makes the write that has just returned durable, sharing the sync with other writers.
    pub fn commit(&self, store: &dyn Store) -> StoreResult<()> {
        let mut state = self.lock()?;
        state.tickets += 1;
        let ticket = state.tickets;
        loop {
            if state.durable >= ticket {
                return Ok(());
            }
            if !state.syncing {
                state.syncing = true;
                let covered = state.tickets;
                drop(state);
                let result = store.sync();
                state = self.lock()?;
                state.syncing = false;
                state.syncs += 1;
                if result.is_ok() {
                    state.durable = state.durable.max(covered);
                }
                self.finished.notify_all();
                result?;
                continue;
            }
            state = self
                .finished
                .wait(state)
                .map_err(|_| "group commit: a writer panicked".to_string())?;
        }
    }

    fn lock(&self) -> StoreResult<std::sync::MutexGuard<'_, GroupState>> {
        self.state
            .lock()
            .map_err(|_| "group commit: a writer panicked".to_string())
    }

    /// Syncs done so far.
    pub fn syncs(&self) -> u64 {
        self.state.lock().map(|state| state.syncs).unwrap_or(0)
    }
}
