//! Opening an index as one consistent snapshot while another process may be rebuilding it.
//!
//! A committed index directory is never changed: a rebuild writes a new directory, swaps it in
//! under the same name ([`crate::io::atomic`]) and then deletes the old one. So a reader that
//! holds the directory open and opens every file relative to that handle sees exactly one build.
//! On Linux the handle is a directory descriptor and files are opened through
//! `/proc/self/fd/<fd>/<name>`, which lets every index kind keep its path-based opening code. The
//! only way such an open fails because of a rebuild is that the held (old) directory was deleted
//! meanwhile; the name then points at another directory, and the open starts over.
//!
//! As a second line of defence (and the only one where `/proc` is missing), every file's size
//! and header CRC are compared with the digests the manifest records ([`crate::io::manifest`]),
//! so a file of another build is an error (and a retry while the directory is being replaced),
//! never a silently mixed index.

use crate::error::{Error, Result};
use crate::io::checksum;
use crate::io::index_dir::{read_manifest_text, MANIFEST};
use crate::io::manifest;
use std::fs::File;
use std::path::{Path, PathBuf};

/// How many times an open restarts because the directory was replaced under it.
const ATTEMPTS: usize = 100;

/// The index directory, held open for the duration of one open attempt.
struct Held {
    /// The path the index files are opened under: `/proc/self/fd/<fd>` or the directory itself.
    root: PathBuf,
    /// Which directory was opened (device, inode), to tell whether its name moved on since.
    identity: Option<(u64, u64)>,
    _handle: Option<File>,
}

#[cfg(unix)]
fn identity(meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn identity(_meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    None
}

impl Held {
    fn open(dir: &Path) -> Held {
        #[cfg(target_os = "linux")]
        if let Ok(handle) = File::open(dir) {
            use std::os::fd::AsRawFd;
            let root = PathBuf::from(format!("/proc/self/fd/{}", handle.as_raw_fd()));
            if let (Ok(meta), true) = (handle.metadata(), root.join(".").is_dir()) {
                return Held {
                    root,
                    identity: identity(&meta),
                    _handle: Some(handle),
                };
            }
        }
        Held {
            root: dir.to_path_buf(),
            identity: std::fs::metadata(dir).ok().as_ref().and_then(identity),
            _handle: None,
        }
    }

    /// Whether `dir` now names another directory than the one held (or none).
    fn replaced(&self, dir: &Path) -> bool {
        let now = std::fs::metadata(dir).ok();
        self.identity.is_some() && now.as_ref().and_then(identity) != self.identity
    }
}

/// Every file the manifest records has the recorded size and header CRC (one small read each).
fn check_files(root: &Path) -> Result<()> {
    let path = root.join(MANIFEST);
    let text = read_manifest_text(&path)?;
    let meta: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| Error::format(&path, format!("unreadable manifest: {e}")))?;
    for (name, digest) in manifest::recorded_files(root, &meta)? {
        checksum::check_recorded(&root.join(name), &digest)?;
    }
    Ok(())
}

/// Open the index at `dir` with `open`, which is handed the path to open its files under, as one
/// consistent snapshot (see the module note). Errors name files under `dir`.
pub fn open<T>(dir: &Path, mut open: impl FnMut(&Path) -> Result<T>) -> Result<T> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let held = Held::open(dir);
        let opened = open(&held.root).and_then(|index| check_files(&held.root).map(|()| index));
        match opened {
            Ok(index) => return Ok(index),
            Err(_) if attempt < ATTEMPTS && held.replaced(dir) => continue,
            Err(e) => return Err(e.relocated(&held.root, dir)),
        }
    }
}

/// [`open`] for an opener that also takes the name `dir` the index is opened by (the snapshot's
/// root first), for an index that remembers where it was opened from.
pub fn open_named<T>(dir: &Path, mut open: impl FnMut(&Path, &Path) -> Result<T>) -> Result<T> {
    self::open(dir, |root| open(root, dir))
}
