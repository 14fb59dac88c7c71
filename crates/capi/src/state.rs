//! Open devices and key spaces, and the handles C programs hold for them.
//!
//! A handle is never a pointer to memory: it is a number from a counter that never repeats, cast
//! to the handle's pointer type, and looked up in a table. A handle that was closed, never
//! opened, or is garbage is therefore found missing and refused with the API's error code, never
//! followed.

use std::collections::{HashMap, HashSet};
use std::ffi::c_void;
use std::fs::File;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, RwLock};
use std::time::Instant;

use kvssd_device::{Device, DeviceConfig, DeviceError, Durability, NamespaceId, SyncPolicy};
use kvssd_flash::{Flash, SimTime};

use crate::clock::{wait_until, Clock, Latencies, Timing, SPIN_BELOW_CALLER};
use crate::errors::result_of;
use crate::ffi::{
    KvsResult, KVS_ERR_DEV_NOT_EXIST, KVS_ERR_DEV_NOT_OPENED, KVS_ERR_KS_NOT_OPEN,
    KVS_ERR_PARAM_INVALID, KVS_ERR_SYS_IO,
};
use crate::iterators::IteratorTable;
use crate::queue::AsyncQueue;
use crate::uri::{DeviceUri, Media};

/// Locks serialising read-modify-write commands (append, retrieve-and-delete, delete that reports
/// a missing key) against every other write of the same key, by hash of namespace and key.
const KEY_LOCK_STRIPES: usize = 64;

/// An open device.
pub struct OpenDevice {
    /// The device; `None` once closed.
    device: RwLock<Option<Device>>,
    /// The URI it was opened with.
    pub uri: String,
    /// How callers map onto simulated time.
    pub clock: Clock,
    /// Per-command latencies.
    pub latencies: Arc<Latencies>,
    /// The asynchronous machinery.
    pub queue: AsyncQueue,
    /// Capacity offered to key spaces, in bytes (the flash less over-provisioning).
    pub capacity_bytes: u64,
    /// The granularity records are packed in, in bytes.
    pub chunk_bytes: u32,
    /// Longest value the device takes.
    pub value_bytes_max: usize,
    /// Open iterators.
    pub iterators: Mutex<IteratorTable>,
    key_locks: Vec<Mutex<()>>,
    /// An advisory lock on the image file, held while the device is open, so that no second
    /// opener (in this process or another) writes the same image.
    _image_lock: Option<File>,
}

/// Why a device could not be opened: the API's code and a one-line reason.
pub type OpenFailure = (KvsResult, String);

fn lock_image(path: &std::path::Path) -> Result<File, OpenFailure> {
    use std::os::unix::io::AsRawFd;
    let file = File::open(path).map_err(|error| {
        (
            KVS_ERR_DEV_NOT_EXIST,
            format!("{}: {error}", path.display()),
        )
    })?;
    // SAFETY: flock on a descriptor this function owns; it touches no memory.
    let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if locked != 0 {
        return Err((
            KVS_ERR_SYS_IO,
            format!(
                "{}: the image is open already (in this or another process)",
                path.display()
            ),
        ));
    }
    Ok(file)
}

/// Device iterators beyond the API's 16, for the scans key-space counts and key-group deletes make.
const SPARE_ITERATORS: usize = 4;

/// A device's configuration: a file image's for the geometry, with `durability`, and room for
/// the API's iterators plus the library's own scans.
fn device_config(geometry: &kvssd_flash::Geometry, durability: Durability) -> DeviceConfig {
    let mut config = DeviceConfig::for_file_image(geometry);
    config.durability = durability;
    config.iterators_open_max = crate::ffi::KVS_MAX_ITERATE_HANDLE + SPARE_ITERATORS;
    config
}

fn device_failure(what: &str, error: DeviceError) -> OpenFailure {
    (KVS_ERR_SYS_IO, format!("{what}: {error}"))
}

impl OpenDevice {
    /// Opens (or, for a simulated card or a file asked to be created, makes) the device a URI
    /// names.
    pub fn open(uri_text: &str, uri: &DeviceUri) -> Result<OpenDevice, OpenFailure> {
        let (device, clock, image_lock) = match &uri.media {
            Media::File { path, create } => {
                let shown = path.display().to_string();
                let exists = path.exists();
                if !exists && !create {
                    return Err((
                        KVS_ERR_DEV_NOT_EXIST,
                        format!("{shown}: no such file (add ?create to format a new device there)"),
                    ));
                }
                if exists {
                    let image_lock = lock_image(path)?;
                    let geometry = Flash::probe(path)
                        .map_err(|error| (KVS_ERR_DEV_NOT_EXIST, format!("{shown}: {error}")))?;
                    let config = device_config(
                        &geometry,
                        Durability::WriteAheadLog(SyncPolicy::EveryCommand),
                    );
                    let device = Device::open_path(path, None, config)
                        .map_err(|error| device_failure(&shown, error))?;
                    let recovered = device
                        .recovery_report()
                        .map_err(|error| device_failure(&shown, error))?;
                    if recovered.is_none() {
                        // Opening formatted a blank array: the image never held a device. Leave it
                        // as found as far as possible.
                        let _ = device.into_flash();
                        return Err((
                            KVS_ERR_DEV_NOT_EXIST,
                            format!("{shown}: not a kvssd device: no superblock copy found"),
                        ));
                    }
                    (device, Clock::Untimed, Some(image_lock))
                } else {
                    let geometry = uri.profile.geometry;
                    let config = device_config(
                        &geometry,
                        Durability::WriteAheadLog(SyncPolicy::EveryCommand),
                    );
                    config
                        .space
                        .check(&geometry)
                        .map_err(|error| (KVS_ERR_PARAM_INVALID, format!("{shown}: {error}")))?;
                    let device = Device::create(path, geometry, None, config).map_err(|error| {
                        // Leave no half-made image behind.
                        let _ = std::fs::remove_file(path);
                        device_failure(&shown, error)
                    })?;
                    let image_lock = lock_image(path)?;
                    (device, Clock::Untimed, Some(image_lock))
                }
            }
            Media::Simulated { pacing } => {
                let geometry = uri.profile.geometry;
                let flash = Flash::new(geometry, Some(uri.profile.timing.clone()))
                    .map_err(|error| (KVS_ERR_SYS_IO, format!("{uri_text}: {error}")))?;
                // A simulated card keeps nothing across opens; it is configured as a file image
                // of the same geometry would be (PinK's DRAM budget), without a log.
                let config = device_config(&geometry, Durability::Volatile);
                config
                    .space
                    .check(&geometry)
                    .map_err(|error| (KVS_ERR_PARAM_INVALID, format!("{uri_text}: {error}")))?;
                let device =
                    Device::open(flash, config).map_err(|error| device_failure(uri_text, error))?;
                let clock = if *pacing {
                    Clock::Paced(Instant::now())
                } else {
                    Clock::Counter(AtomicU64::new(0))
                };
                (device, clock, None)
            }
        };
        let geometry = uri.profile.geometry;
        let geometry = match &uri.media {
            // A file's geometry is the image's, not the URI's.
            Media::File { path, .. } => Flash::probe(path).unwrap_or(geometry),
            Media::Simulated { .. } => geometry,
        };
        let config = DeviceConfig::for_file_image(&geometry);
        let over_provisioning = u64::from(config.space.over_provisioning_percent);
        let capacity_bytes = geometry.capacity_bytes() / 100 * (100 - over_provisioning);
        let value_bytes_max = device
            .value_bytes_max()
            .map_err(|error| device_failure(uri_text, error))?;
        let latencies = Arc::new(Latencies::default());
        let queue = AsyncQueue::start(uri.queue_depth, Arc::clone(&latencies))
            .map_err(|error| (KVS_ERR_SYS_IO, format!("cannot start threads: {error}")))?;
        Ok(OpenDevice {
            device: RwLock::new(Some(device)),
            uri: uri_text.to_string(),
            clock,
            latencies,
            queue,
            capacity_bytes,
            chunk_bytes: config.space.chunk_bytes,
            value_bytes_max,
            iterators: Mutex::new(IteratorTable::default()),
            key_locks: (0..KEY_LOCK_STRIPES).map(|_| Mutex::new(())).collect(),
            _image_lock: image_lock,
        })
    }

    /// Runs `work` on the device unless it is closed.
    pub fn with_device<R>(&self, work: impl FnOnce(&Device) -> R) -> Result<R, KvsResult> {
        let guard = self.device.read().map_err(|_| KVS_ERR_SYS_IO)?;
        match guard.as_ref() {
            Some(device) => Ok(work(device)),
            None => Err(KVS_ERR_DEV_NOT_OPENED),
        }
    }

    /// Runs one command at the device's simulated clock: `op` gets the device and the issue time
    /// and returns its result and completion time (a refused command takes no time).
    pub fn command<T>(
        &self,
        submitted: Instant,
        op: impl FnOnce(&Device, SimTime) -> (Result<T, KvsResult>, SimTime),
    ) -> (Result<T, KvsResult>, Timing) {
        let issued_at = self.clock.issue();
        let (result, done_at) = match self.with_device(|device| op(device, issued_at)) {
            Ok(ran) => ran,
            Err(code) => (Err(code), issued_at),
        };
        let deadline = self.clock.complete(done_at.max(issued_at));
        (
            result,
            Timing {
                submitted,
                issued_at,
                done_at: done_at.max(issued_at),
                deadline,
            },
        )
    }

    /// Ends a synchronous command: waits for its paced completion and records its latencies.
    pub fn finish_sync(&self, timing: &Timing) {
        if let Some(deadline) = timing.deadline {
            wait_until(deadline, SPIN_BELOW_CALLER);
        }
        timing.record_completion(&self.latencies);
    }

    /// The lock of a key's stripe.
    pub fn key_lock(&self, namespace: NamespaceId, key: &[u8]) -> MutexGuard<'_, ()> {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        namespace.0.hash(&mut hasher);
        key.hash(&mut hasher);
        let stripe = (hasher.finish() as usize) % self.key_locks.len();
        // A poisoned stripe only means a thread panicked while holding it; the unit it guards
        // holds no data, so the lock is still good.
        self.key_locks[stripe]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Waits for every asynchronous command, closes every iterator and closes the device (a
    /// file device writes a checkpoint, so the next open replays nothing).
    pub fn close(&self) -> Result<(), KvsResult> {
        self.queue.shut_down()?;
        let device = self.device.write().map_err(|_| KVS_ERR_SYS_IO)?.take();
        let Some(device) = device else {
            return Err(KVS_ERR_DEV_NOT_OPENED);
        };
        if let Ok(mut iterators) = self.iterators.lock() {
            iterators.close_all(&device);
        }
        device.close(0).map(drop).map_err(|error| result_of(&error))
    }
}

/// An open key space.
pub struct KeySpace {
    /// The device handle it was opened through.
    pub device_handle: usize,
    /// Its device.
    pub device: Arc<OpenDevice>,
    /// Its namespace.
    pub namespace: NamespaceId,
    /// Its name.
    pub name: String,
}

/// Every open device and key space.
#[derive(Default)]
pub struct Registry {
    devices: HashMap<usize, Arc<OpenDevice>>,
    key_spaces: HashMap<usize, Arc<KeySpace>>,
    uris: HashSet<String>,
    next_handle: usize,
}

/// Handles are multiples of this, so they look like aligned pointers and are never NULL.
const HANDLE_STEP: usize = 16;

static REGISTRY: LazyLock<RwLock<Registry>> = LazyLock::new(RwLock::default);

fn registry_read() -> Result<std::sync::RwLockReadGuard<'static, Registry>, KvsResult> {
    REGISTRY.read().map_err(|_| KVS_ERR_SYS_IO)
}

fn registry_write() -> Result<std::sync::RwLockWriteGuard<'static, Registry>, KvsResult> {
    REGISTRY.write().map_err(|_| KVS_ERR_SYS_IO)
}

impl Registry {
    fn next(&mut self) -> usize {
        self.next_handle += HANDLE_STEP;
        self.next_handle
    }
}

/// Whether a device with this URI is open.
pub fn uri_open(uri: &str) -> Result<bool, KvsResult> {
    Ok(registry_read()?.uris.contains(uri))
}

/// Registers an open device; returns its handle.
pub fn add_device(device: OpenDevice) -> Result<*mut c_void, KvsResult> {
    let mut registry = registry_write()?;
    let handle = registry.next();
    registry.uris.insert(device.uri.clone());
    registry.devices.insert(handle, Arc::new(device));
    Ok(handle as *mut c_void)
}

/// The open device behind a handle: NULL is `KVS_ERR_PARAM_INVALID`, anything else not open is
/// `missing`.
pub fn device(handle: *mut c_void, missing: KvsResult) -> Result<Arc<OpenDevice>, KvsResult> {
    if handle.is_null() {
        return Err(KVS_ERR_PARAM_INVALID);
    }
    registry_read()?
        .devices
        .get(&(handle as usize))
        .cloned()
        .ok_or(missing)
}

/// Unregisters a device and its key spaces; returns it.
pub fn remove_device(handle: *mut c_void) -> Result<Arc<OpenDevice>, KvsResult> {
    if handle.is_null() {
        return Err(KVS_ERR_PARAM_INVALID);
    }
    let mut registry = registry_write()?;
    let device = registry
        .devices
        .remove(&(handle as usize))
        .ok_or(KVS_ERR_DEV_NOT_OPENED)?;
    registry.uris.remove(&device.uri);
    registry
        .key_spaces
        .retain(|_, key_space| key_space.device_handle != handle as usize);
    Ok(device)
}

/// Registers an open key space unless one of its namespace is open on the device; returns its
/// handle.
pub fn add_key_space(key_space: KeySpace) -> Result<Option<*mut c_void>, KvsResult> {
    let mut registry = registry_write()?;
    let open = registry.key_spaces.values().any(|open| {
        open.device_handle == key_space.device_handle && open.namespace == key_space.namespace
    });
    if open {
        return Ok(None);
    }
    let handle = registry.next();
    registry.key_spaces.insert(handle, Arc::new(key_space));
    Ok(Some(handle as *mut c_void))
}

/// The open key space behind a handle: NULL is `KVS_ERR_PARAM_INVALID`, anything else not open
/// `KVS_ERR_KS_NOT_OPEN`.
pub fn key_space(handle: *mut c_void) -> Result<Arc<KeySpace>, KvsResult> {
    if handle.is_null() {
        return Err(KVS_ERR_PARAM_INVALID);
    }
    registry_read()?
        .key_spaces
        .get(&(handle as usize))
        .cloned()
        .ok_or(KVS_ERR_KS_NOT_OPEN)
}

/// Whether a namespace of a device is open as a key space.
pub fn key_space_open(device_handle: usize, namespace: NamespaceId) -> Result<bool, KvsResult> {
    Ok(registry_read()?
        .key_spaces
        .values()
        .any(|open| open.device_handle == device_handle && open.namespace == namespace))
}

/// Unregisters a key space by handle.
pub fn remove_key_space(handle: *mut c_void) -> Result<Arc<KeySpace>, KvsResult> {
    if handle.is_null() {
        return Err(KVS_ERR_PARAM_INVALID);
    }
    registry_write()?
        .key_spaces
        .remove(&(handle as usize))
        .ok_or(KVS_ERR_KS_NOT_OPEN)
}

/// Unregisters every key space of a device's namespace (it is being deleted); returns their
/// handles.
pub fn remove_key_spaces_of(
    device_handle: usize,
    namespace: NamespaceId,
) -> Result<Vec<usize>, KvsResult> {
    let mut registry = registry_write()?;
    let handles: Vec<usize> = registry
        .key_spaces
        .iter()
        .filter(|(_, open)| open.device_handle == device_handle && open.namespace == namespace)
        .map(|(&handle, _)| handle)
        .collect();
    for handle in &handles {
        registry.key_spaces.remove(handle);
    }
    Ok(handles)
}
