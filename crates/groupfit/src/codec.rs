//! The float-array codec of the model file.
//!
//! Float arrays live in the file's binary section as little-endian bytes
//! (see [`crate::store::ModelBundle`]). The JSON refers to them by place:
//! `{"at": first, "n": count}` for `f32` (4-byte places from the section's
//! start) and `{"at": first, "n64": count}` for `f64` (two places a value;
//! module [`f64s`]). Older encodings still load: base64 text of the same
//! bytes, and plain number arrays (see `docs/model-format.md`).
//!
//! The binary section is written and read through a per-thread context:
//! [`collect`] gathers the arrays serialised inside it (anything serialised
//! outside it gets base64 text, or number arrays for `f64`), and
//! [`with_section`] lends a file's section to the arrays deserialised
//! inside it.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserializer, Serializer};
use std::cell::{Cell, RefCell};

thread_local! {
    /// Where [`serialize`] appends arrays: the float index the buffer starts
    /// at in the section, and the buffer.
    static SINK: RefCell<Option<(usize, Vec<u8>)>> = const { RefCell::new(None) };
    /// The section [`deserialize`] reads from (pointer and byte length),
    /// valid while [`with_section`] runs.
    static SOURCE: Cell<Option<(*const u8, usize)>> = const { Cell::new(None) };
}

/// Runs `f` with the arrays it serialises appended, as little-endian bytes,
/// to `buf` (cleared first; the first one at float index `base` of the
/// section) and written as references to them.
pub fn collect<R>(base: usize, buf: &mut Vec<u8>, f: impl FnOnce() -> R) -> R {
    /// Takes the buffer back however `f` ends.
    struct Restore<'a>(&'a mut Vec<u8>);
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            if let Some((_, v)) = SINK.with(|k| k.borrow_mut().take()) {
                *self.0 = v;
            }
        }
    }
    let mut v = std::mem::take(buf);
    v.clear();
    SINK.with(|k| *k.borrow_mut() = Some((base, v)));
    let _restore = Restore(buf);
    f()
}

/// Runs `f` with `section` (a file's binary section) as the source of the
/// arrays it deserialises.
pub fn with_section<R>(section: &[u8], f: impl FnOnce() -> R) -> R {
    /// Clears the source however `f` ends.
    struct Clear;
    impl Drop for Clear {
        fn drop(&mut self) {
            SOURCE.with(|s| s.set(None));
        }
    }
    SOURCE.with(|s| s.set(Some((section.as_ptr(), section.len()))));
    let _clear = Clear;
    f()
}

/// A value as the model file holds it, JSON text and its binary section,
/// packed in one buffer: every float bit kept (JSON alone cannot hold an
/// infinite threshold). What remote workers send of models and trees.
pub fn to_packed<T: serde::Serialize>(value: &T) -> Result<Vec<u8>, String> {
    let mut section = Vec::new();
    let json = collect(0, &mut section, || serde_json::to_vec(value)).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(8 + json.len() + section.len());
    out.extend_from_slice(&(json.len() as u64).to_le_bytes());
    out.extend_from_slice(&json);
    out.extend_from_slice(&section);
    Ok(out)
}

/// The value of a buffer written by [`to_packed`].
pub fn from_packed<T: serde::de::DeserializeOwned>(packed: &[u8]) -> Result<T, String> {
    let (head, rest) = packed
        .split_at_checked(8)
        .ok_or("a packed value without its header")?;
    let n = u64::from_le_bytes(head.try_into().expect("8 bytes"));
    let (json, section) = usize::try_from(n)
        .ok()
        .and_then(|n| rest.split_at_checked(n))
        .ok_or("a packed value shorter than its header says")?;
    with_section(section, || serde_json::from_slice(json)).map_err(|e| e.to_string())
}

/// A field serialised as [`to_packed`] writes it (`#[serde(with =
/// "crate::codec::packed")]`): what a binary format such as a remote
/// worker's snapshot holds of a model-file type, whose optional fields it
/// could not skip and whose infinite floats JSON alone would lose.
pub mod packed {
    use serde::de::{DeserializeOwned, Error as _};
    use serde::ser::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// Writes `v` as packed bytes.
    pub fn serialize<T: Serialize, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&super::to_packed(v).map_err(S::Error::custom)?)
    }

    /// Reads packed bytes.
    pub fn deserialize<'de, T: DeserializeOwned, D: Deserializer<'de>>(
        d: D,
    ) -> Result<T, D::Error> {
        let bytes = Vec::<u8>::deserialize(d)?;
        super::from_packed(&bytes).map_err(D::Error::custom)
    }
}

/// The `n * width` bytes from float place `at` of the current section
/// (`width`: bytes a value), handed to `read`.
fn from_section_bytes<R>(
    at: usize,
    n: usize,
    width: usize,
    read: impl FnOnce(&[u8]) -> R,
) -> Result<R, String> {
    let Some((ptr, len)) = SOURCE.with(Cell::get) else {
        return Err("a binary float array outside a file's binary section".into());
    };
    // SAFETY: `with_section` set the pointer from a slice of `len` bytes that
    // outlives the call this runs in, and clears it when that call ends.
    let section = unsafe { std::slice::from_raw_parts(ptr, len) };
    let range = at
        .checked_mul(4)
        .zip(n.checked_mul(width))
        .and_then(|(a, b)| Some((a, a.checked_add(b)?)))
        .filter(|&(_, e)| e <= section.len());
    let Some((a, e)) = range else {
        return Err(format!(
            "binary float array {at}+{n} ({width}-byte values) outside the file's {} floats",
            len / 4
        ));
    };
    Ok(read(&section[a..e]))
}

/// The values `n` floats from float index `at` of the current section.
fn from_section(at: usize, n: usize) -> Result<Vec<f32>, String> {
    from_section_bytes(at, n, 4, |b| {
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    })
}

/// Appends `bytes` to the sink of the running [`collect`], if any; returns
/// the float place they start at.
fn sink(bytes: impl FnOnce(&mut Vec<u8>)) -> Option<usize> {
    SINK.with(|k| {
        k.borrow_mut().as_mut().map(|(base, buf)| {
            let at = *base + buf.len() / 4;
            bytes(buf);
            at
        })
    })
}

/// Appends `values` to `buf` as little-endian bytes.
fn append(buf: &mut Vec<u8>, values: &[f32]) {
    buf.reserve(values.len() * 4);
    for v in values {
        buf.extend_from_slice(&v.to_le_bytes());
    }
}

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

/// Writes the reference `{"at": at, count_key: n}` to an array in the section.
fn write_ref<S: Serializer>(
    s: S,
    at: usize,
    count_key: &'static str,
    n: usize,
) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(Some(2))?;
    m.serialize_entry("at", &at)?;
    m.serialize_entry(count_key, &n)?;
    m.end()
}

/// Reads a reference `{"at": first, count_key: count}` (other keys are
/// ignored); `what` names the array in the error when one is missing.
fn read_ref<'de, A: MapAccess<'de>>(
    mut map: A,
    count_key: &str,
    what: &str,
) -> Result<(usize, usize), A::Error> {
    let (mut at, mut n) = (None, None);
    while let Some(key) = map.next_key::<String>()? {
        if key == "at" {
            at = Some(map.next_value::<usize>()?);
        } else if key == count_key {
            n = Some(map.next_value::<usize>()?);
        } else {
            map.next_value::<de::IgnoredAny>()?;
        }
    }
    at.zip(n).ok_or_else(|| {
        de::Error::custom(format!(
            "a binary {what} array needs \"at\" and \"{count_key}\""
        ))
    })
}

/// `#[serde(serialize_with)]`: inside [`collect`], appends the values to the
/// binary section and writes `{"at": first, "n": count}`; elsewhere writes
/// [`encode`]'s text.
pub fn serialize<S: Serializer>(values: &[f32], s: S) -> Result<S::Ok, S::Error> {
    let at = sink(|buf| append(buf, values));
    match at {
        Some(at) => write_ref(s, at, "n", values.len()),
        None => s.serialize_str(&encode(values)),
    }
}

/// `#[serde(deserialize_with)]`: reads a reference into the binary section
/// (inside [`with_section`]), [`encode`]'s text or, as version-1 files hold
/// it, an array of numbers.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f32>, D::Error> {
    struct Floats;
    impl<'de> Visitor<'de> for Floats {
        type Value = Vec<f32>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an array of numbers, its base64 text or its place in the binary section")
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Vec<f32>, A::Error> {
            let (at, n) = read_ref(map, "n", "float")?;
            from_section(at, n).map_err(de::Error::custom)
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

/// `f64` arrays in the binary section (format 5 on): `#[serde(with =
/// "crate::codec::f64s")]`. Inside [`collect`] an array is appended
/// as little-endian bytes (two float places a value) and written as
/// `{"at": first, "n64": count}`; elsewhere it is a plain array of numbers,
/// which is also what files before version 5 hold and what still loads.
pub mod f64s {
    use super::{from_section_bytes, read_ref, sink, write_ref};
    use serde::de::{self, MapAccess, SeqAccess, Visitor};
    use serde::{Deserializer, Serializer};

    /// Places in the section an array of `n` values takes.
    pub const fn places(n: usize) -> usize {
        2 * n
    }

    /// See the module: a reference inside [`super::collect`], numbers elsewhere.
    pub fn serialize<S: Serializer>(values: &[f64], s: S) -> Result<S::Ok, S::Error> {
        let at = sink(|buf| {
            buf.reserve(values.len() * 8);
            for v in values {
                buf.extend_from_slice(&v.to_le_bytes());
            }
        });
        match at {
            Some(at) => write_ref(s, at, "n64", values.len()),
            None => s.collect_seq(values),
        }
    }

    /// Reads a reference into the binary section (inside
    /// [`super::with_section`]) or an array of numbers.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        struct Floats;
        impl<'de> Visitor<'de> for Floats {
            type Value = Vec<f64>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an array of numbers or its place in the binary section")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Vec<f64>, A::Error> {
                let (at, n) = read_ref(map, "n64", "f64")?;
                from_section_bytes(at, n, 8, |b| {
                    b.chunks_exact(8)
                        .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
                        .collect()
                })
                .map_err(de::Error::custom)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<f64>, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(v) = seq.next_element::<f64>()? {
                    out.push(v);
                }
                Ok(out)
            }
        }
        d.deserialize_any(Floats)
    }
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

    #[test]
    fn arrays_go_to_the_binary_section_and_come_back() {
        #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
        struct W {
            #[serde(with = "super")]
            a: Vec<f32>,
            #[serde(with = "super")]
            b: Vec<f32>,
        }
        let w = W {
            a: vec![1.0, -0.0, f32::MIN_POSITIVE],
            b: vec![0.1],
        };
        // The section already holds 2 floats before these.
        let mut section = vec![0u8; 8];
        let mut buf = Vec::new();
        let json = collect(2, &mut buf, || serde_json::to_string(&w).unwrap());
        assert_eq!(json, r#"{"a":{"at":2,"n":3},"b":{"at":5,"n":1}}"#);
        assert_eq!(buf.len(), 16);
        assert_eq!(&buf[..4], &1.0f32.to_le_bytes());
        section.extend_from_slice(&buf);
        let back: W = with_section(&section, || serde_json::from_str(&json).unwrap());
        assert_eq!(
            (
                back.a.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                back.b
            ),
            (w.a.iter().map(|x| x.to_bits()).collect(), w.b.clone())
        );
        // Outside `collect`: base64 text, as before.
        assert!(serde_json::to_string(&w)
            .unwrap()
            .contains(r#""b":"zczMPQ==""#));
        // A reference past the section's end, or with no section, is an error.
        let e = with_section(&section[..20], || {
            serde_json::from_str::<W>(&json).err().unwrap()
        });
        assert!(e.to_string().contains("outside the file's 5 floats"), "{e}");
        let e = serde_json::from_str::<W>(&json).err().unwrap();
        assert!(
            e.to_string().contains("outside a file's binary section"),
            "{e}"
        );
    }

    #[test]
    fn f64_arrays_go_to_the_section_two_places_a_value_and_old_numbers_still_read() {
        #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
        struct W {
            #[serde(with = "super")]
            a: Vec<f32>,
            #[serde(with = "super::f64s")]
            b: Vec<f64>,
        }
        let w = W {
            a: vec![2.0],
            b: vec![0.1, -0.0, f64::MIN_POSITIVE, f64::NAN],
        };
        let mut buf = Vec::new();
        let json = collect(0, &mut buf, || serde_json::to_string(&w).unwrap());
        // One place for the f32, then two places for each f64.
        assert_eq!(json, r#"{"a":{"at":0,"n":1},"b":{"at":1,"n64":4}}"#);
        assert_eq!(buf.len(), 4 + 32);
        assert_eq!(&buf[4..12], &0.1f64.to_le_bytes());
        let back: W = with_section(&buf, || serde_json::from_str(&json).unwrap());
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&back.b), bits(&w.b));
        // Outside `collect`: a plain array, as files before version 5 hold it.
        let w1 = W {
            a: vec![2.0],
            b: vec![0.1, -2.5],
        };
        let text = serde_json::to_string(&w1).unwrap();
        assert!(text.contains(r#""b":[0.1,-2.5]"#), "{text}");
        let old: W = serde_json::from_str(&text).unwrap();
        assert_eq!(old, w1);
        // A reference running past the section (the last value cut in half).
        let e = with_section(&buf[..32], || {
            serde_json::from_str::<W>(&json).err().unwrap()
        });
        assert!(
            e.to_string()
                .contains("1+4 (8-byte values) outside the file's 8 floats"),
            "{e}"
        );
        let e = serde_json::from_str::<W>(r#"{"a":[1.0],"b":{"at":0}}"#)
            .err()
            .unwrap();
        assert!(e.to_string().contains("needs \"at\" and \"n64\""), "{e}");
    }
}
