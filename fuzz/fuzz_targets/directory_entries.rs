#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| weft_directory::fuzz_entry::directory_entries(data));
