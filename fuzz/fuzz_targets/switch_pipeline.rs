#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| weft_switch::fuzz_entry::pipeline(data));
