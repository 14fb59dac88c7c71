//! Benchmarks of kvssd.
//!
//! * [`flash_bench`]: drives the simulated NAND array directly with closed-loop clients and reports
//!   simulated IOPS, bandwidth and latency, and the simulator's own speed.
//! * [`workload`]: YCSB core workloads (Load, A-F) generated deterministically from a seed.
//! * [`runner`]: closed-loop clients on the virtual clock; [`report`]: the one result schema, the
//!   table, the JSON and the plots.
//! * [`ycsb`], [`gc`], [`seek`], [`kaml_micro`]: `kvssd bench ycsb`, `gc`, `seek` and `kaml-micro`,
//!   all driving a [`kvssd_device::Device`] through its commands ([`target`]: the device with one
//!   namespace as the runner's target).
//! * [`heights`]: `kvssd bench ycsb --heights`, PinK Fig. 13: the same run at several LSM-tree
//!   heights in the same DRAM.
//! * [`oltp`], [`tpcb`], [`tpcc`]: `kvssd bench tpcb` and `tpcc` (and what they share), transactions
//!   through the host layer ([`kvssd_host`]) on KAML's commit path and a conventional one;
//!   [`oltp_report`]: their plots (and `ycsb --host`'s), drawn with [`report`]'s charts.
//! * [`tpcb_threads`]: `kvssd bench tpcb --file`, TPC-B from real OS threads on a file image
//!   (wall-clock), and the load the SIGKILL test runs; [`ycsb_host`]: `kvssd bench ycsb --host`,
//!   YCSB through the host layer, one transaction per request.
//! * [`counts`]: exact distributions of per-request counts (flash reads per GET: mean, p99.99,
//!   largest).
//! * [`figures`]: `docs/figures.md` from the benchmarks' JSON (`kvssd report figures`).
//! * [`sim_speed`]: how fast the simulator copies pages compared with a plain random memory copy of
//!   the same size on this machine.
//!
//! Simulated figures come from the virtual clock of the timing model and are labelled as such; the
//! simulator's own speed and `tpcb --file`'s throughput are the only wall-clock figures, and are
//! labelled too.

pub mod counts;
pub mod figures;
pub mod flash_bench;
pub mod gc;
pub mod heights;
pub mod kaml_micro;
pub mod memory;
pub mod oltp;
pub mod oltp_report;
pub mod profile;
pub mod report;
pub mod runner;
pub mod seek;
pub mod sim_speed;
pub mod target;
pub mod tpcb;
pub mod tpcb_threads;
pub mod tpcc;
pub mod workload;
pub mod ycsb;
pub mod ycsb_host;

mod latency;
mod values;
mod versions;

pub use latency::{
    latency_windows, LatencyRecorder, LatencySummary, LatencyWindow, LATENCY_WINDOWS,
};
