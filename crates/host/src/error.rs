//! The host layer's typed errors: every bad use of the API and every refusal is one of these,
//! never a panic or a hang.

use kvssd_device::DeviceError;

use crate::{TableId, TxnId, TxnState};

/// What a host call refused, and why.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The transaction id names no control block (never allocated, or freed).
    #[error("transaction {0} does not exist")]
    TxnUnknown(TxnId),
    /// The call needs an ACTIVE transaction and this one is not (a read after commit, a commit
    /// twice, an update after abort).
    #[error("transaction {txn} is {state:?}, and {call} needs it ACTIVE")]
    NotActive {
        /// The transaction.
        txn: TxnId,
        /// Its state.
        state: TxnState,
        /// The call refused.
        call: &'static str,
    },
    /// A freed control block cannot be restarted, and only ended transactions can be freed.
    #[error("transaction {txn} is {state:?}, and {call} needs it ended (COMMITTED or ABORTED)")]
    NotEnded {
        /// The transaction.
        txn: TxnId,
        /// Its state.
        state: TxnState,
        /// The call refused.
        call: &'static str,
    },
    /// Wait-die chose this transaction as the victim: it asked for a lock held in a conflicting
    /// mode by an older transaction. It is ABORTED (its locks released, its private copies
    /// discarded); [`crate::Host::restart`] runs it again with its original age, so it cannot
    /// starve.
    #[error("transaction {txn} died: a lock it asked for is held by an older transaction")]
    Died {
        /// The victim.
        txn: TxnId,
    },
    /// The call would take the transaction's private copies past the per-transaction budget;
    /// it was refused and changed nothing (the transaction stays ACTIVE).
    #[error("transaction {txn}'s private copies would take {bytes} bytes, over the budget of {budget} bytes")]
    OverBudget {
        /// The transaction.
        txn: TxnId,
        /// Private bytes the call would have needed.
        bytes: u64,
        /// The budget.
        budget: u64,
    },
    /// An update or delete of a key that does not exist.
    #[error("the key does not exist in table {0}")]
    KeyMissing(TableId),
    /// An insert of a key that already exists (found before commit; one found by the device at
    /// commit aborts the transaction with [`HostError::Device`]).
    #[error("the key already exists in table {0}")]
    KeyExists(TableId),
    /// The table id names no table of this host.
    #[error("table {0} does not exist")]
    TableUnknown(TableId),
    /// A key or value the layer cannot hold (empty, too long, larger than the table's slot).
    #[error("{0}")]
    Invalid(String),
    /// Every control block is in use.
    #[error("all {0} transaction control blocks are in use")]
    TxnsExhausted(usize),
    /// The conventional path's log, anchor or page directory on the device is damaged in a way
    /// recovery cannot get past without losing an acknowledged commit (a torn record at the
    /// log's end is not this: it was never acknowledged, and recovery ignores it).
    #[error("the conventional path's data on the device is damaged: {0}")]
    Corrupt(String),
    /// The device refused a command. At commit, the transaction is ABORTED and nothing of it was
    /// applied (a batch is all or nothing).
    #[error("device: {0}")]
    Device(#[from] DeviceError),
}

/// A host call's result.
pub type Result<T, E = HostError> = std::result::Result<T, E>;
