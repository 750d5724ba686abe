//! CSV files in and out: a header row, then one record per line; a name
//! ending in `.csv.gz` is gzip-compressed.
//!
//! * [`is_csv`] says whether a path names a CSV file (`.csv`, `.csv.gz`);
//!   every other file is Parquet.
//! * [`csv_schema`] infers a file's column types from every record (one
//!   pass). The result is remembered for the file's size and modification
//!   time, so the read that follows does not infer again.
//! * [`read_csv`] decodes some of its columns into one record batch (a
//!   second pass, arrow-csv's decoder, with the inferred types).
//! * [`write_csv`] writes a batch as CSV, atomically.
//!
//! Types: a column whose values are all integers is `Int64`; integers and
//! decimals (also `NaN`, `inf`) make `Float64`; `true`/`false` make
//! `Boolean`; anything else is `Utf8`. An empty field is a null. A column
//! without a value is `Float64`, all null. Since every record is seen, the
//! decoder never meets a value its type cannot hold.
//!
//! A record with more or fewer fields than the header, or with invalid
//! UTF-8, is a [`GroupfitError::Csv`] naming the file and the line.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::RecordBatch;
use arrow_cast::parse::Parser;
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef};

use crate::error::{GroupfitError, Result};
use crate::util::fs::write_atomic;

/// Records per batch while decoding (the batches are concatenated).
const BATCH_ROWS: usize = 1 << 16;

/// Read buffer size.
const BUFFER: usize = 1 << 20;

/// Inferred schemas remembered (the most recent first).
const REMEMBERED: usize = 8;

/// Whether `path` names a CSV file: its name ends in `.csv` or `.csv.gz`
/// (any case).
pub fn is_csv(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    name.ends_with(".csv") || name.ends_with(".csv.gz")
}

/// Whether `path` names a gzip-compressed CSV file (`.csv.gz`).
fn is_gzip(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().to_ascii_lowercase().ends_with(".gz"))
}

/// The file's bytes, decompressed for `.csv.gz`.
fn open(path: &Path) -> Result<Box<dyn BufRead + Send>> {
    let file = File::open(path).map_err(|e| GroupfitError::io("read", path, e))?;
    let raw = BufReader::with_capacity(BUFFER, file);
    Ok(if is_gzip(path) {
        Box::new(BufReader::with_capacity(
            BUFFER,
            flate2::bufread::MultiGzDecoder::new(raw),
        ))
    } else {
        Box::new(raw)
    })
}

/// What the values of a column seen so far can all be read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// No value yet (only empty fields).
    Empty,
    Int,
    Float,
    Bool,
    Text,
}

impl Kind {
    /// The kind of a column holding the values of `self` and then `value`
    /// (not empty). Each check is arrow-csv's own parser, so the decoder
    /// reads every value of the column.
    fn and(self, value: &str) -> Kind {
        match self {
            Kind::Text => Kind::Text,
            Kind::Empty | Kind::Int if Int64Type::parse(value).is_some() => Kind::Int,
            Kind::Empty | Kind::Int | Kind::Float if is_integer_text(value) => {
                // An integer too large for Int64 (an id, say) stays text,
                // rather than a float that would merge neighbouring ids.
                if self == Kind::Float {
                    Kind::Float
                } else {
                    Kind::Text
                }
            }
            Kind::Empty | Kind::Int | Kind::Float
                if is_decimal(value.as_bytes()) || Float64Type::parse(value).is_some() =>
            {
                Kind::Float
            }
            Kind::Empty | Kind::Bool if is_bool(value) => Kind::Bool,
            _ => Kind::Text,
        }
    }

    fn data_type(self) -> DataType {
        match self {
            Kind::Empty | Kind::Float => DataType::Float64,
            Kind::Int => DataType::Int64,
            Kind::Bool => DataType::Boolean,
            Kind::Text => DataType::Utf8,
        }
    }
}

/// Digits with an optional sign (and surrounding blanks, as arrow's parsers
/// allow).
fn is_integer_text(value: &str) -> bool {
    let v = value.trim_ascii().as_bytes();
    let digits = v.strip_prefix(b"-").or(v.strip_prefix(b"+")).unwrap_or(v);
    !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
}

/// Whether `v` is a plain decimal number: digits with an optional sign,
/// point and exponent (`-1.5e-3`, `.5`, `5.`). Arrow's float parser reads
/// all of these; the check is only faster than parsing.
fn is_decimal(v: &[u8]) -> bool {
    let digits_from = |mut i: usize| {
        while v.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        i
    };
    let start = usize::from(matches!(v.first(), Some(b'+' | b'-')));
    let mut i = digits_from(start);
    let mut digits = i - start;
    if v.get(i) == Some(&b'.') {
        let end = digits_from(i + 1);
        digits += end - (i + 1);
        i = end;
    }
    if digits == 0 {
        return false;
    }
    if matches!(v.get(i), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(v.get(i + 1), Some(b'+' | b'-')));
        let end = digits_from(i + 1 + sign);
        if end == i + 1 + sign {
            return false;
        }
        i = end;
    }
    i == v.len()
}

/// The values arrow-csv reads as `Boolean`.
fn is_bool(value: &str) -> bool {
    value.eq_ignore_ascii_case("true") || value.eq_ignore_ascii_case("false")
}

/// A schema inferred from a file as it was.
struct Inferred {
    path: PathBuf,
    stamp: (u64, Option<SystemTime>),
    schema: SchemaRef,
    rows: usize,
}

/// The most recently inferred schemas.
static INFERRED: Mutex<Vec<Inferred>> = Mutex::new(Vec::new());

/// The file's size and modification time: a remembered schema is used only
/// while both are unchanged.
fn stamp(path: &Path) -> Result<(u64, Option<SystemTime>)> {
    let meta = std::fs::metadata(path).map_err(|e| GroupfitError::io("read", path, e))?;
    Ok((meta.len(), meta.modified().ok()))
}

/// The schema of a CSV file (see the module's description of the types),
/// and its number of records.
fn inferred(path: &Path) -> Result<(SchemaRef, usize)> {
    let stamp = stamp(path)?;
    {
        let cache = INFERRED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(hit) = cache.iter().find(|c| c.path == path && c.stamp == stamp) {
            return Ok((hit.schema.clone(), hit.rows));
        }
    }
    let (schema, rows) = infer(path)?;
    let mut cache = INFERRED.lock().unwrap_or_else(|e| e.into_inner());
    cache.retain(|c| c.path != path);
    cache.insert(
        0,
        Inferred {
            path: path.to_path_buf(),
            stamp,
            schema: schema.clone(),
            rows,
        },
    );
    cache.truncate(REMEMBERED);
    Ok((schema, rows))
}

/// Reads every record of a CSV file once: its header names the columns,
/// and each column's type fits all its values.
fn infer(path: &Path) -> Result<(SchemaRef, usize)> {
    let mut reader = ::csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(open(path)?);
    let header = reader.headers().map_err(|e| csv_error(path, e, 1))?.clone();
    if header.is_empty() {
        return Err(GroupfitError::Csv {
            path: path.display().to_string(),
            line: 1,
            reason: "the file is empty; a header row must name the columns".to_string(),
        });
    }
    let mut kinds = vec![Kind::Empty; header.len()];
    let mut record = ::csv::StringRecord::new();
    let mut rows = 0usize;
    let mut line = 1;
    loop {
        match reader.read_record(&mut record) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => return Err(csv_error(path, e, line + 1)),
        }
        line = record.position().map_or(line + 1, |p| p.line());
        for (kind, value) in kinds.iter_mut().zip(record.iter()) {
            if !value.is_empty() {
                *kind = kind.and(value);
            }
        }
        rows += 1;
    }
    let fields: Vec<Field> = header
        .iter()
        .zip(&kinds)
        .map(|(name, kind)| Field::new(name, kind.data_type(), true))
        .collect();
    Ok((Arc::new(Schema::new(fields)), rows))
}

/// A reading error of the `csv` crate: a [`GroupfitError::Csv`] naming the
/// line (`line` when the error does not say), or an I/O error.
fn csv_error(path: &Path, e: ::csv::Error, line: u64) -> GroupfitError {
    let csv = |line: u64, reason: String| GroupfitError::Csv {
        path: path.display().to_string(),
        line,
        reason,
    };
    match e.kind() {
        ::csv::ErrorKind::UnequalLengths {
            pos,
            expected_len,
            len,
        } => csv(
            pos.as_ref().map_or(line, |p| p.line()),
            format!("{len} fields, but the header has {expected_len}"),
        ),
        ::csv::ErrorKind::Utf8 { pos, err } => csv(
            pos.as_ref().map_or(line, |p| p.line()),
            format!("field {} is not valid UTF-8", err.field() + 1),
        ),
        ::csv::ErrorKind::Io(io) => GroupfitError::io("read", path, io),
        _ => csv(line, e.to_string()),
    }
}

/// The schema of a CSV file: the header's names, each column's type
/// inferred from all its values (every column nullable).
pub fn csv_schema(path: &Path) -> Result<SchemaRef> {
    Ok(inferred(path)?.0)
}

/// Reads columns `indices` (into [`csv_schema`]'s fields, in that order)
/// of a CSV file into one record batch.
pub fn read_csv(path: &Path, indices: &[usize]) -> Result<RecordBatch> {
    let (schema, rows) = inferred(path)?;
    let reader = arrow_csv::ReaderBuilder::new(schema.clone())
        .with_header(true)
        .with_batch_size(BATCH_ROWS)
        .with_projection(indices.to_vec())
        .build_buffered(open(path)?)
        .map_err(|e| decode_error(path, e))?;
    let projected = Arc::new(schema.project(indices).map_err(|e| decode_error(path, e))?);
    let batches = reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| decode_error(path, e))?;
    let batch = match batches.len() {
        0 => RecordBatch::new_empty(projected.clone()),
        1 => batches.into_iter().next().expect("one batch"),
        _ => arrow_select::concat::concat_batches(&projected, &batches)
            .map_err(|e| decode_error(path, e))?,
    };
    if batch.num_rows() != rows {
        return Err(GroupfitError::io(
            "read",
            path,
            format!(
                "{} records, but {rows} a moment earlier; did the file change?",
                batch.num_rows()
            ),
        ));
    }
    Ok(batch)
}

/// Columns `indices` (into [`csv_schema`]'s fields, in that order) of a
/// CSV file, `rows` records at a time.
pub fn csv_batches(
    path: &Path,
    indices: &[usize],
    rows: usize,
) -> Result<impl Iterator<Item = Result<RecordBatch>> + Send + 'static> {
    let (schema, _) = inferred(path)?;
    let reader = arrow_csv::ReaderBuilder::new(schema)
        .with_header(true)
        .with_batch_size(rows.max(1))
        .with_projection(indices.to_vec())
        .build_buffered(open(path)?)
        .map_err(|e| decode_error(path, e))?;
    let path = path.to_path_buf();
    Ok(reader.map(move |b| b.map_err(|e| decode_error(&path, e))))
}

/// Writes the batches as one CSV file with a header row (gzip-compressed
/// for `.csv.gz`), atomically: the first error leaves no file. Nulls are
/// empty fields. `empty` gives the header when no batch comes.
pub fn write_csv_batches(
    path: &Path,
    empty: &RecordBatch,
    batches: impl Iterator<Item = Result<RecordBatch>>,
) -> Result<()> {
    let err = |e: &dyn std::fmt::Display| GroupfitError::io("write", path, e);
    write_atomic(path, |file| {
        let out = BufWriter::with_capacity(BUFFER, file);
        let mut out = if is_gzip(path) {
            let gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
            write_rows(gz, empty, batches, path)?
                .finish()
                .map_err(|e| err(&e))?
        } else {
            write_rows(out, empty, batches, path)?
        };
        out.flush().map_err(|e| err(&e))
    })
}

/// Writes the header and every batch's rows to `out` (`empty`'s header
/// when no batch comes), and hands it back.
fn write_rows<W: Write>(
    out: W,
    empty: &RecordBatch,
    batches: impl Iterator<Item = Result<RecordBatch>>,
    path: &Path,
) -> Result<W> {
    let err = |e: ArrowError| GroupfitError::io("write", path, e);
    let mut writer = arrow_csv::WriterBuilder::new().with_header(true).build(out);
    let mut any = false;
    for batch in batches {
        writer.write(&batch?).map_err(err)?;
        any = true;
    }
    if !any {
        writer.write(empty).map_err(err)?;
    }
    Ok(writer.into_inner())
}

/// An error of arrow-csv's decoder: a [`GroupfitError::Csv`] when it names
/// a line, else an I/O error. (Inference has read every record, so these
/// arise only when the file changed in between.)
fn decode_error(path: &Path, e: ArrowError) -> GroupfitError {
    let msg = e.to_string();
    // Parse errors count records from 0 at the header, so the line is one more.
    let line = number_after(&msg, " at line ")
        .map(|n| n + 1)
        .or_else(|| number_after(&msg, "for line "));
    match line {
        Some(line) => GroupfitError::Csv {
            path: path.display().to_string(),
            line,
            reason: msg,
        },
        None => GroupfitError::io("read", path, msg),
    }
}

/// The number right after the first `marker` in `text`.
fn number_after(text: &str, marker: &str) -> Option<u64> {
    let rest = &text[text.find(marker)? + marker.len()..];
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// Writes `batch` as CSV with a header row (gzip-compressed for `.csv.gz`),
/// atomically. Nulls are empty fields.
pub fn write_csv(path: &Path, batch: &RecordBatch) -> Result<()> {
    write_csv_batches(path, batch, std::iter::once(Ok(batch.clone())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::{Array, ArrayRef, Float64Array, Int64Array, StringArray};

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        if is_gzip(&path) {
            let mut enc = flate2::write::GzEncoder::new(
                File::create(&path).unwrap(),
                flate2::Compression::fast(),
            );
            enc.write_all(text.as_bytes()).unwrap();
            enc.finish().unwrap();
        } else {
            std::fs::write(&path, text).unwrap();
        }
        path
    }

    fn read_all(path: &Path) -> RecordBatch {
        let n = csv_schema(path).unwrap().fields().len();
        read_csv(path, &(0..n).collect::<Vec<_>>()).unwrap()
    }

    fn types(path: &Path) -> Vec<DataType> {
        csv_schema(path)
            .unwrap()
            .fields()
            .iter()
            .map(|f| f.data_type().clone())
            .collect()
    }

    #[test]
    fn names_csv_files_by_extension() {
        assert!(is_csv(Path::new("a/b.csv")));
        assert!(is_csv(Path::new("B.CSV")));
        assert!(is_csv(Path::new("x.csv.gz")));
        assert!(!is_csv(Path::new("x.parquet")));
        assert!(!is_csv(Path::new("x.gz")));
        assert!(!is_csv(Path::new("csv")));
    }

    #[test]
    fn infers_types_from_every_row() {
        let dir = tempfile::tempdir().unwrap();
        // x: integers, then a decimal late on; n: integers; t: text after
        // numbers; b: booleans; e: empty throughout; big: past Int64.
        let mut text = String::from("x,n,t,b,e,big\n");
        for i in 0..5000 {
            text.push_str(&format!("{i},{i},{i},true,,1\n"));
        }
        text.push_str("2.5,-7,abc,FALSE,,99999999999999999999\n");
        let path = write(dir.path(), "t.csv", &text);
        assert_eq!(
            types(&path),
            vec![
                DataType::Float64,
                DataType::Int64,
                DataType::Utf8,
                DataType::Boolean,
                DataType::Float64,
                DataType::Utf8,
            ]
        );
        let b = read_all(&path);
        assert_eq!(b.num_rows(), 5001);
        let x = b.column(0).as_primitive::<Float64Type>();
        assert_eq!((x.value(3), x.value(5000)), (3.0, 2.5));
        assert_eq!(b.column(1).as_primitive::<Int64Type>().value(5000), -7);
        assert_eq!(b.column(2).as_string::<i32>().value(5000), "abc");
        assert!(!b.column(3).as_boolean().value(5000));
        assert_eq!(b.column(4).null_count(), 5001);
        assert_eq!(
            b.column(5).as_string::<i32>().value(5000),
            "99999999999999999999"
        );
    }

    #[test]
    fn reads_the_float_spellings_it_infers() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            dir.path(),
            "f.csv",
            "v\n1.5\n-2e-3\n.5\n5.\n1E5\nNaN\nnan\ninf\n-inf\n+3\n 4 \n",
        );
        assert_eq!(types(&path), vec![DataType::Float64]);
        let b = read_all(&path);
        let v = b.column(0).as_primitive::<Float64Type>();
        assert_eq!(v.value(0), 1.5);
        assert_eq!(v.value(1), -2e-3);
        assert_eq!(v.value(3), 5.0);
        assert_eq!(v.value(4), 1e5);
        assert!(v.value(5).is_nan() && v.value(6).is_nan());
        assert_eq!((v.value(7), v.value(8)), (f64::INFINITY, f64::NEG_INFINITY));
        assert_eq!((v.value(9), v.value(10)), (3.0, 4.0));
    }

    #[test]
    fn plain_decimals_are_what_arrow_reads_as_floats() {
        let yes = [
            "0",
            "-0.0",
            "+1",
            "00012.5",
            "5.",
            ".5",
            "1.e5",
            ".5e-3",
            "1E+5",
            "1e999",
            "-1e-999",
            "0.12345678901234567890123456789",
            "123456789012345678901234567890",
        ];
        for v in yes {
            assert!(is_decimal(v.as_bytes()), "{v}");
            assert!(Float64Type::parse(v).is_some(), "{v}");
        }
        let no = [
            "", "+", "-", ".", "e5", ".e5", "1e", "1e+", "1.2.3", "--1", "1-", "1 ", " 1", "1,5",
            "0x10", "NaN", "inf", "1_000", "1e5.5",
        ];
        for v in no {
            assert!(!is_decimal(v.as_bytes()), "{v}");
        }
    }

    #[test]
    fn empty_fields_are_nulls_and_columns_come_in_the_order_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            dir.path(),
            "n.csv",
            "g,x,y\r\na,1.5,1\r\n,,0\r\n\"b,c\",2,\r\n",
        );
        let schema = csv_schema(&path).unwrap();
        assert_eq!(schema.field(1).name(), "x");
        let b = read_csv(&path, &[2, 0]).unwrap();
        assert_eq!(b.schema().field(0).name(), "y");
        assert_eq!(b.schema().field(1).name(), "g");
        let y = b.column(0).as_primitive::<Int64Type>();
        assert!(y.is_valid(1) && y.is_null(2));
        let g = b.column(1).as_string::<i32>();
        assert_eq!((g.value(0), g.is_null(1), g.value(2)), ("a", true, "b,c"));
        let b = read_csv(&path, &[1]).unwrap();
        let x = b.column(0).as_primitive::<Float64Type>();
        assert_eq!((x.value(0), x.is_null(1), x.value(2)), (1.5, true, 2.0));
    }

    #[test]
    fn reads_gzip_the_same_as_plain() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = String::from("g,x\n");
        for i in 0..200_000 {
            text.push_str(&format!("k{},{}\n", i % 7, i as f64 * 0.25));
        }
        let plain = write(dir.path(), "d.csv", &text);
        let gz = write(dir.path(), "d.csv.gz", &text);
        assert!(std::fs::metadata(&gz).unwrap().len() < std::fs::metadata(&plain).unwrap().len());
        let (a, b) = (read_all(&plain), read_all(&gz));
        assert_eq!(a.num_rows(), 200_000);
        assert_eq!(a, b);
    }

    #[test]
    fn a_header_only_file_has_no_rows_and_an_empty_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "h.csv", "g,x\n");
        let b = read_all(&path);
        assert_eq!((b.num_rows(), b.num_columns()), (0, 2));
        let path = write(dir.path(), "e.csv", "");
        let e = csv_schema(&path).unwrap_err().to_string();
        assert!(e.contains("e.csv") && e.contains("line 1"), "{e}");
    }

    #[test]
    fn a_ragged_line_is_an_error_naming_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "r.csv", "g,x,y\na,1,0\nb,2,1\nc,3\nd,4,1\n");
        let e = csv_schema(&path).unwrap_err();
        assert!(matches!(e, GroupfitError::Csv { line: 4, .. }), "{e:?}");
        let msg = e.to_string();
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        assert_eq!(
            msg,
            format!(
                "'{}' is not readable CSV at line 4: 2 fields, but the header has 3",
                path.display()
            )
        );
        // Too many fields, after a quoted field spanning two lines.
        let path = write(dir.path(), "r2.csv", "g,x\n\"a\nb\",1\nc,2,3\n");
        let msg = csv_schema(&path).unwrap_err().to_string();
        assert!(
            msg.contains("at line 4: 3 fields, but the header has 2"),
            "{msg}"
        );
        // In a compressed file too.
        let path = write(dir.path(), "r3.csv.gz", "g,x\na,1\nb\n");
        let msg = read_csv(&path, &[0]).unwrap_err().to_string();
        assert!(
            msg.contains("r3.csv.gz' is not readable CSV at line 3"),
            "{msg}"
        );
    }

    #[test]
    fn an_unparsable_line_is_an_error_naming_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("u.csv");
        std::fs::write(&path, b"g,x\na,1\nb,\xff\xfe\n").unwrap();
        let msg = csv_schema(&path).unwrap_err().to_string();
        assert!(
            msg.contains("u.csv' is not readable CSV at line 3: field 2 is not valid UTF-8"),
            "{msg}"
        );
        // A value the decoder cannot read as the inferred type (the file
        // changed after inference) names its line too.
        let e = decode_error(
            &path,
            ArrowError::ParseError(
                "Error while parsing value 'z' as type 'Int64' for column 1 at line 6. Row data: '[b,z]'"
                    .to_string(),
            ),
        );
        assert!(matches!(e, GroupfitError::Csv { line: 7, .. }), "{e:?}");
        // A damaged gzip stream is a read error naming the file.
        let path = dir.path().join("bad.csv.gz");
        std::fs::write(&path, b"not gzip at all").unwrap();
        let msg = csv_schema(&path).unwrap_err().to_string();
        assert!(
            msg.starts_with("cannot read '") && msg.contains("bad.csv.gz"),
            "{msg}"
        );
    }

    #[test]
    fn a_changed_file_is_inferred_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "c.csv", "g,x\na,1\n");
        assert_eq!(types(&path)[1], DataType::Int64);
        std::fs::write(&path, "g,x\na,1\nb,1.5\n").unwrap();
        assert_eq!(types(&path)[1], DataType::Float64);
        assert_eq!(read_all(&path).num_rows(), 2);
    }

    #[test]
    fn writes_what_it_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let g: ArrayRef = Arc::new(StringArray::from(vec![Some("a"), None, Some("x,y")]));
        let h: ArrayRef = Arc::new(Int64Array::from(vec![6, 7, 8]));
        let p: ArrayRef = Arc::new(Float64Array::from(vec![0.1, 1.0 / 3.0, -2.5e-300]));
        let batch = RecordBatch::try_from_iter([("g", g), ("h", h), ("p", p)]).unwrap();
        for name in ["p.csv", "p.csv.gz"] {
            let path = dir.path().join(name);
            write_csv(&path, &batch).unwrap();
            let back = read_all(&path);
            assert_eq!(back.num_rows(), 3);
            assert_eq!(back.column(0).as_ref(), batch.column(0).as_ref());
            assert_eq!(back.column(1).as_ref(), batch.column(1).as_ref());
            assert_eq!(back.column(2).as_ref(), batch.column(2).as_ref());
        }
        let text = std::fs::read_to_string(dir.path().join("p.csv")).unwrap();
        assert!(text.starts_with("g,h,p\na,6,0.1\n,7,"), "{text}");
        // An empty batch is a header.
        let path = dir.path().join("e.csv");
        write_csv(&path, &batch.slice(0, 0)).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "g,h,p\n");
        // Nothing but the files written is left behind.
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["e.csv", "p.csv", "p.csv.gz"]);
    }
}
