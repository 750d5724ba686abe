//! Files written whole or not at all: a temporary file beside the target,
//! renamed into place. The temporary files being written are known
//! ([`remove_temporaries`] removes them when the process is interrupted),
//! and one left by a killed process is removed by the next write beside it
//! once it is an hour old.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crate::error::{GroupfitError, Result};

/// The temporary files being written, and whether the process is being
/// interrupted (then no temporary file is renamed into place).
struct Temporaries {
    paths: Vec<PathBuf>,
    interrupted: bool,
}

static TEMPORARIES: Mutex<Temporaries> = Mutex::new(Temporaries {
    paths: Vec::new(),
    interrupted: false,
});

fn temporaries() -> MutexGuard<'static, Temporaries> {
    TEMPORARIES.lock().unwrap_or_else(|e| e.into_inner())
}

/// For a process that is being interrupted (SIGINT, SIGTERM): removes every
/// temporary file being written and keeps any from being renamed into
/// place, so the outputs are as they were. Returns with the registry
/// locked: the caller exits the process while holding the guard.
pub fn remove_temporaries() -> impl Drop {
    let mut t = temporaries();
    t.interrupted = true;
    for p in t.paths.drain(..) {
        let _ = std::fs::remove_file(p);
    }
    t
}

/// A temporary file older than this, beside an output, was left by a
/// killed process: the next write of that output removes it.
pub const STALE: Duration = Duration::from_secs(3600);

/// Removes the temporary files of `path` ([`temp_path`]'s `.NAME.tmp-PID`)
/// older than [`STALE`]: what a killed run left.
fn remove_stale(path: &Path) {
    let (Some(dir), Some(name)) = (
        temp_path(path)
            .ok()
            .and_then(|t| t.parent().map(Path::to_path_buf)),
        path.file_name(),
    ) else {
        return;
    };
    let prefix = format!(".{}.tmp-", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    for entry in entries.flatten() {
        let stale = entry.file_name().to_string_lossy().starts_with(&prefix)
            && entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > STALE));
        if stale {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

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
    remove_stale(path);
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
    remove_stale(path);
    temporaries().paths.push(tmp.clone());
    let result = (|| {
        let mut f =
            std::fs::File::create(&tmp).map_err(|e| GroupfitError::io("create", path, e))?;
        write(&mut f)?;
        f.sync_all()
            .map_err(|e| GroupfitError::io("write", path, e))?;
        // Under the lock: an interrupted process renames nothing.
        let t = temporaries();
        if t.interrupted {
            return Err(GroupfitError::io("write", path, "interrupted"));
        }
        std::fs::rename(&tmp, path).map_err(|e| GroupfitError::io("write", path, e))
    })();
    let mut t = temporaries();
    t.paths.retain(|p| p != &tmp);
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
    fn a_write_removes_temporaries_older_than_an_hour() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.bin");
        let old = dir.path().join(".out.bin.tmp-4242");
        let fresh = dir.path().join(".out.bin.tmp-4343");
        let other = dir.path().join(".other.bin.tmp-4242");
        for p in [&old, &fresh, &other] {
            std::fs::write(p, b"left by a killed run").unwrap();
        }
        let two_hours_ago = std::time::SystemTime::now() - 2 * STALE;
        for p in [&old, &other] {
            let f = std::fs::File::options().write(true).open(p).unwrap();
            f.set_modified(two_hours_ago).unwrap();
        }
        write_atomic(&target, |f| {
            f.write_all(b"ok")
                .map_err(|e| GroupfitError::io("write", &target, e))
        })
        .unwrap();
        // the old temporary of this output goes; a fresh one (a run still
        // writing) and another output's stay
        assert!(!old.exists() && fresh.exists() && other.exists());
        assert_eq!(std::fs::read(&target).unwrap(), b"ok");
    }

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
