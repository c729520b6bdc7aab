//! glibc malloc's settings for serve mode, set once at startup before any thread exists: [`tune`]
//! bounds the arenas to [`ARENA_MAX`] and fixes the mmap and trim thresholds at [`THRESHOLD`].
//!
//! Why: glibc gives each thread that allocates under contention an arena of its own (up to eight per
//! core) and keeps what is freed inside it; and after the first large block is freed it raises its mmap
//! threshold (up to 32 MiB), so later large transient buffers (a profile being encoded, a walk's reply)
//! come from the arenas and stay there as free memory. Under a continuous wall profile that made RSS grow
//! 13–15 MiB a minute while the live heap stayed under 1 MiB. nl6's threads mostly wait, so two arenas
//! cost no measurable contention; fixed thresholds map large blocks on their own and hand them back when
//! freed, and trim the heap's top.
//!
//! A user who set `MALLOC_ARENA_MAX` or a `glibc.malloc.*` tunable in `GLIBC_TUNABLES` keeps their
//! choice: nothing is changed. Other C libraries (the static musl build) are left alone. Never fails:
//! a setting glibc refuses stays at its default.
//!
//! The `unsafe` here: `mallopt` takes two integers and touches no memory of ours.
#![allow(unsafe_code)]

/// The most malloc arenas (read only where glibc is the C library).
#[cfg_attr(not(all(target_os = "linux", target_env = "gnu")), allow(dead_code))]
pub const ARENA_MAX: i32 = 2;
/// The fixed mmap and trim thresholds (glibc's starting values, kept from rising).
#[cfg_attr(not(all(target_os = "linux", target_env = "gnu")), allow(dead_code))]
pub const THRESHOLD: i32 = 128 * 1024;

/// Whether the environment already chose malloc's settings.
fn user_chose(arena_max: Option<&str>, tunables: Option<&str>) -> bool {
    arena_max.is_some() || tunables.is_some_and(|t| t.contains("glibc.malloc."))
}

/// Sets the arena bound and the thresholds unless the user chose; whether they were set.
pub fn tune() -> bool {
    let env = |k: &str| std::env::var(k).ok();
    if user_chose(
        env("MALLOC_ARENA_MAX").as_deref(),
        env("GLIBC_TUNABLES").as_deref(),
    ) {
        return false;
    }
    set_all()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_all() -> bool {
    [
        (libc::M_ARENA_MAX, ARENA_MAX),
        (libc::M_MMAP_THRESHOLD, THRESHOLD),
        (libc::M_TRIM_THRESHOLD, THRESHOLD),
    ]
    .into_iter()
    // SAFETY: mallopt takes two integers and reads or writes no memory of ours; it is called before
    // any thread of serve mode exists.
    .all(|(param, value)| unsafe { libc::mallopt(param, value) } == 1)
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_all() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_users_choice_is_kept() {
        assert!(!user_chose(None, None));
        assert!(!user_chose(None, Some("glibc.rtld.nns=2")));
        assert!(user_chose(Some("4"), None));
        assert!(user_chose(
            None,
            Some("glibc.rtld.nns=2:glibc.malloc.arena_max=1")
        ));
    }
}
