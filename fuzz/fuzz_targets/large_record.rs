//! One page of a large record: its head (header and key) and the value slice it holds.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kvssd_space::fuzzing::large_record_input(data));
