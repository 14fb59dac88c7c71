//! A data page's record header and small record at an offset: the first two input bytes are the
//! offset (little-endian), the rest is the page.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kvssd_space::fuzzing::data_record_input(data));
