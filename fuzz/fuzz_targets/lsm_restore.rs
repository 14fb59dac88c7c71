//! `LsmTree::restore` from saved state; the first input byte picks the preset.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kvssd_engine::fuzzing::lsm_restore_input(data));
