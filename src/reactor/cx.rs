//! What every completion handler of a reactor thread works with: the ring to queue entries
//! on, the receive buffers (both groups), the dispatcher that decides, the thread's counters and clock.
//! Borrowed from the thread's worker for one handler call.

use crate::clock::Clock;
use crate::metrics::ThreadMetrics;
use crate::metrics::accounting::Stats;
use crate::relay::dispatch::Dispatcher;

use super::bufring::RecvBuffers;
use super::ring::Ring;

/// The worker's sweep period. Connection timers (HTTP/2 SETTINGS, call deadlines, intake head
/// and idle limits) are seconds long; checking them this often is precise enough and costs one
/// pass per period. Listeners whose accept failed are re-armed this often too.
pub const SWEEP_MS: u64 = 50;

pub struct Cx<'a> {
    pub ring: &'a mut Ring,
    pub bufs: &'a mut RecvBuffers,
    pub d: &'a mut Dispatcher,
    pub stats: &'a Stats,
    pub metrics: &'a ThreadMetrics,
    pub clock: &'a Clock,
    /// The thread is stopping: nothing new is accepted (connects still are, for what waits).
    pub stopping: bool,
    /// The listeners listen: accepts may be armed (a process taking over brings its pool up
    /// first).
    pub accepting: bool,
}
