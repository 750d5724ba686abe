//! Compact `f32` arrays in the model file: base64 of the values'
//! little-endian bytes (5.3 characters a value, where JSON text takes about
//! 11 and is slow to format and parse). Used for the MLP family's weights
//! from format version 2 on; version-1 files hold plain number arrays, which
//! still load. `inspect --json` shows number arrays either way (see
//! [`super::FittedModel::to_json`]).

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::de::{self, SeqAccess, Visitor};
use serde::{Deserializer, Serializer};

/// The base64 text of `values`.
pub fn encode(values: &[f32]) -> String {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    STANDARD.encode(bytes)
}

/// The values of base64 text written by [`encode`].
pub fn decode(text: &str) -> Result<Vec<f32>, String> {
    let bytes = STANDARD
        .decode(text)
        .map_err(|e| format!("bad base64 float array: {e}"))?;
    if bytes.len() % 4 != 0 {
        return Err(format!(
            "bad base64 float array: {} bytes, not a multiple of 4",
            bytes.len()
        ));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// `#[serde(serialize_with)]`: writes [`encode`]'s text.
pub fn serialize<S: Serializer>(values: &[f32], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&encode(values))
}

/// `#[serde(deserialize_with)]`: reads [`encode`]'s text or, as version-1
/// files hold it, an array of numbers.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f32>, D::Error> {
    struct Floats;
    impl<'de> Visitor<'de> for Floats {
        type Value = Vec<f32>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an array of numbers or its base64 text")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Vec<f32>, E> {
            decode(v).map_err(E::custom)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<f32>, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
            while let Some(v) = seq.next_element::<f32>()? {
                out.push(v);
            }
            Ok(out)
        }
    }
    d.deserialize_any(Floats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_holds_every_bit_and_arrays_still_read() {
        let v = [
            0.0f32,
            -0.0,
            1.5,
            -3.25e-30,
            f32::MAX,
            f32::MIN_POSITIVE,
            0.1,
        ];
        let t = encode(&v);
        // 7 values, 28 bytes: 40 characters with padding.
        assert_eq!(t.len(), 40);
        let back = decode(&t).unwrap();
        assert_eq!(
            back.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        assert_eq!(encode(&[1.0]), "AACAPw==");
        #[derive(serde::Deserialize)]
        struct W {
            #[serde(deserialize_with = "deserialize")]
            w: Vec<f32>,
        }
        let a: W = serde_json::from_str(r#"{"w":[1.0,-2.5]}"#).unwrap();
        assert_eq!(a.w, vec![1.0, -2.5]);
        let b: W = serde_json::from_str(r#"{"w":"AACAPw=="}"#).unwrap();
        assert_eq!(b.w, vec![1.0]);
        let e = serde_json::from_str::<W>(r#"{"w":"AACA"}"#).err().unwrap();
        assert!(e.to_string().contains("not a multiple of 4"), "{e}");
        let e = serde_json::from_str::<W>(r#"{"w":"!!!!"}"#).err().unwrap();
        assert!(e.to_string().contains("bad base64"), "{e}");
    }
}
