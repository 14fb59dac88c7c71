//! SCAN's cursors: each names an iterator open on a snapshot of one namespace. The table has a
//! cap and an idle expiry, because a snapshot holds blocks GC would otherwise collect: a client
//! that abandons a scan (or a flood of clients starting scans) must not hold GC up for long.
//! When the table is full the least recently used cursor is closed to make room; a cursor idle
//! for longer than the expiry is closed by the next SCAN or by the server's periodic sweep. A
//! closed cursor's next SCAN is answered with an error telling the client to start again.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kvssd_device::{Device, IteratorId, NamespaceId};

/// One open scan.
#[derive(Debug)]
pub struct Cursor {
    /// The device iterator.
    pub iterator: IteratorId,
    /// The namespace it reads.
    pub namespace: NamespaceId,
    /// Keys the iterator returned beyond what the last SCAN's COUNT took (at most one
    /// iterator batch).
    pub buffered: VecDeque<Vec<u8>>,
    /// The iterator has returned its last key.
    pub end: bool,
    last_used: Instant,
}

struct Table {
    open: BTreeMap<u64, Cursor>,
    next: u64,
}

/// The server's cursor table.
pub struct Cursors {
    table: Mutex<Table>,
    cursors_max: usize,
    idle_max: Duration,
}

impl Cursors {
    /// A table of at most `cursors_max` cursors, each closed after `idle_max` unused.
    pub fn new(cursors_max: usize, idle_max: Duration) -> Cursors {
        Cursors {
            table: Mutex::new(Table {
                open: BTreeMap::new(),
                next: 1,
            }),
            cursors_max: cursors_max.max(1),
            idle_max,
        }
    }

    /// Most cursors at once.
    pub fn cursors_max(&self) -> usize {
        self.cursors_max
    }

    /// Cursors open now.
    pub fn open(&self) -> usize {
        self.table.lock().map_or(0, |table| table.open.len())
    }

    /// Makes room for one more cursor: closes the expired ones, then while the table is full the
    /// least recently used.
    pub fn make_room(&self, device: &Device) {
        self.sweep(device);
        let Ok(mut table) = self.table.lock() else {
            return;
        };
        while table.open.len() >= self.cursors_max {
            let oldest = table
                .open
                .iter()
                .min_by_key(|(_, cursor)| cursor.last_used)
                .map(|(&id, _)| id);
            let Some(id) = oldest else { break };
            if let Some(cursor) = table.open.remove(&id) {
                let _ = device.iter_close(cursor.iterator);
            }
        }
    }

    /// Registers an open iterator; returns its cursor number (never 0, which starts a scan).
    pub fn insert(&self, iterator: IteratorId, namespace: NamespaceId) -> Option<u64> {
        let mut table = self.table.lock().ok()?;
        let id = table.next;
        table.next += 1;
        table.open.insert(
            id,
            Cursor {
                iterator,
                namespace,
                buffered: VecDeque::new(),
                end: false,
                last_used: Instant::now(),
            },
        );
        Some(id)
    }

    /// Takes a cursor out of the table while a SCAN uses it (so no sweep closes it meanwhile).
    pub fn take(&self, id: u64) -> Option<Cursor> {
        self.table.lock().ok()?.open.remove(&id)
    }

    /// Puts a cursor back after a SCAN that did not finish it.
    pub fn put_back(&self, id: u64, mut cursor: Cursor) {
        cursor.last_used = Instant::now();
        if let Ok(mut table) = self.table.lock() {
            table.open.insert(id, cursor);
        }
    }

    /// Closes every cursor idle longer than the expiry.
    pub fn sweep(&self, device: &Device) {
        let Ok(mut table) = self.table.lock() else {
            return;
        };
        let now = Instant::now();
        let expired: Vec<u64> = table
            .open
            .iter()
            .filter(|(_, cursor)| now.duration_since(cursor.last_used) > self.idle_max)
            .map(|(&id, _)| id)
            .collect();
        for id in expired {
            if let Some(cursor) = table.open.remove(&id) {
                let _ = device.iter_close(cursor.iterator);
            }
        }
    }

    /// Closes every cursor (at shutdown).
    pub fn close_all(&self, device: &Device) {
        let Ok(mut table) = self.table.lock() else {
            return;
        };
        for (_, cursor) in std::mem::take(&mut table.open) {
            let _ = device.iter_close(cursor.iterator);
        }
    }
}
