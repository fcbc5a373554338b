//! Atomic writes. A file is written to a temporary sibling and renamed over its final name; an
//! index directory is built in a temporary sibling directory and renamed into place once complete.
//! A crash therefore never leaves a half-written file or index under the final name. Files are
//! synced before their rename and directories after it (a rename lives in its directory, and a
//! crash soon after it could otherwise undo it); an existing index is swapped for the new one in
//! one atomic exchange where the system has it (Linux), so its name never points at nothing.

use crate::error::{Error, IoContext, Result};
use crate::io::index_dir::{is_clirkit_index, MANIFEST};
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

fn unique_suffix() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{}-{}-{}",
        std::process::id(),
        nanos,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// The tag of a temporary build directory: `.NAME.building-PID-...`.
const BUILDING: &str = "building";
/// The file in a temporary build directory naming the process that builds there, so the next
/// build can tell an abandoned directory (its process is gone) from one still in use, and one
/// clirkit made from anything else that happens to share the name.
const BUILD_OWNER: &str = ".clirkit-build-owner";

/// Remove the temporary build directories of `final_path` whose process died (kill -9, power
/// loss) before it could remove them: only directories holding the owner file with the pid
/// their name starts with, and only when no process has that pid. Best effort: a directory that
/// cannot be read or removed is left as it is.
fn remove_abandoned_builds(final_path: &Path) {
    let Some(name) = final_path.file_name() else {
        return;
    };
    let prefix = format!(".{}.{BUILDING}-", name.to_string_lossy());
    let Ok(entries) = fs::read_dir(parent_dir(final_path)) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(rest) = file_name.to_str().and_then(|n| n.strip_prefix(&prefix)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let dir = entry.path();
        let owner = fs::read_to_string(dir.join(BUILD_OWNER)).unwrap_or_default();
        if owner.trim() == pid.to_string() && !process_exists(pid) {
            let _ = fs::remove_dir_all(&dir);
        }
    }
}

/// Whether a process with `pid` exists; `true` where this cannot be told (nothing is removed).
fn process_exists(pid: u32) -> bool {
    if cfg!(target_os = "linux") {
        Path::new("/proc").join(pid.to_string()).exists()
    } else {
        true
    }
}

fn sibling(path: &Path, tag: &str) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".to_string());
    path.with_file_name(format!(".{name}.{tag}-{}", unique_suffix()))
}

/// The directory holding `path` (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Make a directory's entries (new names, renames) durable.
fn sync_dir(dir: &Path) -> Result<()> {
    #[cfg(unix)]
    File::open(dir).and_then(|d| d.sync_all()).at(dir)?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Swap two existing paths in one atomic step; `Ok(false)` where the system or file system
/// cannot (the caller then renames twice).
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> std::io::Result<bool> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c_path = |p: &Path| CString::new(p.as_os_str().as_bytes()).map_err(std::io::Error::other);
    let (a, b) = (c_path(a)?, c_path(b)?);
    // SAFETY: both are NUL-terminated paths that outlive the call.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if rc == 0 {
        return Ok(true);
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EINVAL) | Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP) => Ok(false),
        _ => Err(err),
    }
}

#[cfg(not(target_os = "linux"))]
fn exchange(_a: &Path, _b: &Path) -> std::io::Result<bool> {
    Ok(false)
}

/// The block size that writes through [`AtomicFile::direct_file`] are aligned to: a multiple of
/// every device's logical block size and of the page size.
pub const DIRECT_BLOCK: usize = 4096;

/// A file being written; it appears under its final name only on [`AtomicFile::commit`].
pub struct AtomicFile {
    final_path: PathBuf,
    tmp_path: PathBuf,
    writer: Option<BufWriter<File>>,
    /// Where the bytes not yet handed to [`AtomicFile::start_writeback`] begin.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    writeback_from: u64,
}

impl AtomicFile {
    pub fn create(path: impl AsRef<Path>) -> Result<Self> {
        let final_path = path.as_ref().to_path_buf();
        if let Some(parent) = final_path.parent() {
            if !parent.as_os_str().is_empty() {
                fs::create_dir_all(parent).at(parent)?;
            }
        }
        let tmp_path = sibling(&final_path, "tmp");
        let file = File::create(&tmp_path).at(&tmp_path)?;
        Ok(AtomicFile {
            final_path,
            tmp_path,
            writer: Some(BufWriter::with_capacity(1 << 20, file)),
            writeback_from: 0,
        })
    }

    pub fn writer(&mut self) -> &mut BufWriter<File> {
        self.writer.as_mut().expect("writer present until commit")
    }

    /// Flush what was written so far and have the system start writing it to disk now, in the
    /// background, so that [`AtomicFile::commit`]'s fsync waits only for the rest: a large file
    /// written in pieces then reaches the disk while the next pieces are being made. Durability
    /// is unchanged (commit still syncs the whole file); where the system has no such call
    /// (not Linux) this only flushes.
    pub fn start_writeback(&mut self) -> std::io::Result<()> {
        let writer = self.writer.as_mut().expect("writer present until commit");
        writer.flush()?;
        #[cfg(target_os = "linux")]
        {
            use std::io::Seek;
            use std::os::unix::io::AsRawFd;
            let file = writer.get_mut();
            let end = file.stream_position()?;
            // A hint only: an error it could report (a failed write) is reported by commit's
            // fsync, which every write goes through.
            // SAFETY: a plain system call on a file descriptor this struct owns.
            unsafe {
                libc::sync_file_range(
                    file.as_raw_fd(),
                    self.writeback_from as libc::off64_t,
                    (end - self.writeback_from) as libc::off64_t,
                    libc::SYNC_FILE_RANGE_WRITE,
                )
            };
            self.writeback_from = end;
        }
        Ok(())
    }

    /// Switch a file nothing was written to yet to direct I/O (`O_DIRECT`: writes go from the
    /// caller's buffers to the disk, bypassing the page cache) and return it for positioned
    /// writes. From then on every write must be of whole [`DIRECT_BLOCK`]-byte blocks, from
    /// [`DIRECT_BLOCK`]-aligned memory, at a [`DIRECT_BLOCK`]-aligned offset; the caller sets the
    /// final length with `set_len`. `None` (nothing changed) where something was written already,
    /// or the system or file system has no direct I/O or needs another alignment. Commit still
    /// fsyncs the file (its metadata, the disk's cache).
    pub fn direct_file(&mut self) -> std::io::Result<Option<&File>> {
        let writer = self.writer.as_mut().expect("writer present until commit");
        #[cfg(target_os = "linux")]
        if writer.buffer().is_empty() && writer.get_ref().metadata()?.len() == 0 {
            use std::os::unix::io::AsRawFd;
            let fd = writer.get_ref().as_raw_fd();
            // Only where the file system states its direct I/O alignments (Linux 6.1 on) and
            // whole blocks meet them: anywhere else writes stay buffered.
            // SAFETY: plain system calls on a file descriptor this struct owns, into a struct
            // they fill.
            let switched = unsafe {
                let mut stx: libc::statx = std::mem::zeroed();
                let aligned = |need: u32| DIRECT_BLOCK.is_multiple_of(need as usize);
                libc::statx(
                    fd,
                    c"".as_ptr(),
                    libc::AT_EMPTY_PATH,
                    libc::STATX_DIOALIGN,
                    &mut stx,
                ) == 0
                    && stx.stx_mask & libc::STATX_DIOALIGN != 0
                    && aligned(stx.stx_dio_mem_align)
                    && aligned(stx.stx_dio_offset_align)
                    && {
                        let flags = libc::fcntl(fd, libc::F_GETFL);
                        flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags | libc::O_DIRECT) == 0
                    }
            };
            if switched {
                return Ok(Some(writer.get_ref()));
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = writer;
        Ok(None)
    }

    /// Flush, fsync, rename into place and sync the directory.
    pub fn commit(mut self) -> Result<()> {
        let writer = self.writer.take().expect("writer present until commit");
        let file = writer
            .into_inner()
            .map_err(|e| Error::io(&self.tmp_path, e.into_error()))?;
        file.sync_all().at(&self.tmp_path)?;
        drop(file);
        fs::rename(&self.tmp_path, &self.final_path).at(&self.final_path)?;
        sync_dir(parent_dir(&self.final_path))
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.writer().write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.writer().flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.writer.is_some() {
            self.writer = None;
            let _ = fs::remove_file(&self.tmp_path);
        }
    }
}

/// Write a whole file atomically.
pub fn write_file(path: impl AsRef<Path>, bytes: &[u8]) -> Result<()> {
    write_file_with(path, |f| f.write_all(bytes))
}

/// Write a file atomically with `write`; the file appears only if every write succeeds.
pub fn write_file_with(
    path: impl AsRef<Path>,
    write: impl FnOnce(&mut AtomicFile) -> std::io::Result<()>,
) -> Result<()> {
    let path = path.as_ref();
    let mut file = AtomicFile::create(path)?;
    write(&mut file).map_err(|e| crate::io::id_text::write_error(path, e))?;
    file.commit()
}

/// An index directory under construction. Files go into a temporary sibling directory; on
/// [`AtomicDir::commit`] it replaces the final directory (only if that is empty or itself a
/// clirkit index: user files are never clobbered). Dropped without commit, it is removed.
pub struct AtomicDir {
    final_path: PathBuf,
    tmp_path: PathBuf,
    committed: bool,
}

impl AtomicDir {
    pub fn create(path: impl AsRef<Path>) -> Result<Self> {
        let final_path = path.as_ref().to_path_buf();
        check_replaceable(&final_path)?;
        if let Some(parent) = final_path.parent() {
            if !parent.as_os_str().is_empty() {
                fs::create_dir_all(parent).at(parent)?;
            }
        }
        remove_abandoned_builds(&final_path);
        let tmp_path = sibling(&final_path, BUILDING);
        fs::create_dir(&tmp_path).at(&tmp_path)?;
        write_file(
            tmp_path.join(BUILD_OWNER),
            std::process::id().to_string().as_bytes(),
        )?;
        Ok(AtomicDir {
            final_path,
            tmp_path,
            committed: false,
        })
    }

    /// Where to write the index's files for now.
    pub fn path(&self) -> &Path {
        &self.tmp_path
    }

    pub fn final_path(&self) -> &Path {
        &self.final_path
    }

    /// Write the manifest last, then move the directory into place: swapped with an existing
    /// index in one step where the system can, else the old index is moved aside first.
    pub fn commit(mut self, manifest_text: &str) -> Result<()> {
        let text = manifest_text;
        let owner = self.tmp_path.join(BUILD_OWNER);
        fs::remove_file(&owner).at(&owner)?;
        write_file(self.tmp_path.join(MANIFEST), text.as_bytes())?;
        check_replaceable(&self.final_path)?;
        // Where the old index went, if there was one: the temporary name after an exchange.
        let old = if !self.final_path.exists() {
            fs::rename(&self.tmp_path, &self.final_path).at(&self.final_path)?;
            None
        } else if exchange(&self.tmp_path, &self.final_path).at(&self.final_path)? {
            Some(self.tmp_path.clone())
        } else {
            let old = sibling(&self.final_path, "old");
            fs::rename(&self.final_path, &old).at(&self.final_path)?;
            fs::rename(&self.tmp_path, &self.final_path).at(&self.final_path)?;
            Some(old)
        };
        sync_dir(parent_dir(&self.final_path))?;
        if let Some(old) = old {
            fs::remove_dir_all(&old).at(&old)?;
        }
        self.committed = true;
        Ok(())
    }
}

impl Drop for AtomicDir {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_dir_all(&self.tmp_path);
        }
    }
}

fn check_replaceable(path: &Path) -> Result<()> {
    if !path.exists() {
        return Ok(());
    }
    if !path.is_dir() {
        return Err(Error::format(
            path,
            "exists and is not a directory; refusing to replace it with an index",
        ));
    }
    let is_index = is_clirkit_index(path);
    let is_empty = fs::read_dir(path).at(path)?.next().is_none();
    if is_index || is_empty {
        Ok(())
    } else {
        Err(Error::format(
            path,
            "exists and is not a clirkit index (no clirkit meta.json); refusing to replace it: \
             choose an empty or new directory",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::index_dir::read_manifest;
    use crate::io::temp_path;

    #[test]
    fn writes_around_writeback_and_direct_blocks_all_land() {
        let (_root, path) = temp_path("f");
        let mut file = AtomicFile::create(&path).unwrap();
        file.write_all(b"first ").unwrap();
        file.start_writeback().unwrap();
        file.write_all(b"second").unwrap();
        file.start_writeback().unwrap();
        file.commit().unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"first second");

        // Not for a file with bytes in it already: direct writes start at offset 0.
        let mut file = AtomicFile::create(&path).unwrap();
        file.write_all(b"x").unwrap();
        assert!(file.direct_file().unwrap().is_none());
        drop(file);

        let mut file = AtomicFile::create(&path).unwrap();
        let Some(direct) = file.direct_file().unwrap() else {
            eprintln!("no direct I/O on this file system");
            return;
        };
        #[repr(C, align(4096))]
        struct Aligned([u8; DIRECT_BLOCK]);
        let block = Aligned([b'x'; DIRECT_BLOCK]);
        std::os::unix::fs::FileExt::write_all_at(direct, &block.0, 0).unwrap();
        direct.set_len(10).unwrap();
        file.commit().unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"xxxxxxxxxx");
    }

    #[test]
    fn uncommitted_dir_leaves_nothing() {
        let (root, target) = temp_path("idx");
        {
            let d = AtomicDir::create(&target).unwrap();
            write_file(d.path().join("x"), b"partial").unwrap();
        }
        assert!(!target.exists());
        assert_eq!(fs::read_dir(root.path()).unwrap().count(), 0);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn builds_abandoned_by_dead_processes_are_removed_by_the_next() {
        let (root, target) = temp_path("idx");
        // A pid no process has: above the kernel's pid_max (at most 2^22).
        let dead = 1u32 << 23;
        let alive = std::process::id();
        let abandoned = root.path().join(format!(".idx.building-{dead}-1-0"));
        let in_use = root.path().join(format!(".idx.building-{alive}-1-0"));
        let not_ours = root.path().join(format!(".idx.building-{dead}-2-0"));
        let other_index = root.path().join(format!(".other.building-{dead}-1-0"));
        for dir in [&abandoned, &in_use, &not_ours, &other_index] {
            fs::create_dir(dir).unwrap();
            fs::write(dir.join("postings.bin"), b"x").unwrap();
        }
        for (dir, pid) in [(&abandoned, dead), (&in_use, alive), (&other_index, dead)] {
            fs::write(dir.join(BUILD_OWNER), pid.to_string()).unwrap();
        }
        let dir = AtomicDir::create(&target).unwrap();
        assert!(dir.path().join(BUILD_OWNER).exists());
        dir.commit(r#"{"format": "test"}"#).unwrap();
        assert!(!abandoned.exists());
        assert!(in_use.exists() && not_ours.exists() && other_index.exists());
        let files: Vec<_> = fs::read_dir(&target)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(files, [MANIFEST]);
    }

    #[test]
    fn exchange_swaps_two_directories() {
        let root = tempfile::tempdir().unwrap();
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        for (dir, text) in [(&a, "was a"), (&b, "was b")] {
            fs::create_dir(dir).unwrap();
            fs::write(dir.join("f"), text).unwrap();
        }
        if !exchange(&a, &b).unwrap() {
            eprintln!("this file system cannot exchange paths; commits rename twice here");
            return;
        }
        assert_eq!(fs::read_to_string(a.join("f")).unwrap(), "was b");
        assert_eq!(fs::read_to_string(b.join("f")).unwrap(), "was a");
    }

    #[test]
    fn committed_dir_replaces_old_index_but_not_user_files() {
        let (root, target) = temp_path("idx");
        for round in 0..2 {
            let d = AtomicDir::create(&target).unwrap();
            write_file(d.path().join("x"), format!("{round}").as_bytes()).unwrap();
            d.commit(r#"{"format": "clirkit-t", "version": 1}"#)
                .unwrap();
        }
        assert_eq!(fs::read_to_string(target.join("x")).unwrap(), "1");
        let names: Vec<_> = fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            names,
            ["idx"],
            "no temporary or old directory is left behind"
        );
        read_manifest(&target, "clirkit-t", 1).unwrap();
        let err = read_manifest(&target, "clirkit-t", 2)
            .unwrap_err()
            .to_string();
        assert!(err.contains("version 1"), "{err}");

        let user = root.path().join("mine");
        fs::create_dir(&user).unwrap();
        fs::write(user.join("notes.txt"), "keep").unwrap();
        assert!(AtomicDir::create(&user).is_err());
        // A `meta.json` alone does not make a directory an index.
        fs::write(user.join(MANIFEST), "{}").unwrap();
        let err = AtomicDir::create(&user).err().unwrap().to_string();
        assert!(err.contains("not a clirkit index"), "{err}");
        assert_eq!(fs::read_to_string(user.join("notes.txt")).unwrap(), "keep");
    }
}
