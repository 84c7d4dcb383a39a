#![no_main]
#[path = "../checks/api.rs"]
mod checks;
libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::write(data));
