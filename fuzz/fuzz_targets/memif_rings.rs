#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| weft_memif::fuzz_entry::hostile_rings(data));
