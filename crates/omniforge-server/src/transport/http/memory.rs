//! Giving freed heap back to the system after sessions close (issue 11, finding 4).
//!
//! glibc's allocator keeps freed memory in its arenas: after 5,000 sessions were opened and
//! closed, RSS stayed at its peak though every session's memory was free. `malloc_trim(0)`
//! returns the free pages of every arena. Other C libraries (musl) return memory on their own;
//! there this does nothing.
//!
//! The one `unsafe` block of this crate, kept here alone.
#![allow(unsafe_code)]

/// Returns the allocator's free memory to the system, where the C library allows it (after
/// sessions expire; after the catalog's first load, whose decoded store rows are freed).
pub(crate) fn release_free_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `malloc_trim` takes a plain integer (the padding to keep), touches only
        // the allocator's own free lists under its own locks, and is documented as safe to
        // call at any time from any thread.
        let _released = unsafe { libc::malloc_trim(0) };
    }
}
