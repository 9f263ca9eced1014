#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = weft_overlay::tcp_link::fuzz_entry::decode(data);
});
