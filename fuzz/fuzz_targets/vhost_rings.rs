#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = weft_vhost::fuzz_entry::guest_rings(data);
});
