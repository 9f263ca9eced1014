#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| weftd::fuzz_entry::control_connection(data));
