#![no_main]

#[allow(dead_code)] // Each target uses one of the shared functions.
#[path = "../exercise.rs"]
mod exercise;

libfuzzer_sys::fuzz_target!(|data: &[u8]| exercise::pod_status(data));
