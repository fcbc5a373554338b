//! The one worker-thread convention: `threads = 0` means all cores (rayon's default, which
//! `RAYON_NUM_THREADS` overrides), any other number that many workers. A pool that cannot start
//! is [`Error::ThreadPool`], never a silent fallback to fewer threads.

use crate::error::{Error, Result};

/// A rayon pool of `threads` workers (0 = all cores).
pub fn pool(threads: usize) -> Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Error::ThreadPool {
            threads,
            message: e.to_string(),
        })
}

/// Run `f` on a pool of `threads` workers (0 = all cores); `f` gets the pool's size.
pub fn install<T: Send>(threads: usize, f: impl FnOnce(usize) -> T + Send) -> Result<T> {
    let pool = pool(threads)?;
    let size = pool.current_num_threads();
    Ok(pool.install(|| f(size)))
}

/// Free `value` on a thread of its own: handing a large buffer's pages back to the kernel takes
/// time that the caller, which is done with it, need not wait for. Should no thread start, it
/// is freed here.
pub fn drop_in_background<T: Send + 'static>(value: T) {
    let _ = std::thread::Builder::new()
        .name("clirkit-free".into())
        .spawn(move || drop(value));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_means_every_core_and_other_counts_are_exact() {
        assert_eq!(
            install(3, |n| (n, rayon::current_num_threads())).unwrap(),
            (3, 3)
        );
        let all = install(0, |n| n).unwrap();
        assert!(all >= 1);
        assert_eq!(
            all,
            rayon::ThreadPoolBuilder::new()
                .build()
                .unwrap()
                .current_num_threads()
        );
    }
}
