//! A request as a client sends it over TCP (`kvssd_server::resp::parse`), under small limits so
//! the bounds on declared lengths are reached; every request it returns must lie within them.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kvssd_server::resp::fuzz_input(data));
