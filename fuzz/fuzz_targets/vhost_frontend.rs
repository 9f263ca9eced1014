#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    weft_vhost::fuzz_entry::frontend_messages(data);
});
