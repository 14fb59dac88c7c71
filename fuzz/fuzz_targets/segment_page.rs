//! A meta segment page: `SegmentPage::parse`, every entry, the start key and a binary search.
//! The first input byte is the length of the key searched for, taken from the end of the input.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kvssd_engine::fuzzing::segment_page_input(data));
