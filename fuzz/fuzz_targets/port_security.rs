#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| weft_switch::fuzz_entry::port_security(data));
