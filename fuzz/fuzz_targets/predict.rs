//! Predict with whatever loads: arbitrary bytes after a valid header (the
//! length and checksum mended, so the parser sees them), then the golden
//! rows predicted. Loading and predicting return values or errors, and
//! never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fn rows() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/golden/rows.parquet")
}

fuzz_target!(|data: &[u8]| {
    // the current format version, then the header mended around `data`
    let mut file = b"GROUPFIT".to_vec();
    file.extend_from_slice(&groupfit::store::FORMAT_VERSION.to_le_bytes());
    file.extend_from_slice(&(data.len() as u64).to_le_bytes());
    file.extend_from_slice(&crc32fast::hash(data).to_le_bytes());
    file.extend_from_slice(data);
    if let Ok(bundle) =
        groupfit::store::ModelBundle::from_bytes(&file, std::path::Path::new("fuzz.gfm"))
    {
        let _ = groupfit::job::predict_batch(&bundle, &rows(), true);
    }
});

