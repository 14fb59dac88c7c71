//! The server process: opening (or formatting) the device, the listener, a thread per
//! connection, the periodic sweep of idle SCAN cursors, and shutdown.
//!
//! Shutdown (SIGTERM or SIGINT): the listener stops accepting; each connection finishes the
//! requests it has received, sends their replies (writes made durable first, as its sync mode
//! says) and closes; then the device is closed, which writes a checkpoint (so the next start
//! replays no log) and syncs the file; the process exits 0. A second signal during that exits at
//! once with code 1 (recovery at the next start then replays the log).

use std::fmt;
use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kvssd_device::{Device, DeviceConfig, Durability, NamespaceId, NamespaceSpec, PresetKind};
use kvssd_flash::{Flash, Geometry, Profile};

use crate::commit::{GroupCommit, SyncMode};
use crate::cursors::Cursors;
use crate::{SCAN_CURSORS_MAX, SCAN_CURSOR_IDLE_SECS};

/// How often idle threads look at the shutdown flag (and the accept loop polls).
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// The namespace database 0 is (`kvssd format` creates it); database n is namespace n + 1.
pub(crate) const FIRST_NAMESPACE: u32 = 1;

/// Where the device comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A file image (formatted first if it does not exist, which needs a profile).
    Image {
        /// The image file (or block device).
        path: PathBuf,
        /// Profile to format with, if the file does not exist.
        profile: Option<Profile>,
        /// Blocks per die to format with, overriding the profile's.
        blocks_per_die: Option<u32>,
    },
    /// A simulated device in memory: starts empty, loses everything at exit.
    Simulated {
        /// Its profile.
        profile: Profile,
        /// Blocks per die, overriding the profile's.
        blocks_per_die: Option<u32>,
    },
}

/// How the server runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The device.
    pub source: Source,
    /// Address to listen on.
    pub bind: IpAddr,
    /// Port (0: any free port; the one chosen is printed).
    pub port: u16,
    /// Password clients must give with AUTH (required when `bind` is not loopback).
    pub password: Option<String>,
    /// Connections served at once; more are answered with an error and closed.
    pub clients_max: usize,
    /// Bytes a connection may buffer of requests not yet complete (also the longest argument).
    pub client_buffer_bytes: usize,
    /// When writes are answered.
    pub sync: SyncMode,
    /// Databases (namespaces 1 to N); missing ones are created with `preset` at start.
    pub databases: u32,
    /// Preset of the namespaces created at start.
    pub preset: PresetKind,
    /// Connections silent for this long are closed (`None`: never).
    pub idle_timeout: Option<Duration>,
    /// Indexing DRAM per namespace (`None`: the file image's default,
    /// `DeviceConfig::file_image_dram_default_bytes`).
    pub dram_budget_bytes: Option<u64>,
}

/// Why the server could not start or stop cleanly.
#[derive(Debug)]
pub enum ServerError {
    /// The configuration is refused (exit code 2).
    Config(String),
    /// Opening, serving or closing failed (exit code 1).
    Run(String),
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerError::Config(message) | ServerError::Run(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for ServerError {}

/// What every connection shares.
pub(crate) struct Shared {
    pub(crate) device: Device,
    pub(crate) commit: GroupCommit,
    pub(crate) cursors: Cursors,
    pub(crate) config: Config,
    pub(crate) geometry: Geometry,
    pub(crate) value_bytes_max: usize,
    pub(crate) shutdown: Arc<AtomicBool>,
    pub(crate) clients: AtomicUsize,
    pub(crate) connections_total: AtomicU64,
    pub(crate) connections_rejected: AtomicU64,
    pub(crate) commands_total: AtomicU64,
    pub(crate) protocol_errors: AtomicU64,
    pub(crate) next_client_id: AtomicU64,
    pub(crate) started: Instant,
    pub(crate) local: SocketAddr,
}

impl Shared {
    /// The namespace of database `db`.
    pub(crate) fn namespace_of(&self, db: u32) -> NamespaceId {
        NamespaceId(FIRST_NAMESPACE + db)
    }
}

fn checked_geometry(
    profile: &Profile,
    blocks_per_die: Option<u32>,
) -> Result<Geometry, ServerError> {
    let mut geometry = profile.geometry;
    if let Some(blocks_per_die) = blocks_per_die {
        geometry.blocks_per_die = blocks_per_die;
        geometry
            .validate()
            .map_err(|error| ServerError::Config(error.to_string()))?;
    }
    Ok(geometry)
}

/// A file image's device configuration with the DRAM budget asked for (refused if out of range).
fn file_config(
    geometry: &Geometry,
    dram_budget_bytes: Option<u64>,
) -> Result<DeviceConfig, ServerError> {
    DeviceConfig::for_file_image_with_dram(geometry, dram_budget_bytes)
        .map_err(|error| ServerError::Config(error.to_string()))
}

/// Opens (or formats) the device; returns it with its geometry.
fn open_device(config: &Config) -> Result<(Device, Geometry, String), ServerError> {
    let run = |what: &str, error: &dyn fmt::Display| ServerError::Run(format!("{what}: {error}"));
    match &config.source {
        Source::Simulated {
            profile,
            blocks_per_die,
        } => {
            let geometry = checked_geometry(profile, *blocks_per_die)?;
            let mut device_config = file_config(&geometry, config.dram_budget_bytes)?;
            device_config.durability = Durability::Volatile;
            device_config.iterators_open_max = SCAN_CURSORS_MAX + 8;
            let flash =
                Flash::new(geometry, None).map_err(|error| run("simulated flash", &error))?;
            let device = Device::open(flash, device_config)
                .map_err(|error| run("simulated device", &error))?;
            Ok((
                device,
                geometry,
                format!("simulated {} [{geometry}]", profile.name),
            ))
        }
        Source::Image {
            path,
            profile,
            blocks_per_die,
        } => {
            let shown = path.display().to_string();
            let exists = std::fs::metadata(path).is_ok();
            let geometry = if exists {
                Flash::probe(path).map_err(|error| run(&shown, &error))?
            } else {
                let Some(profile) = profile else {
                    return Err(ServerError::Config(format!(
                        "{shown} does not exist; give --profile to format it"
                    )));
                };
                checked_geometry(profile, *blocks_per_die)?
            };
            let mut device_config = file_config(&geometry, config.dram_budget_bytes)?;
            device_config.durability = Durability::WriteAheadLog(config.sync.device_policy());
            device_config.iterators_open_max = SCAN_CURSORS_MAX + 8;
            let device = if exists {
                let device = Device::open_path(path, None, device_config)
                    .map_err(|error| run(&shown, &error))?;
                let recovered = device
                    .recovery_report()
                    .map_err(|error| run(&shown, &error))?;
                if recovered.is_none() {
                    let _ = device.into_flash();
                    return Err(ServerError::Run(format!(
                        "{shown}: not a kvssd device: no superblock copy found (format it first)"
                    )));
                }
                device
            } else {
                Device::create(path, geometry, None, device_config)
                    .map_err(|error| run(&shown, &error))?
            };
            Ok((device, geometry, format!("image {shown} [{geometry}]")))
        }
    }
}

/// Creates the namespaces of databases that do not exist yet, in order.
fn ensure_databases(device: &Device, config: &Config) -> Result<(), ServerError> {
    for db in 0..config.databases {
        let wanted = NamespaceId(FIRST_NAMESPACE + db);
        let exists = device
            .list_namespaces()
            .map_err(|error| ServerError::Run(error.to_string()))?
            .iter()
            .any(|info| info.id == wanted);
        if exists {
            continue;
        }
        let id = device
            .create_namespace(NamespaceSpec::new(config.preset))
            .map_err(|error| {
                ServerError::Run(format!("cannot create namespace {wanted}: {error}"))
            })?;
        if id != wanted {
            // Namespace ids are never reused: a deleted one leaves a gap no database can fill.
            return Err(ServerError::Run(format!(
                "database {db} should be namespace {wanted}, but the device gave {id} (a namespace was deleted); use fewer --databases"
            )));
        }
    }
    Ok(())
}

/// Runs the server until SIGTERM or SIGINT. Prints one line when it listens (`listening on
/// ADDRESS`), which is when clients may connect.
pub fn run(config: Config) -> Result<(), ServerError> {
    if !config.bind.is_loopback() && config.password.is_none() {
        return Err(ServerError::Config(format!(
            "binding {} reaches beyond this machine: give --password",
            config.bind
        )));
    }
    if config.databases == 0 {
        return Err(ServerError::Config("--databases must be at least 1".into()));
    }
    let shutdown = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        // The first signal asks for a clean stop; a second, while that stop is under way (say a
        // client is not reading its replies), ends the process at once with code 1, as an
        // operator pressing Ctrl-C twice expects. Nothing answered is lost either way.
        signal_hook::flag::register_conditional_shutdown(signal, 1, Arc::clone(&shutdown))
            .and_then(|_| signal_hook::flag::register(signal, Arc::clone(&shutdown)))
            .map_err(|error| ServerError::Run(format!("cannot handle signals: {error}")))?;
    }
    let (device, geometry, described) = open_device(&config)?;
    ensure_databases(&device, &config)?;
    let value_bytes_max = device
        .value_bytes_max()
        .map_err(|error| ServerError::Run(error.to_string()))?;
    let listener = TcpListener::bind((config.bind, config.port)).map_err(|error| {
        ServerError::Run(format!(
            "cannot listen on {}:{}: {error}",
            config.bind, config.port
        ))
    })?;
    let local = listener
        .local_addr()
        .map_err(|error| ServerError::Run(error.to_string()))?;
    listener
        .set_nonblocking(true)
        .map_err(|error| ServerError::Run(error.to_string()))?;
    let shared = Arc::new(Shared {
        device,
        commit: GroupCommit::new(config.sync),
        cursors: Cursors::new(SCAN_CURSORS_MAX, Duration::from_secs(SCAN_CURSOR_IDLE_SECS)),
        geometry,
        value_bytes_max,
        shutdown: Arc::clone(&shutdown),
        clients: AtomicUsize::new(0),
        connections_total: AtomicU64::new(0),
        connections_rejected: AtomicU64::new(0),
        commands_total: AtomicU64::new(0),
        protocol_errors: AtomicU64::new(0),
        next_client_id: AtomicU64::new(1),
        started: Instant::now(),
        local,
        config,
    });
    {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(
            stdout,
            "kvssd serve: {described}, sync {}, {} database(s); listening on {local}",
            shared.config.sync.name(),
            shared.config.databases
        );
        let _ = stdout.flush();
    }
    accept_loop(&shared, &listener);
    drop(listener);
    close(shared)
}

fn accept_loop(shared: &Arc<Shared>, listener: &TcpListener) {
    let mut threads: Vec<JoinHandle<()>> = Vec::new();
    let mut last_sweep = Instant::now();
    while !shared.shutdown.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                threads.retain(|thread| !thread.is_finished());
                shared.connections_total.fetch_add(1, Ordering::Relaxed);
                if shared.clients.load(Ordering::SeqCst) >= shared.config.clients_max {
                    shared.connections_rejected.fetch_add(1, Ordering::Relaxed);
                    crate::connection::refuse(stream, "ERR max number of clients reached");
                    continue;
                }
                shared.clients.fetch_add(1, Ordering::SeqCst);
                let for_thread = Arc::clone(shared);
                let spawned = std::thread::Builder::new()
                    .name("kvssd-client".into())
                    .spawn(move || {
                        crate::connection::serve(&for_thread, stream);
                        for_thread.clients.fetch_sub(1, Ordering::SeqCst);
                    });
                match spawned {
                    Ok(thread) => threads.push(thread),
                    Err(error) => {
                        shared.clients.fetch_sub(1, Ordering::SeqCst);
                        eprintln!("kvssd serve: cannot start a connection thread: {error}");
                    }
                }
            }
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(POLL_INTERVAL);
            }
            Err(error) => {
                eprintln!("kvssd serve: accept: {error}");
                std::thread::sleep(POLL_INTERVAL);
            }
        }
        if last_sweep.elapsed() >= Duration::from_secs(1) {
            shared.cursors.sweep(&shared.device);
            last_sweep = Instant::now();
        }
    }
    for thread in threads {
        let _ = thread.join();
    }
}

/// After every connection has finished: releases the cursors, syncs, checkpoints and closes.
fn close(shared: Arc<Shared>) -> Result<(), ServerError> {
    shared.cursors.close_all(&shared.device);
    let shared = Arc::into_inner(shared)
        .ok_or_else(|| ServerError::Run("a connection outlived shutdown".into()))?;
    let described = match &shared.config.source {
        Source::Image { path, .. } => path.display().to_string(),
        Source::Simulated { .. } => "simulated device".to_string(),
    };
    shared
        .device
        .sync(0)
        .and_then(|_| shared.device.close(0))
        .map_err(|error| ServerError::Run(format!("{described}: closing: {error}")))?;
    match shared.config.source {
        Source::Image { .. } => {
            eprintln!("kvssd serve: shut down cleanly ({described} checkpointed)");
        }
        Source::Simulated { .. } => {
            eprintln!("kvssd serve: shut down cleanly (the simulated device's contents are gone)");
        }
    }
    Ok(())
}
