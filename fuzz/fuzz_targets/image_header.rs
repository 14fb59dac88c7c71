//! A file image's header fields (version, geometry), below its CRC, and the layout they imply.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kvssd_flash::fuzzing::image_header_input(data));
