#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = weft_memif::fuzz_entry::control_messages(data);
});
