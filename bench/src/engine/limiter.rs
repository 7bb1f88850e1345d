//! Jito's per-source rule for one region, sans-IO: addresses and `now` in, verdicts out.
//!
//! A source may have one bundle accepted per interval. A send before its next allowed time is an
//! early send; it is answered with the wait left and does NOT move that time (as far as is known
//! the real engine behaves so: users report a fixed `Retry after` countdown, not one that grows
//! with each retry). A storm cooldown simply moves the next allowed time further out.
//!
//! The limit applies when the request arrives, before the bundle is decoded: a bundle that is
//! then rejected as invalid still used its source's turn, as any request counts against Jito's
//! "1 per second for txn requests".

use std::collections::HashMap;
use std::net::IpAddr;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceState {
    /// Monotonic ns before which a send from this source is early (0: never sent).
    pub next_allowed_ns: u64,
    pub booked: u64,
    pub early: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// On time: the caller decides whether to book or to refuse for another reason.
    OnTime,
    /// Early: whole ms until the source may send again, rounded up, at least 1.
    Early { retry_ms: u64 },
}

#[derive(Debug)]
pub struct Limiter {
    interval_ns: u64,
    sources: HashMap<IpAddr, SourceState>,
}

impl Limiter {
    pub fn new(interval_ms: u64) -> Limiter {
        Limiter {
            interval_ns: interval_ms.max(1) * 1_000_000,
            sources: HashMap::new(),
        }
    }

    /// Checks a send from `ip` at `now_ns`; an early send is counted here.
    pub fn check(&mut self, ip: IpAddr, now_ns: u64) -> Verdict {
        let s = self.sources.entry(ip).or_default();
        if now_ns < s.next_allowed_ns {
            s.early += 1;
            let wait_ns = s.next_allowed_ns - now_ns;
            Verdict::Early {
                retry_ms: wait_ns.div_ceil(1_000_000).max(1),
            }
        } else {
            Verdict::OnTime
        }
    }

    /// Books the source's turn: its next send is allowed one interval from now.
    pub fn book(&mut self, ip: IpAddr, now_ns: u64) {
        let s = self.sources.entry(ip).or_default();
        s.next_allowed_ns = now_ns + self.interval_ns;
        s.booked += 1;
    }

    /// Holds the source until `until_ns` (a storm cooldown), never shortening a longer hold.
    pub fn hold(&mut self, ip: IpAddr, until_ns: u64) {
        let s = self.sources.entry(ip).or_default();
        s.next_allowed_ns = s.next_allowed_ns.max(until_ns);
    }

    pub fn sources(&self) -> impl Iterator<Item = (&IpAddr, &SourceState)> {
        self.sources.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 1, last])
    }

    #[test]
    fn early_send_reports_the_wait_rounded_up_and_does_not_extend_it() {
        let mut l = Limiter::new(1000);
        assert_eq!(l.check(ip(1), 10 * MS), Verdict::OnTime);
        l.book(ip(1), 10 * MS);
        assert_eq!(
            l.check(ip(1), 10 * MS + 1),
            Verdict::Early { retry_ms: 1000 }
        );
        assert_eq!(
            l.check(ip(1), 900 * MS + 500),
            Verdict::Early { retry_ms: 110 }
        );
        assert_eq!(
            l.check(ip(1), 1010 * MS - 1),
            Verdict::Early { retry_ms: 1 }
        );
        assert_eq!(l.check(ip(1), 1010 * MS), Verdict::OnTime);
        let s = l.sources().next().unwrap().1;
        assert_eq!((s.booked, s.early), (1, 3));
    }

    #[test]
    fn sources_do_not_share_a_turn() {
        let mut l = Limiter::new(1000);
        l.book(ip(1), MS);
        assert_eq!(l.check(ip(2), MS), Verdict::OnTime);
    }

    #[test]
    fn hold_extends_but_never_shortens() {
        let mut l = Limiter::new(1000);
        l.book(ip(1), 0);
        l.hold(ip(1), 500 * MS);
        assert_eq!(l.check(ip(1), 600 * MS), Verdict::Early { retry_ms: 400 });
        l.hold(ip(1), 30_000 * MS);
        assert_eq!(
            l.check(ip(1), 600 * MS),
            Verdict::Early { retry_ms: 29_400 }
        );
    }
}
