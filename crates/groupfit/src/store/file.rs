//! The model file: the bundle's bytes and back, and the streamed writer.
//!
//! File layout (little-endian):
//!
//! ```text
//! b"GROUPFIT"  u32 format_version  u64 payload_len  u32 crc32(payload)  payload
//! payload = u64 section_len  section (float arrays, see crate::codec)  JSON
//! ```
//!
//! Loading checks the magic, the version, the length and the checksum before
//! parsing, so a truncated or damaged file is reported as such; older format
//! versions load too (`docs/model-format.md`). Files are written through
//! [`crate::util::fs::write_atomic`], so a failed write leaves nothing behind.

use std::io::Write;
use std::path::Path;

use serde::Serialize;

use crate::data::categorical::Dictionary;
use crate::data::Task;
use crate::error::{GroupfitError, Result};
use crate::tune::ConfigEntry;

use crate::codec as floats;
use crate::util::fs::write_atomic;

use super::{FittedModel, GlobalEntry, GroupEntry, ModelBundle, FORMAT_VERSION};

const MAGIC: &[u8; 8] = b"GROUPFIT";
const HEADER: usize = 8 + 4 + 8 + 4;

impl ModelBundle {
    /// Serialises to the file format.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        // The header's place, the section's length and the section, filled
        // in by the encoder; then the JSON; then the header.
        let section_len = 4 * self.section_floats();
        let at = HEADER + 8;
        let mut out = vec![0u8; at + section_len];
        out[HEADER..at].copy_from_slice(&(section_len as u64).to_le_bytes());
        let mut json = Vec::new();
        self.write_payload(
            &mut json,
            &mut |first, bytes| {
                out[at + 4 * first..at + 4 * first + bytes.len()].copy_from_slice(bytes);
                Ok(())
            },
            PARALLEL_GROUPS,
        )
        .map_err(|e| GroupfitError::arg(format!("cannot encode model: {e}")))?;
        out.extend_from_slice(&json);
        let payload = &out[HEADER..];
        let h = header(payload.len() as u64, crc32fast::hash(payload));
        out[..HEADER].copy_from_slice(&h);
        Ok(out)
    }

    /// Float places of the binary section (format 5): the global model's
    /// arrays first, then each group's (its model's, then its per-config
    /// scores), in order.
    fn section_floats(&self) -> usize {
        self.global.as_ref().map_or(0, |g| model_floats(&g.model))
            + self.groups.iter().map(entry_floats).sum::<usize>()
            + self
                .levels
                .iter()
                .flat_map(|l| &l.groups)
                .map(entry_floats)
                .sum::<usize>()
    }

    /// Parses the file format; `path` only names the file in errors.
    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<ModelBundle> {
        let corrupt = |reason: String| GroupfitError::CorruptModel {
            path: path.display().to_string(),
            reason,
        };
        if bytes.len() < HEADER {
            return Err(corrupt(format!(
                "{} bytes, shorter than the {HEADER}-byte header",
                bytes.len()
            )));
        }
        if &bytes[..8] != MAGIC {
            return Err(corrupt(
                "not a groupfit model file (bad magic bytes)".into(),
            ));
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
        if version == 0 || version > FORMAT_VERSION {
            return Err(GroupfitError::UnsupportedVersion {
                path: path.display().to_string(),
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        let len = u64::from_le_bytes(bytes[12..20].try_into().unwrap());
        let crc = u32::from_le_bytes(bytes[20..24].try_into().unwrap());
        let payload = &bytes[HEADER..];
        if payload.len() as u64 != len {
            return Err(corrupt(format!(
                "truncated: header says {len} payload bytes, file has {}",
                payload.len()
            )));
        }
        if crc32fast::hash(payload) != crc {
            return Err(corrupt("checksum mismatch".into()));
        }
        let (section, json) = if version >= 4 {
            let len = payload
                .get(..8)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
                .ok_or_else(|| corrupt("payload shorter than its section length".into()))?;
            match usize::try_from(len)
                .ok()
                .filter(|&n| n % 4 == 0 && n <= payload.len() - 8)
            {
                Some(n) => (&payload[8..8 + n], &payload[8 + n..]),
                None => {
                    return Err(corrupt(format!(
                        "binary section of {len} bytes does not fit the {}-byte payload",
                        payload.len()
                    )))
                }
            }
        } else {
            (&payload[..0], payload)
        };
        let mut bundle: ModelBundle =
            floats::with_section(section, || serde_json::from_slice(json))
                .map_err(|e| corrupt(format!("bad payload: {e}")))?;
        bundle.format_version = version;
        bundle.check().map_err(corrupt)?;
        Ok(bundle)
    }

    /// Writes the bundle to `path` atomically: the bytes of
    /// [`ModelBundle::to_bytes`], encoded straight into the file (a large
    /// bundle need not sit in memory): the binary section's pieces at their
    /// places, the JSON
    /// after it, and the header, which holds the payload's length and
    /// checksum, over its placeholder at the end.
    pub fn save(&self, path: &Path) -> Result<()> {
        use std::io::{Seek, SeekFrom};
        let io = |e: std::io::Error| GroupfitError::io("write", path, e);
        let section_len = 4 * self.section_floats();
        write_atomic(path, |f| {
            let json_at = (HEADER + 8 + section_len) as u64;
            f.seek(SeekFrom::Start(json_at)).map_err(io)?;
            let file: &std::fs::File = f;
            // The checksum of the payload in file order: the section's
            // length, the section (its pieces come in order), the JSON.
            let mut crc = crc32fast::Hasher::new();
            crc.update(&(section_len as u64).to_le_bytes());
            let mut section_crc = crc32fast::Hasher::new();
            let mut next = 0usize;
            let (json_crc, json_len) = {
                let mut w = CrcWriter {
                    inner: std::io::BufWriter::with_capacity(1 << 20, file),
                    crc: crc32fast::Hasher::new(),
                    len: 0,
                };
                self.write_payload(
                    &mut w,
                    &mut |at, bytes| {
                        assert_eq!(at, next, "section pieces come in order");
                        next += bytes.len() / 4;
                        section_crc.update(bytes);
                        write_at(file, bytes, (HEADER + 8 + 4 * at) as u64)
                    },
                    PARALLEL_GROUPS,
                )
                .map_err(|e| {
                    if e.is_io() {
                        GroupfitError::io("write", path, std::io::Error::from(e))
                    } else {
                        GroupfitError::arg(format!("cannot encode model: {e}"))
                    }
                })?;
                w.inner.flush().map_err(io)?;
                (w.crc, w.len)
            };
            crc.combine(&section_crc);
            crc.combine(&json_crc);
            let len = 8 + section_len as u64 + json_len;
            write_at(file, &(section_len as u64).to_le_bytes(), HEADER as u64).map_err(io)?;
            write_at(file, &header(len, crc.finalize()), 0).map_err(io)
        })
    }

    /// Writes the payload's JSON to `out` and its binary section through
    /// `section(first float, bytes)`, piece by piece in order: what
    /// `serde_json::to_writer(out, self)` writes inside
    /// [`floats::collect`], with the groups (most of a large bundle)
    /// encoded in pieces of `chunk` groups, one piece per core at a time.
    fn write_payload(
        &self,
        out: &mut impl Write,
        section: &mut dyn FnMut(usize, &[u8]) -> std::io::Result<()>,
        chunk: usize,
    ) -> serde_json::Result<()> {
        /// The bundle's fields before `groups`, in declaration order.
        #[derive(Serialize)]
        struct Head<'a> {
            format_version: u32,
            groupfit_version: &'a str,
            family: &'a str,
            task: Task,
            key_columns: &'a [String],
            features: &'a [String],
            #[serde(skip_serializing_if = "<[Dictionary]>::is_empty")]
            categorical: &'a [Dictionary],
            target: &'a str,
            impute: &'a [f64],
            configs: &'a [ConfigEntry],
            global: &'a Option<GlobalEntry>,
        }
        let mut head_floats = Vec::new();
        let head = floats::collect(0, &mut head_floats, || {
            serde_json::to_vec(&Head {
                format_version: self.format_version,
                groupfit_version: &self.groupfit_version,
                family: &self.family,
                task: self.task,
                key_columns: &self.key_columns,
                features: &self.features,
                categorical: &self.categorical,
                target: &self.target,
                impute: &self.impute,
                configs: &self.configs,
                global: &self.global,
            })
        })?;
        section(0, &head_floats).map_err(serde_json::Error::io)?;
        // `{...}` without its closing brace, then the last two fields.
        out.write_all(&head[..head.len() - 1])
            .map_err(serde_json::Error::io)?;
        out.write_all(b",\"groups\":[")
            .map_err(serde_json::Error::io)?;
        // Pieces of `chunk` groups, encoded `threads` at a time into buffers
        // reused from wave to wave (a bundle's groups can be hundreds of
        // megabytes of JSON: it never sits in memory whole, and the buffers
        // are not regrown) and written in order.
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        type Bufs = (Vec<u8>, Vec<u8>);
        let encode = |gs: &[GroupEntry], base: usize, (json, bin): &mut Bufs| {
            json.clear();
            floats::collect(base, bin, || -> serde_json::Result<()> {
                for (i, g) in gs.iter().enumerate() {
                    if i > 0 {
                        json.push(b',');
                    }
                    serde_json::to_writer(&mut *json, g)?;
                }
                Ok(())
            })
        };
        let pieces: Vec<&[GroupEntry]> = self.groups.chunks(chunk.max(1)).collect();
        // Where each piece's floats start in the section.
        let mut bases = Vec::with_capacity(pieces.len());
        let mut at = head_floats.len() / 4;
        for gs in &pieces {
            bases.push(at);
            at += gs.iter().map(entry_floats).sum::<usize>();
        }
        let mut bufs: Vec<Bufs> = vec![Default::default(); threads.min(pieces.len())];
        for (w, wave) in pieces.chunks(threads).enumerate() {
            let wave_bases = &bases[w * threads..];
            let done: Vec<serde_json::Result<()>> = std::thread::scope(|sc| {
                let mut jobs = bufs.iter_mut().zip(wave).zip(wave_bases);
                let here = jobs.next().map(|((buf, gs), &base)| (buf, *gs, base));
                let handles: Vec<_> = jobs
                    .map(|((buf, gs), &base)| sc.spawn(move || encode(gs, base, buf)))
                    .collect();
                here.map(|(buf, gs, base)| encode(gs, base, buf))
                    .into_iter()
                    .chain(
                        handles
                            .into_iter()
                            .map(|h| h.join().expect("encoding thread panicked")),
                    )
                    .collect()
            });
            for (i, ((json, bin), r)) in bufs.iter().zip(done).enumerate() {
                r?;
                if w > 0 || i > 0 {
                    out.write_all(b",").map_err(serde_json::Error::io)?;
                }
                out.write_all(json).map_err(serde_json::Error::io)?;
                section(wave_bases[i], bin).map_err(serde_json::Error::io)?;
            }
        }
        out.write_all(b"]").map_err(serde_json::Error::io)?;
        if !self.levels.is_empty() {
            // The hierarchy's coarser levels: far fewer groups, one piece,
            // their floats after the groups'.
            let mut bin = Vec::new();
            let json = floats::collect(at, &mut bin, || serde_json::to_vec(&self.levels))?;
            out.write_all(b",\"levels\":")
                .map_err(serde_json::Error::io)?;
            out.write_all(&json).map_err(serde_json::Error::io)?;
            section(at, &bin).map_err(serde_json::Error::io)?;
        }
        if let Some(pooling) = &self.pooling {
            out.write_all(b",\"pooling\":")
                .map_err(serde_json::Error::io)?;
            serde_json::to_writer(&mut *out, pooling)?;
        }
        out.write_all(b",\"summary\":")
            .map_err(serde_json::Error::io)?;
        serde_json::to_writer(&mut *out, &self.summary)?;
        out.write_all(b"}").map_err(serde_json::Error::io)
    }

    /// Reads a bundle written by [`ModelBundle::save`].
    pub fn load(path: &Path) -> Result<ModelBundle> {
        let bytes = std::fs::read(path).map_err(|e| GroupfitError::io("read", path, e))?;
        ModelBundle::from_bytes(&bytes, path)
    }
}

/// Float places a model takes in the binary section: an MLP's weights and
/// biases (`f32`, one place each), and every `f64` array (two places each:
/// linear coefficients, tree thresholds and leaf values, gain importance, an
/// MLP's standardisation and epoch losses, one-hot codes and coefficients).
fn model_floats(m: &FittedModel) -> usize {
    use floats::f64s::places;
    match m {
        FittedModel::Mlp(m) => {
            m.layers
                .iter()
                .map(|l| l.w.len() + l.b.len())
                .sum::<usize>()
                + places(m.mean.len() + m.std.len() + m.epoch_loss.len())
                + m.onehot
                    .iter()
                    .map(|o| places(o.codes.len() + o.other.len()))
                    .sum::<usize>()
        }
        FittedModel::Linear(m) => {
            places(m.coef.len())
                + m.onehot
                    .iter()
                    .map(|o| places(o.map.codes.len() + o.map.other.len() + o.coef.len()))
                    .sum::<usize>()
        }
        FittedModel::Gbdt(m) => {
            places(m.importance.len())
                + m.trees
                    .iter()
                    .map(|t| places(t.threshold.len() + t.leaf_value.len()))
                    .sum::<usize>()
        }
    }
}

/// Float places a group's entry takes in the binary section: its model's
/// and its per-config scores'.
fn entry_floats(g: &GroupEntry) -> usize {
    g.model.as_ref().map_or(0, model_floats) + floats::f64s::places(g.valid_by_config.len())
}

/// Writes all of `bytes` at `offset` of `file` (not moving its cursor).
fn write_at(file: &std::fs::File, bytes: &[u8], offset: u64) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::write_all_at(file, bytes, offset)
    }
    #[cfg(not(unix))]
    {
        use std::io::{Seek, SeekFrom};
        let mut f = file;
        let back = f.stream_position()?;
        f.seek(SeekFrom::Start(offset))?;
        f.write_all(bytes)?;
        f.seek(SeekFrom::Start(back)).map(|_| ())
    }
}

/// Groups per piece that one thread of [`ModelBundle::save`] encodes.
const PARALLEL_GROUPS: usize = 1024;

/// The file header of a payload of `len` bytes with checksum `crc`.
fn header(len: u64, crc: u32) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    h[12..20].copy_from_slice(&len.to_le_bytes());
    h[20..24].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Passes bytes on to `inner`, counting them and updating their checksum.
struct CrcWriter<W> {
    inner: W,
    crc: crc32fast::Hasher,
    len: u64,
}

impl<W: Write> Write for CrcWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linear::LinearModel;
    use crate::mlp::MlpModel;
    use crate::store::{Route, Scores};

    fn bundle() -> ModelBundle {
        ModelBundle {
            format_version: FORMAT_VERSION,
            groupfit_version: "test".into(),
            family: "linear".into(),
            task: Task::Binary,
            key_columns: vec!["g".into()],
            features: vec!["x".into()],
            categorical: Vec::new(),
            target: "y".into(),
            impute: vec![0.5],
            configs: vec![ConfigEntry {
                name: "default".into(),
                params: Default::default(),
            }],
            global: Some(GlobalEntry {
                config: 0,
                model: FittedModel::Linear(LinearModel {
                    coef: vec![1.0],
                    intercept: 0.0,
                    onehot: Vec::new(),
                }),
                valid: Scores::default(),
            }),
            groups: vec![],
            levels: Vec::new(),
            pooling: None,
            summary: serde_json::json!({}),
        }
    }

    #[test]
    fn round_trip_and_damage_detection() {
        let b = bundle();
        let bytes = b.to_bytes().unwrap();
        let p = Path::new("m.gfm");
        assert_eq!(ModelBundle::from_bytes(&bytes, p).unwrap(), b);
        let e = ModelBundle::from_bytes(&bytes[..bytes.len() - 3], p)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("model file 'm.gfm' is corrupt or truncated: truncated"),
            "{e}"
        );
        let mut flipped = bytes.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert!(ModelBundle::from_bytes(&flipped, p)
            .unwrap_err()
            .to_string()
            .contains("checksum"));
        assert!(ModelBundle::from_bytes(b"hello", p)
            .unwrap_err()
            .to_string()
            .contains("shorter"));
        let mut newer = bytes;
        newer[8..12].copy_from_slice(&99u32.to_le_bytes());
        assert!(matches!(
            ModelBundle::from_bytes(&newer, p),
            Err(GroupfitError::UnsupportedVersion { found: 99, .. })
        ));
    }

    /// A bundle whose global model is a small MLP with awkward floats.
    fn mlp_bundle() -> ModelBundle {
        use crate::mlp::Dense;
        let mut b = bundle();
        b.family = "mlp".into();
        b.global.as_mut().unwrap().model = FittedModel::Mlp(MlpModel {
            mean: vec![0.25],
            std: vec![2.0],
            layers: vec![
                Dense {
                    n_in: 1,
                    n_out: 2,
                    w: vec![0.1, -3.0e-20],
                    b: vec![f32::MIN_POSITIVE, -0.0],
                },
                Dense {
                    n_in: 2,
                    n_out: 1,
                    w: vec![1.5, f32::MAX],
                    b: vec![0.3],
                },
            ],
            epoch_loss: vec![0.69],
            onehot: Vec::new(),
        });
        b
    }

    /// A file of format `version` (1 to 3: JSON only) holding `payload`.
    fn old_file(version: u32, payload: &serde_json::Value) -> Vec<u8> {
        let payload = serde_json::to_vec(payload).unwrap();
        let mut f = header(payload.len() as u64, crc32fast::hash(&payload)).to_vec();
        f[8..12].copy_from_slice(&version.to_le_bytes());
        f.extend_from_slice(&payload);
        f
    }

    #[test]
    fn mlp_arrays_are_binary_in_v5_base64_in_v2_and_arrays_in_v1_and_inspect() {
        let b = mlp_bundle();
        let bytes = b.to_bytes().unwrap();
        let p = Path::new("m.gfm");
        // The payload: the section's length, the section, then the JSON. The
        // global model comes first: `mean` and `std` (one f64, two places
        // each), the layers' f32s from place 4, `epoch_loss` at place 11.
        let payload = &bytes[HEADER..];
        let section_len = u64::from_le_bytes(payload[..8].try_into().unwrap()) as usize;
        let section = &payload[8..8 + section_len];
        assert_eq!(&section[..8], &0.25f64.to_le_bytes());
        assert_eq!(&section[16..20], &0.1f32.to_le_bytes());
        assert_eq!(&section[40..44], &0.3f32.to_le_bytes());
        assert_eq!(&section[44..52], &0.69f64.to_le_bytes());
        let text = std::str::from_utf8(&payload[8 + section_len..]).unwrap();
        assert!(
            text.contains(r#""mean":{"at":0,"n64":1},"std":{"at":2,"n64":1}"#),
            "{text}"
        );
        assert!(
            text.contains(r#""w":{"at":4,"n":2},"b":{"at":6,"n":2}"#),
            "{text}"
        );
        assert!(text.contains(r#""b":{"at":10,"n":1}"#), "{text}");
        assert!(text.contains(r#""epoch_loss":{"at":11,"n64":1}"#), "{text}");
        let back = ModelBundle::from_bytes(&bytes, p).unwrap();
        assert_eq!(back, b);
        // The readable view has number arrays.
        let FittedModel::Mlp(m) = &b.global.as_ref().unwrap().model else {
            unreachable!()
        };
        let v = b.global.as_ref().unwrap().model.to_json();
        assert_eq!(v["layers"][0]["n_out"], 2);
        assert_eq!(
            v["layers"][0]["w"][0].as_f64(),
            Some(m.layers[0].w[0] as f64)
        );
        assert_eq!(v["layers"][1]["b"][0].as_f64(), Some(0.3f32 as f64));
        // A version-2 file (base64 text, as serialised outside a section)
        // and a version-1 file (number arrays) load to the same bundle.
        let mut old = serde_json::to_value(&b).unwrap();
        assert_eq!(old["global"]["model"]["layers"][0]["w"], "zczMPcarDZ8=");
        old["format_version"] = 2.into();
        let loaded = ModelBundle::from_bytes(&old_file(2, &old), p).unwrap();
        assert_eq!(loaded.format_version, 2);
        assert_eq!(loaded.global, b.global);
        old["format_version"] = 1.into();
        old["global"]["model"] = v;
        let loaded = ModelBundle::from_bytes(&old_file(1, &old), p).unwrap();
        assert_eq!(loaded.format_version, 1);
        assert_eq!(
            loaded.global.as_ref().unwrap().model,
            b.global.as_ref().unwrap().model
        );
        // A section length past the payload, or a reference past the
        // section, is a corrupt file.
        let damaged = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut payload = bytes[HEADER..].to_vec();
            f(&mut payload);
            let mut file = header(payload.len() as u64, crc32fast::hash(&payload)).to_vec();
            file.extend_from_slice(&payload);
            ModelBundle::from_bytes(&file, p).unwrap_err().to_string()
        };
        let e = damaged(&|pl| pl[..8].copy_from_slice(&(1u64 << 40).to_le_bytes()));
        assert!(
            e.contains("binary section of 1099511627776 bytes does not fit"),
            "{e}"
        );
        let shorter = (section_len as u64 - 4).to_le_bytes();
        let e = damaged(&|pl| pl[..8].copy_from_slice(&shorter));
        assert!(e.contains("corrupt"), "{e}");
        let e = damaged(&|pl| {
            let at = pl.windows(7).position(|w| w == br#""at":10"#).unwrap();
            pl[at + 5] = b'9';
        });
        let places = section_len / 4;
        assert!(places < 90, "{places}");
        assert!(
            e.contains(&format!("outside the file's {places} floats")),
            "{e}"
        );
    }

    #[test]
    fn saved_file_is_to_bytes_and_loads() {
        for b in [bundle(), mlp_bundle()] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("m.gfm");
            b.save(&path).unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), b.to_bytes().unwrap());
            assert_eq!(ModelBundle::load(&path).unwrap(), b);
            // Saving over a file replaces it whole (no tail of a longer file left).
            std::fs::write(&path, vec![b'x'; 1 << 16]).unwrap();
            b.save(&path).unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), b.to_bytes().unwrap());
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        }
    }

    #[test]
    fn payload_in_chunks_is_the_whole_encoding() {
        for mut b in [bundle(), mlp_bundle()] {
            b.summary = serde_json::json!({"groups": 7, "passes": 1});
            let model = b.global.as_ref().unwrap().model.clone();
            for n in [0, 1, 2, 3, 7] {
                b.groups = (0..n)
                    .map(|i| GroupEntry {
                        key: vec![Some(format!("g{i}")), None],
                        n_train: i,
                        n_valid: 2 * i,
                        route: if i % 3 == 0 {
                            Route::Global
                        } else {
                            Route::Own
                        },
                        fallback: (i % 3 == 0).then(|| "too few rows".into()),
                        config: (i % 3 != 0).then_some(i % 2),
                        model: (i % 3 != 0).then(|| model.clone()),
                        valid: Scores {
                            logloss: Some(0.1 * i as f64),
                            auc: None,
                            rmse: None,
                        },
                        valid_by_config: vec![0.5, 1.0 / (i + 1) as f64],
                        iterations: i as u32,
                        valid_global: (i % 3 != 0).then_some(0.25),
                        train_s: Some(0.5 * i as f64),
                    })
                    .collect();
                let mut section = Vec::new();
                let whole = floats::collect(0, &mut section, || serde_json::to_vec(&b).unwrap());
                for chunk in [1, 2, 5] {
                    let mut out = Vec::new();
                    let mut pieces = Vec::new();
                    b.write_payload(
                        &mut out,
                        &mut |at, bytes| {
                            assert_eq!(at, pieces.len() / 4);
                            pieces.extend_from_slice(bytes);
                            Ok(())
                        },
                        chunk,
                    )
                    .unwrap();
                    assert_eq!(out, whole, "{n} groups in chunks of {chunk}");
                    assert_eq!(pieces, section, "{n} groups in chunks of {chunk}");
                }
            }
        }
    }
}
