//! `Space::restore` from saved state, onto a fresh `test_min` flash array.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kvssd_space::fuzzing::space_restore_input(data));
