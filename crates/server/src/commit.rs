//! When a reply may be sent: the server's sync policies, and group commit across connections.
//!
//! Under [`SyncMode::Group`] the device runs its log with [`SyncPolicy::None`] (records gather in
//! the log page) and the server decides when to sync. Before a connection sends replies it notes
//! the newest log record written ([`Device::logged_sequence`]): every write it applied, and every
//! write any of its reads could have seen, is at most that record, because a write is logged
//! before it is applied. It then waits until that record is durable. The first waiter finding no
//! sync under way becomes the leader: it syncs the device's log (one page program and one
//! `fdatasync` for every record logged so far) and wakes everyone the sync covered. Writes that
//! arrive while a sync runs gather for the next one, so under load many clients' writes share each
//! sync, while a lone client waits for exactly one.
//!
//! Reads wait too (only while a write they may have seen is not yet durable), as Redis under
//! `appendfsync always` holds every reply until its fsync: no reply shows a value a crash can
//! still take back.

use std::sync::{Condvar, Mutex};

use kvssd_device::{Device, DeviceError, SyncPolicy};

/// When a write is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// Every write command syncs the log before it returns (the device's own per-command sync).
    Every,
    /// Writes are answered once a sync shared across connections has made them durable.
    Group,
    /// Writes are answered at once; the log is programmed when its page fills (and at shutdown).
    None,
}

impl SyncMode {
    /// Names on the command line.
    pub const NAMES: [&'static str; 3] = ["every", "group", "none"];

    /// The mode named `name`.
    pub fn by_name(name: &str) -> Option<SyncMode> {
        match name {
            "every" => Some(SyncMode::Every),
            "group" => Some(SyncMode::Group),
            "none" => Some(SyncMode::None),
            _ => None,
        }
    }

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            SyncMode::Every => "every",
            SyncMode::Group => "group",
            SyncMode::None => "none",
        }
    }

    /// The policy the device's log runs under for this mode.
    pub fn device_policy(self) -> SyncPolicy {
        match self {
            SyncMode::Every => SyncPolicy::EveryCommand,
            SyncMode::Group | SyncMode::None => SyncPolicy::None,
        }
    }
}

#[derive(Default)]
struct State {
    /// Every log record up to this one is durable (as far as this server's syncs know).
    durable: Option<u64>,
    /// A leader is syncing.
    syncing: bool,
    /// Syncs done (each covers one group).
    syncs: u64,
    /// A sync failed: nothing newer can be answered as durable.
    failed: Option<String>,
}

/// Group commit across connections.
pub struct GroupCommit {
    mode: SyncMode,
    state: Mutex<State>,
    done: Condvar,
}

impl GroupCommit {
    /// Group commit for a mode (a pass-through for `every` and `none`).
    pub fn new(mode: SyncMode) -> GroupCommit {
        GroupCommit {
            mode,
            state: Mutex::new(State::default()),
            done: Condvar::new(),
        }
    }

    /// Syncs done so far (group mode; zero otherwise).
    pub fn syncs(&self) -> u64 {
        self.state.lock().map_or(0, |state| state.syncs)
    }

    /// Returns once every write this connection applied or could have read before the call is
    /// durable (at once unless the mode is `group`). An error means they may not be: the caller
    /// must not send the replies.
    pub fn wait_durable(&self, device: &Device) -> Result<(), String> {
        if self.mode != SyncMode::Group {
            return Ok(());
        }
        let Some(needed) = device
            .logged_sequence()
            .map_err(|error| sync_failure(&error))?
        else {
            return Ok(());
        };
        let mut state = self.state.lock().map_err(|_| poisoned())?;
        loop {
            if let Some(failed) = &state.failed {
                return Err(failed.clone());
            }
            if state.durable.is_some_and(|durable| durable >= needed) {
                return Ok(());
            }
            if state.syncing {
                state = self.done.wait(state).map_err(|_| poisoned())?;
                continue;
            }
            // Lead a sync: it makes every record logged so far durable, ours among them.
            state.syncing = true;
            drop(state);
            let synced = device.sync(0).and_then(|_| device.durable_sequence());
            state = self.state.lock().map_err(|_| poisoned())?;
            state.syncing = false;
            match synced {
                Ok(durable) => {
                    state.durable = state.durable.max(durable);
                    state.syncs += 1;
                }
                Err(error) => state.failed = Some(sync_failure(&error)),
            }
            self.done.notify_all();
        }
    }
}

fn poisoned() -> String {
    "a thread panicked while syncing the log".to_string()
}

fn sync_failure(error: &DeviceError) -> String {
    format!("the log could not be synced ({error}); no later reply is sent")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvssd_device::{DeviceConfig, Durability, NamespaceSpec, PresetKind, StoreMode};
    use kvssd_flash::{Flash, Profile};
    use std::sync::Arc;

    fn device() -> (Device, kvssd_device::NamespaceId) {
        let profile = Profile::test_min();
        let flash = Flash::new(profile.geometry, None).expect("flash");
        let mut config = DeviceConfig::test_min();
        config.durability = Durability::WriteAheadLog(SyncMode::Group.device_policy());
        let device = Device::open(flash, config).expect("device");
        let namespace = device
            .create_namespace(NamespaceSpec::new(
                "pink".parse::<PresetKind>().expect("pink"),
            ))
            .expect("namespace");
        (device, namespace)
    }

    #[test]
    fn commit_group_makes_every_waiter_durable_and_shares_syncs() {
        let (device, namespace) = device();
        let shared = Arc::new((device, GroupCommit::new(SyncMode::Group)));
        let writers_count = 8u64;
        let writes_each = 40u64;
        let writers: Vec<_> = (0..writers_count)
            .map(|writer| {
                let shared = Arc::clone(&shared);
                std::thread::spawn(move || {
                    let (device, commit) = &*shared;
                    for index in 0..writes_each {
                        let key = format!("w{writer}:{index}");
                        device
                            .store(0, namespace, key.as_bytes(), b"v", StoreMode::Upsert)
                            .expect("store");
                        let logged = device.logged_sequence().expect("logged");
                        commit.wait_durable(device).expect("durable");
                        // Pair assertion: what the wait promised, the device confirms.
                        let durable = device.durable_sequence().expect("durable");
                        assert!(logged.is_some() && durable >= logged);
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().expect("writer");
        }
        let (device, commit) = &*shared;
        let syncs = commit.syncs();
        assert!(syncs >= 1);
        assert!(
            syncs <= writers_count * writes_each,
            "{syncs} syncs for {} writes",
            writers_count * writes_each
        );
        // Nothing is left to sync: the last waiter's sync covered every record.
        assert_eq!(
            device.durable_sequence().expect("durable"),
            device.logged_sequence().expect("logged")
        );
    }

    #[test]
    fn commit_every_and_none_never_wait() {
        let (device, namespace) = device();
        device
            .store(0, namespace, b"k", b"v", StoreMode::Upsert)
            .expect("store");
        for mode in [SyncMode::Every, SyncMode::None] {
            let commit = GroupCommit::new(mode);
            commit.wait_durable(&device).expect("no wait");
            assert_eq!(commit.syncs(), 0);
        }
        assert_eq!(SyncMode::by_name("group"), Some(SyncMode::Group));
        assert!(SyncMode::NAMES
            .iter()
            .all(|name| SyncMode::by_name(name).map(SyncMode::name) == Some(*name)));
    }
}
