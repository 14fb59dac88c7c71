//! A hash bucket page's header and slot array, below its CRC.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kvssd_engine::fuzzing::bucket_page_input(data));
