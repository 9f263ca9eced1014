#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| weftd::fuzz_entry::handover::handover_messages(data));
