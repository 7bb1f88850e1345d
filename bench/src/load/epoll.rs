//! A minimal epoll wrapper shared by the load generator and the null responder.
//!
//! Waits take a nanosecond timeout (`epoll_pwait2`): the load generator's schedule has a
//! request every few microseconds, and `epoll_wait`'s millisecond timeout would send them in
//! bursts, late by up to a millisecond.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

pub const IN: u32 = libc::EPOLLIN as u32;
pub const OUT: u32 = libc::EPOLLOUT as u32;
pub const ET: u32 = libc::EPOLLET as u32;
pub const RDHUP: u32 = libc::EPOLLRDHUP as u32;
pub const ERR: u32 = libc::EPOLLERR as u32;
pub const HUP: u32 = libc::EPOLLHUP as u32;

pub struct Epoll {
    fd: RawFd,
    events: Vec<libc::epoll_event>,
    pwait2: bool,
}

/// Events returned by one wait: `(token, flags)`.
pub type Event = (u64, u32);

impl Epoll {
    /// `capacity`: the most events one wait returns.
    pub fn new(capacity: usize) -> io::Result<Epoll> {
        // SAFETY: plain syscall; the fd is owned by the returned value.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Epoll {
            fd,
            events: vec![libc::epoll_event { events: 0, u64: 0 }; capacity.max(1)],
            pwait2: true,
        })
    }

    pub fn add(&self, fd: RawFd, token: u64, flags: u32) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, token, flags)
    }

    pub fn modify(&self, fd: RawFd, token: u64, flags: u32) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, token, flags)
    }

    pub fn delete(&self, fd: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    fn ctl(&self, op: i32, fd: RawFd, token: u64, flags: u32) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: flags,
            u64: token,
        };
        // SAFETY: ev lives across the call; the kernel copies it.
        if unsafe { libc::epoll_ctl(self.fd, op, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits up to `timeout` (None: forever); returns the ready events.
    pub fn wait(
        &mut self,
        timeout: Option<Duration>,
    ) -> io::Result<impl Iterator<Item = Event> + '_> {
        let n = loop {
            let n = self.wait_raw(timeout);
            if n >= 0 {
                break n as usize;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        };
        Ok(self.events[..n].iter().map(|e| (e.u64, e.events)))
    }

    fn wait_raw(&mut self, timeout: Option<Duration>) -> i64 {
        let cap = self.events.len() as i32;
        if self.pwait2 {
            let ts = timeout.map(|t| libc::timespec {
                tv_sec: t.as_secs() as libc::time_t,
                tv_nsec: t.subsec_nanos() as libc::c_long,
            });
            let tsp = ts
                .as_ref()
                .map_or(std::ptr::null(), |t| t as *const libc::timespec);
            // SAFETY: events buffer has `cap` entries; tsp is null or points at a live timespec.
            let n = unsafe {
                libc::syscall(
                    libc::SYS_epoll_pwait2,
                    self.fd,
                    self.events.as_mut_ptr(),
                    cap,
                    tsp,
                    std::ptr::null::<libc::sigset_t>(),
                    0usize,
                )
            };
            if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
                // Kernels before 5.11: fall back to millisecond waits.
                self.pwait2 = false;
            } else {
                return n;
            }
        }
        let ms = timeout.map_or(-1, |t| {
            t.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32
        });
        // SAFETY: events buffer has `cap` entries.
        unsafe { libc::epoll_wait(self.fd, self.events.as_mut_ptr(), cap, ms) as i64 }
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        // SAFETY: we own the fd.
        unsafe { libc::close(self.fd) };
    }
}

/// Lets this thread's timed sleeps wake within 1 µs of the deadline instead of the default
/// 50 µs slack: the schedule is microseconds apart.
pub fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
}
