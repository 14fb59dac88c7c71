//! A transaction's writes: update, insert and delete take the key's exclusive lock, learn what
//! they must about the key, and stage a private copy that only a commit writes out.

use kvssd_flash::SimTime;

use super::{check_key, Found, Host, Private, Write};
use crate::error::{HostError, Result};
use crate::locks::LockMode;
use crate::types::{Access, TableId, TxnId};

impl Host {
    /// Takes the exclusive lock on a key and learns whether it exists (private copy, cache or
    /// device).
    fn write_access(
        &mut self,
        at: SimTime,
        txn: TxnId,
        table: TableId,
        key: &[u8],
        call: &'static str,
        needs_existence: bool,
    ) -> Result<Result<Found, Access<()>>> {
        self.active(txn, call)?;
        check_key(key)?;
        self.table(table)?;
        if let Some(wait) = self.lock(at, txn, table, key, LockMode::Exclusive)? {
            return Ok(Err(wait));
        }
        let private = self.xcb(txn)?.private.get(&(table, key.to_vec())).cloned();
        if let Some(private) = &private {
            return Ok(Ok((
                Some(private.clone()),
                Some(private.value.is_some()),
                at,
            )));
        }
        if self.cache.peek(table, key).is_some() {
            return Ok(Ok((None, Some(true), at)));
        }
        if !needs_existence {
            return Ok(Ok((None, None, at)));
        }
        let (value, done) = self.current(at, table, key)?;
        Ok(Ok((None, Some(value.is_some()), done)))
    }

    /// Replaces the value of an existing key (the change stays private until commit).
    pub fn update(
        &mut self,
        at: SimTime,
        txn: TxnId,
        table: TableId,
        key: &[u8],
        value: &[u8],
    ) -> Result<Access<()>> {
        self.check_value(table, value)?;
        let (private, exists, done) =
            match self.write_access(at, txn, table, key, "update", true)? {
                Ok(found) => found,
                Err(wait) => return Ok(wait),
            };
        if exists != Some(true) {
            return Err(HostError::KeyMissing(table));
        }
        let write = match private.and_then(|private| private.write) {
            Some(Write::InsertOnly) => Write::InsertOnly,
            _ => Write::Upsert,
        };
        self.stage(
            txn,
            table,
            key,
            Private {
                value: Some(value.to_vec()),
                write: Some(write),
            },
            done,
        )
    }

    /// Inserts a key that must not exist (checked against what the transaction and the cache know
    /// now, and by the device at commit).
    pub fn insert(
        &mut self,
        at: SimTime,
        txn: TxnId,
        table: TableId,
        key: &[u8],
        value: &[u8],
    ) -> Result<Access<()>> {
        self.check_value(table, value)?;
        // The conventional path has no device-side insert check: it learns from the page.
        let needs_existence = self.conventional.is_some();
        let (private, exists, done) =
            match self.write_access(at, txn, table, key, "insert", needs_existence)? {
                Ok(found) => found,
                Err(wait) => return Ok(wait),
            };
        if exists == Some(true) {
            return Err(HostError::KeyExists(table));
        }
        // Known absent (read or deleted in this transaction): a plain store; unknown: the device
        // checks.
        let write = match private {
            Some(_) => Write::Upsert,
            None => Write::InsertOnly,
        };
        self.stage(
            txn,
            table,
            key,
            Private {
                value: Some(value.to_vec()),
                write: Some(write),
            },
            done,
        )
    }

    /// Deletes an existing key (at commit).
    pub fn delete(
        &mut self,
        at: SimTime,
        txn: TxnId,
        table: TableId,
        key: &[u8],
    ) -> Result<Access<()>> {
        let (private, exists, done) =
            match self.write_access(at, txn, table, key, "delete", true)? {
                Ok(found) => found,
                Err(wait) => return Ok(wait),
            };
        if exists != Some(true) {
            return Err(HostError::KeyMissing(table));
        }
        let inserted_here = private.and_then(|private| private.write) == Some(Write::InsertOnly);
        self.stage(
            txn,
            table,
            key,
            Private {
                value: None,
                // A key inserted by this transaction and deleted again never reaches the device.
                write: if inserted_here {
                    None
                } else {
                    Some(Write::Delete)
                },
            },
            done,
        )
    }

    /// Stages a private copy, within the transaction's budget; the write is done at `done`.
    fn stage(
        &mut self,
        txn: TxnId,
        table: TableId,
        key: &[u8],
        private: Private,
        done: SimTime,
    ) -> Result<Access<()>> {
        self.add_private(txn, table, key, private)?;
        Ok(Access::Done {
            value: (),
            at: done,
        })
    }
}
