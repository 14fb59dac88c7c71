//! kvssd on the network: one process owns a [`kvssd_device::Device`] and serves it over TCP in
//! RESP2, the Redis protocol, so existing clients, benchmarks and proxies can use it.
//!
//! * [`resp`]: the protocol at the boundary (a bounded parser and the reply writer);
//! * [`Config`] and [`run`]: the listener, a thread per connection up to a limit, shutdown on
//!   SIGTERM/SIGINT (stop accepting, finish what was received, checkpoint, exit);
//! * commands map onto the device's command set (see `docs/server.md`): databases are
//!   namespaces, MSET is an atomic batch, SCAN runs on snapshot iterators;
//! * [`SyncMode`]: when a write is answered; by default group commit across connections.

mod commands;
mod commit;
mod connection;
mod cursors;
mod glob;
mod info;
pub mod resp;
mod server;

pub use commit::SyncMode;
pub use server::{run, Config, ServerError, Source};

/// Most arguments in one request: MSET of a full device batch (1024 pairs) and its name, with
/// room to spare.
pub const ARGUMENTS_MAX: usize = 4 * kvssd_device::BATCH_OPERATIONS_MAX;
/// Longest inline request line, in bytes (as Redis).
pub const INLINE_BYTES_MAX: usize = 64 << 10;
/// Bytes a connection may buffer of requests not yet complete, by default: a value of the
/// device's largest size with room for its command around it.
pub const CLIENT_BUFFER_BYTES_DEFAULT: usize = 2 * kvssd_device::VALUE_BYTES_MAX + (64 << 10);
/// Connections served at once, by default.
pub const CLIENTS_MAX_DEFAULT: usize = 256;
/// SCAN cursors open at once (each holds a snapshot iterator).
pub const SCAN_CURSORS_MAX: usize = 64;
/// Seconds a SCAN cursor may stay unused before its snapshot is released.
pub const SCAN_CURSOR_IDLE_SECS: u64 = 30;
/// Longest reply of one command, in bytes (MGET is the only command that could pass it: 8 values
/// of the device's largest size fit).
pub const REPLY_BYTES_MAX: usize = 8 * kvssd_device::VALUE_BYTES_MAX + (64 << 10);
/// Replies buffered before they are sent mid-pipeline, in bytes.
pub const REPLY_FLUSH_BYTES: usize = 64 << 10;

// A value the device takes must fit in a request the server buffers.
const _: () = assert!(CLIENT_BUFFER_BYTES_DEFAULT > kvssd_device::VALUE_BYTES_MAX);
// MSET of a full batch fits in one request.
const _: () = assert!(ARGUMENTS_MAX > 2 * kvssd_device::BATCH_OPERATIONS_MAX);
