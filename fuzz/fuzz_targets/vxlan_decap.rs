#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = weft_overlay::fuzz_entry::decapsulate(data);
});
