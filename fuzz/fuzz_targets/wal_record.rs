//! A write-ahead log record (the bytes the log framing reassembled after their fragments' CRCs).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kvssd_device::fuzzing::wal_record_input(data));
