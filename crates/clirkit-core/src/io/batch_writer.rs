//! One file written atomically from batches of bytes produced while it is written (a fused run,
//! formatted in parallel batch after batch): through direct I/O from aligned buffers on a thread
//! of its own where the file system states its alignments, otherwise buffered with writeback
//! started per batch; the temporary file is fsynced before the atomic rename either way.

use crate::error::Result;
use crate::io::atomic::{write_file_with, DIRECT_BLOCK};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// A sink for the file's text, batch after batch.
pub type Emit<'a> = dyn FnMut(&[Vec<u8>]) -> std::io::Result<()> + Send + 'a;

/// Create `path` atomically with the text `write_text` hands to its sink.
///
/// Where the file system has direct I/O, the batches go from this process's buffers
/// straight to the disk ([`write_direct`]) while the next batches are formatted: no copy into the
/// page cache, and the final fsync has nothing left to write. Elsewhere each batch written is
/// sent on to the disk at once ([`crate::io::atomic::AtomicFile::start_writeback`]), so that the disk writes
/// while the next batches are formatted there too.
pub fn write_batches_atomically(
    path: impl AsRef<Path>,
    write_text: impl FnOnce(&mut Emit) -> std::io::Result<()>,
) -> Result<()> {
    write_file_with(path, |file| {
        if let Some(direct) = file.direct_file()? {
            return write_direct(direct, write_text);
        }
        write_text(&mut |texts: &[Vec<u8>]| {
            texts.iter().try_for_each(|text| file.write_all(text))?;
            file.start_writeback()
        })?;
        file.flush()
    })
}

/// One aligned block of [`write_direct`]'s buffers.
#[derive(Clone, Copy)]
#[repr(C, align(4096))]
struct Block([u8; DIRECT_BLOCK]);

/// Write the text that `write_text` hands to its sink through a file switched to direct I/O
/// ([`crate::io::atomic::AtomicFile::direct_file`]). Each formatted batch is gathered in an
/// aligned buffer and its whole blocks are handed to a thread of their own that writes them,
/// so both formatting threads keep formatting while the disk writes (two buffers take turns);
/// the bytes of a last partial block are carried to the next batch, and at the end written
/// padded to a block, the file then cut to its exact length.
fn write_direct(
    file: &std::fs::File,
    write_text: impl FnOnce(&mut Emit) -> std::io::Result<()>,
) -> std::io::Result<()> {
    std::thread::scope(|scope| {
        let (to_disk, to_write) = std::sync::mpsc::sync_channel::<(Vec<Block>, usize, u64)>(1);
        let (give_back, written) = std::sync::mpsc::channel::<Vec<Block>>();
        let disk = scope.spawn(move || -> std::io::Result<()> {
            for (mut blocks, len, offset) in to_write {
                file.write_all_at(&block_bytes(&mut blocks)[..len], offset)?;
                // The formatting side may be done and gone: nothing is waiting for it then.
                let _ = give_back.send(blocks);
            }
            Ok(())
        });
        let mut carry: Vec<u8> = Vec::with_capacity(DIRECT_BLOCK);
        let mut offset = 0u64;
        let (carried, written_to) = (&mut carry, &mut offset);
        let mut spare: Vec<Vec<Block>> = vec![Vec::new(), Vec::new()];
        let mut send = move |texts: &[Vec<u8>]| -> std::io::Result<()> {
            let disk_gone = || std::io::Error::other("the disk writer stopped");
            let mut blocks = match spare.pop() {
                Some(blocks) => blocks,
                None => written.recv().map_err(|_| disk_gone())?,
            };
            let total = carried.len() + texts.iter().map(Vec::len).sum::<usize>();
            let needed = total.div_ceil(DIRECT_BLOCK);
            if needed > blocks.len() {
                blocks.resize(needed, Block([0; DIRECT_BLOCK]));
            }
            let bytes = block_bytes(&mut blocks);
            bytes[..carried.len()].copy_from_slice(carried);
            let mut at = carried.len();
            for text in texts {
                bytes[at..at + text.len()].copy_from_slice(text);
                at += text.len();
            }
            let whole = total / DIRECT_BLOCK * DIRECT_BLOCK;
            carried.clear();
            carried.extend_from_slice(&bytes[whole..total]);
            to_disk
                .send((blocks, whole, *written_to))
                .map_err(|_| disk_gone())?;
            *written_to += whole as u64;
            Ok(())
        };
        let formatted = write_text(&mut send);
        // The sender goes with `send`, which ends the disk thread's loop.
        drop(send);
        let disk = disk.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        disk?;
        formatted?;
        // The bytes of the last partial block, padded (the padding is cut off below).
        if !carry.is_empty() {
            let mut last = [Block([0; DIRECT_BLOCK])];
            block_bytes(&mut last)[..carry.len()].copy_from_slice(&carry);
            file.write_all_at(block_bytes(&mut last), offset)?;
        }
        file.set_len(offset + carry.len() as u64)
    })
}

fn block_bytes(blocks: &mut [Block]) -> &mut [u8] {
    let len = std::mem::size_of_val(blocks);
    // SAFETY: `Block` is a plain byte array whose size equals its alignment, so the blocks are
    // `len` contiguous initialized bytes, borrowed mutably for as long as `blocks` is.
    unsafe { std::slice::from_raw_parts_mut(blocks.as_mut_ptr().cast::<u8>(), len) }
}
