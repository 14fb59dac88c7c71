//! A superblock copy's fields (version, sequence, body), below its CRC.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kvssd_device::fuzzing::superblock_input(data));
