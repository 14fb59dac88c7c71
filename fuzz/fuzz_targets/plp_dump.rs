//! A power-loss dump record: decoded, then the device's DRAM state rebuilt from it (space layer,
//! every namespace's engine, index recount) as opening a power-loss-protected device does.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kvssd_device::fuzzing::plp_dump_input(data));
