//! `libkvssd`: the SNIA Key Value Storage API v1.1, as Samsung's OpenMPDK/KVSSD v1.6.0 exposes it
//! (`kvs_api.h`), over a kvssd device: persistent on a file, or PinK's card simulated, optionally
//! paced to its simulated latencies on the wall clock.
//!
//! The headers programs include are in `crates/capi/include`; `cargo build --release` leaves
//! `target/release/libkvssd.so` and `libkvssd.a`. How to build a program against it, the device
//! URIs and every difference from the specification and Samsung's emulator: `docs/kv-api.md`.
//!
//! Layout of the crate:
//!
//! * [`ffi`]: the C types, codes and limits; [`guard`]: panic containment and pointer checks;
//! * [`uri`]: device URIs; [`state`]: open devices, key spaces and their handles; [`clock`]: the
//!   simulated clock, pacing and latency records; [`queue`]: asynchronous commands;
//! * [`commands`]: the key-value commands; [`iterators`]: key groups and iterator buffers;
//! * the entry points, `kvs_*` and `_kvs_*`, in [`api_device`], [`api_key_space`], [`api_kv`] and
//!   [`api_iter`].
//!
//! Every entry point catches panics (a panic is reported as `KVS_ERR_SYS_IO`, never unwound into
//! C), checks every pointer, length and handle before use, and is safe to call from any thread.

pub mod api_device;
pub mod api_iter;
pub mod api_key_space;
pub mod api_kv;
pub mod clock;
pub mod commands;
pub mod errors;
pub mod ffi;
pub mod guard;
pub mod iterators;
pub mod queue;
pub mod state;
pub mod uri;
