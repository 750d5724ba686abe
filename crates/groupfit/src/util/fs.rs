//! Files written whole or not at all: a temporary file beside the target,
//! renamed into place.

use std::path::Path;

use crate::error::{GroupfitError, Result};

/// The temporary file [`write_atomic`] writes before renaming it to `path`.
fn temp_path(path: &Path) -> Result<std::path::PathBuf> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| GroupfitError::arg(format!("'{}' is not a file path", path.display())))?;
    Ok(dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    )))
}

/// Checks, before a long run, that [`write_atomic`] could write `path`:
/// creates and removes its temporary file, and refuses a directory.
pub fn check_writable(path: &Path) -> Result<()> {
    if path.is_dir() {
        return Err(GroupfitError::io(
            "write",
            path,
            std::io::Error::new(std::io::ErrorKind::IsADirectory, "it is a directory"),
        ));
    }
    let tmp = temp_path(path)?;
    std::fs::File::create(&tmp).map_err(|e| GroupfitError::io("create", path, e))?;
    let _ = std::fs::remove_file(&tmp);
    Ok(())
}

/// Writes a file through `write` into a temporary file beside `path`, then
/// renames it into place; on any error the temporary file is removed and
/// `path` is untouched.
pub fn write_atomic(
    path: &Path,
    write: impl FnOnce(&mut std::fs::File) -> Result<()>,
) -> Result<()> {
    let tmp = temp_path(path)?;
    let result = (|| {
        let mut f =
            std::fs::File::create(&tmp).map_err(|e| GroupfitError::io("create", path, e))?;
        write(&mut f)?;
        f.sync_all()
            .map_err(|e| GroupfitError::io("write", path, e))?;
        std::fs::rename(&tmp, path).map_err(|e| GroupfitError::io("write", path, e))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn atomic_write_leaves_nothing_on_error() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.bin");
        let r = write_atomic(&target, |_| Err(GroupfitError::arg("boom")));
        assert!(r.is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        write_atomic(&target, |f| {
            f.write_all(b"ok")
                .map_err(|e| GroupfitError::io("write", &target, e))
        })
        .unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"ok");
    }
}
