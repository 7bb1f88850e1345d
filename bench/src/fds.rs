//! The open-file rule every bench process lives by: at most [`FDS_PROCESS_MAX`] files, the
//! soft RLIMIT_NOFILE raised toward the hard one (never past the rule) before a run counts what
//! it needs against it.

/// The most open files one process may hold (the host's rule for every bench process).
pub const FDS_PROCESS_MAX: usize = 20_000;

/// Raises the soft RLIMIT_NOFILE toward the hard one, capped at [`FDS_PROCESS_MAX`]; returns
/// the soft limit now (1,024, the usual default, when it cannot be read).
pub fn raise_nofile() -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        let want = lim.rlim_max.min(FDS_PROCESS_MAX as u64);
        if lim.rlim_cur < want {
            let raised = libc::rlimit {
                rlim_cur: want,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim.rlim_cur = want;
            }
        }
    }
    lim.rlim_cur as usize
}

/// The soft RLIMIT_NOFILE as it is (0 when it cannot be read).
pub fn nofile_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    lim.rlim_cur
}
