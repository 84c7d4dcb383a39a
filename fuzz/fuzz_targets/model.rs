#![no_main]
#[path = "../checks/model.rs"]
mod checks;
libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::model(data));
