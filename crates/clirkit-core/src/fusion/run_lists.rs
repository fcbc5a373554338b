//! [`RunLists`], the input and output type of every fusion method: a run held compactly, with
//! the builder that checks and sorts it, and the allocation helpers that let a fused run be
//! written in place without paying for the pages it leaves unused.

use super::id_key::IdKey;
use crate::error::{Error, Result};
use crate::ranking::{Run, ScoredDoc};
use rustc_hash::FxHashSet;

/// A byte range in a [`RunLists`] arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub start: u32,
    pub len: u32,
}

/// One ranked document: its id key and its score.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct DocEntry {
    pub id: IdKey,
    pub score: f64,
}

/// One query: its id and the range of its documents in the entry array.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct QueryEntry {
    pub qid: Span,
    pub docs: std::ops::Range<usize>,
}

/// A run held compactly for fusion: queries in first-appearance order, each query's documents
/// in canonical order (score descending, then doc id descending).
///
/// Document ids are 16-byte keys ([`IdKey`]): ids of up to 15 bytes are held in the key itself,
/// longer ones (and query ids) in one byte arena. Entries outside every query's range are unused
/// slack (a fused run reserves room for the longest possible fused lists of its queries).
#[derive(Debug, Clone, Default)]
pub struct RunLists {
    // Visible to the fusion module: the run file reader and writer work on the parts.
    pub(super) arena: Vec<u8>,
    pub(super) queries: Vec<QueryEntry>,
    docs: Vec<DocEntry>,
}

impl RunLists {
    /// Number of queries.
    pub fn num_queries(&self) -> usize {
        self.queries.len()
    }

    /// Number of (query, document) entries.
    pub fn num_entries(&self) -> usize {
        self.queries.iter().map(|q| q.docs.len()).sum()
    }

    /// The id of query `q` (0-based, in run order).
    pub fn query_id(&self, q: usize) -> &str {
        text(self.bytes(self.queries[q].qid))
    }

    /// The documents of query `q` in canonical order, as (doc id, score).
    pub fn query_docs(&self, q: usize) -> impl ExactSizeIterator<Item = (&str, f64)> + '_ {
        self.doc_entries(q)
            .iter()
            .map(move |d| (text(self.doc_bytes(d)), d.score))
    }

    /// Build from a [`Run`] (its documents are re-sorted canonically).
    pub fn from_run(run: &Run) -> Result<Self> {
        let mut builder = RunListsBuilder::default();
        for (qid, docs) in &run.queries {
            builder.push_query(
                qid.as_bytes(),
                docs.iter().map(|d| (d.doc_id.as_bytes(), d.score)),
            )?;
        }
        Ok(builder.finish())
    }

    /// Convert to a [`Run`].
    pub fn to_run(&self) -> Run {
        let queries = (0..self.num_queries())
            .map(|q| {
                let docs = self
                    .query_docs(q)
                    .map(|(id, s)| ScoredDoc::new(id, s))
                    .collect();
                (self.query_id(q).to_string(), docs)
            })
            .collect();
        Run { queries }
    }

    pub(crate) fn bytes(&self, span: Span) -> &[u8] {
        &self.arena[span.start as usize..(span.start + span.len) as usize]
    }

    /// The bytes of a document id of this run.
    pub(crate) fn doc_bytes<'a>(&'a self, doc: &'a DocEntry) -> &'a [u8] {
        doc.id.bytes(&self.arena)
    }

    /// The byte arena of query ids and long document ids.
    pub(crate) fn arena(&self) -> &[u8] {
        &self.arena
    }

    pub(crate) fn query_entries(&self) -> &[QueryEntry] {
        &self.queries
    }

    pub(crate) fn doc_entries(&self, q: usize) -> &[DocEntry] {
        &self.docs[self.queries[q].docs.clone()]
    }

    pub(crate) fn from_parts(
        arena: Vec<u8>,
        queries: Vec<QueryEntry>,
        docs: Vec<DocEntry>,
    ) -> Self {
        RunLists {
            arena,
            queries,
            docs,
        }
    }
}

fn text(bytes: &[u8]) -> &str {
    // Arenas and keys hold only ids copied from `&str`s or from UTF-8-validated files.
    std::str::from_utf8(bytes).expect("ids are UTF-8")
}

/// `n` entries, allocated zeroed so that pages never written (fusion slack) cost nothing.
pub(crate) fn zeroed_entries(n: usize) -> Vec<DocEntry> {
    if n == 0 {
        return Vec::new();
    }
    let layout = std::alloc::Layout::array::<DocEntry>(n).expect("entry array size overflows");
    // SAFETY: the allocation has `Vec<DocEntry>`'s layout for capacity `n` and comes from the
    // global allocator; all-zero bytes are a valid `DocEntry` (bytes and an f64 0.0).
    unsafe {
        let ptr = std::alloc::alloc_zeroed(layout) as *mut DocEntry;
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Vec::from_raw_parts(ptr, n, n)
    }
}

/// Map the pages of `entries`, fresh memory about to be written, in one system call instead
/// of one page fault per page: writing a fused run is mostly faulting in its pages, and on the
/// VM measured this took about a quarter off that (see benches/RESULTS.md, "Fusion vs ranx").
/// Linux 5.14 or later; where the call is missing or fails, the pages are faulted in as they are
/// written.
pub(crate) fn prefault(entries: &mut [DocEntry]) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as usize;
        let begin = entries.as_mut_ptr() as usize;
        let end = begin + std::mem::size_of_val(entries);
        // Whole pages only: the first, partly written one is already mapped.
        let first = begin.next_multiple_of(page);
        if end >= first + 2 * page {
            // SAFETY: the range lies inside `entries`' allocation (its last page may extend
            // past it, into memory of the same mapping); MADV_POPULATE_WRITE maps pages
            // without changing their contents.
            unsafe {
                libc::madvise(
                    first as *mut libc::c_void,
                    (end - first) & !(page - 1),
                    libc::MADV_POPULATE_WRITE,
                );
            }
        }
    }
}

/// Appends queries to a [`RunLists`], sorting each query's documents canonically and rejecting
/// duplicate documents, repeated queries, non-finite scores and arenas past 4 GiB.
#[derive(Default)]
pub struct RunListsBuilder {
    lists: RunLists,
    seen_queries: FxHashSet<Vec<u8>>,
}

impl RunListsBuilder {
    fn intern_query(&mut self, bytes: &[u8]) -> Result<Span> {
        let start = self.lists.arena.len();
        let end = start + bytes.len();
        if end > u32::MAX as usize {
            return Err(Error::invalid(
                "run too large: more than 4 GiB of query and document ids",
            ));
        }
        self.lists.arena.extend_from_slice(bytes);
        Ok(Span {
            start: start as u32,
            len: bytes.len() as u32,
        })
    }

    /// Add one query with its documents in any order.
    pub fn push_query<'a>(
        &mut self,
        qid: &[u8],
        docs: impl IntoIterator<Item = (&'a [u8], f64)>,
    ) -> Result<()> {
        let qid_text = String::from_utf8_lossy(qid).into_owned();
        if !self.seen_queries.insert(qid.to_vec()) {
            return Err(Error::invalid(format!("query '{qid_text}' given twice")));
        }
        let qid_span = self.intern_query(qid)?;
        let first = self.lists.docs.len();
        for (id, score) in docs {
            let doc = || String::from_utf8_lossy(id);
            if !score.is_finite() {
                return Err(Error::invalid(format!(
                    "query '{qid_text}', document '{}': score {score} is not finite",
                    doc()
                )));
            }
            let id = IdKey::encode(id, &mut self.lists.arena).map_err(|e| {
                Error::invalid(format!("query '{qid_text}', document '{}': {e}", doc()))
            })?;
            self.lists.docs.push(DocEntry { id, score });
        }
        let end = self.lists.docs.len();
        let RunLists { arena, docs, .. } = &mut self.lists;
        let list = &mut docs[first..end];
        sort_entries(arena, list);
        if let Some(dup) = first_duplicate(arena, list, &mut FxHashSet::default()) {
            return Err(Error::invalid(format!(
                "query '{qid_text}': document '{}' given twice",
                String::from_utf8_lossy(dup)
            )));
        }
        self.lists.queries.push(QueryEntry {
            qid: qid_span,
            docs: first..end,
        });
        Ok(())
    }

    pub fn finish(self) -> RunLists {
        self.lists
    }
}

/// Canonical order of two entries of one run.
#[inline]
fn entry_cmp(arena: &[u8], a: &DocEntry, b: &DocEntry) -> std::cmp::Ordering {
    b.score
        .total_cmp(&a.score)
        .then_with(|| b.id.cmp_ids(arena, &a.id, arena))
}

/// Sort one query's entries canonically; files written in canonical order skip the sort.
pub(crate) fn sort_entries(arena: &[u8], list: &mut [DocEntry]) {
    let sorted = list
        .windows(2)
        .all(|w| entry_cmp(arena, &w[0], &w[1]).is_le());
    if !sorted {
        list.sort_unstable_by(|a, b| entry_cmp(arena, a, b));
    }
}

/// The first doc id that occurs twice in `list`, if any; `seen` is scratch space, reused from
/// call to call. Inline keys are equal exactly when their ids are, so they are hashed as two
/// words; a list with a long id is checked on the ids' bytes.
pub(crate) fn first_duplicate<'a>(
    arena: &'a [u8],
    list: &'a [DocEntry],
    seen: &mut FxHashSet<[u64; 2]>,
) -> Option<&'a [u8]> {
    seen.clear();
    seen.reserve(list.len());
    for d in list {
        if !d.id.is_inline() {
            let mut seen_ids: FxHashSet<&[u8]> = FxHashSet::default();
            seen_ids.reserve(list.len());
            return list
                .iter()
                .map(|d| d.id.bytes(arena))
                .find(|id| !seen_ids.insert(id));
        }
        if !seen.insert(d.id.words()) {
            return Some(d.id.bytes(arena));
        }
    }
    None
}
