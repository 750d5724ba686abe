//! The model-file reader on arbitrary bytes: it returns a bundle or an
//! error, and never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = groupfit::store::ModelBundle::from_bytes(data, std::path::Path::new("fuzz.gfm"));
});
