//! The superblock's body, the root record (after the superblock copy's CRC).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kvssd_device::fuzzing::root_record_input(data));
