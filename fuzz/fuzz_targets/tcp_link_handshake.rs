#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // Without the key, no proof may verify.
    assert!(!weft_overlay::tcp_link::fuzz_entry::handshake(data));
});
