//! The quota store: Redis, asked through the `redis` crate's blocking client by the lease
//! thread only (never on the request path). One round trip leases for every tenant that needs
//! it (a pipeline of one script call each); each call grants what fits under the tenant's
//! global rate for that second and counts it, atomically, in a key that expires on its own.
//!
//! What it is NOT: the lease arithmetic (`quota`) nor the loop around it (`lease.rs`).

use std::time::{Duration, Instant};

use crate::config::Quota;

/// Grants `min(ARGV[1], ARGV[2] - used)` of the second's key `KEYS[1]` and counts it there;
/// the key lives `ARGV[3]` seconds, past the second it counts. One script, so two relays
/// leasing the same second never both see room that only one of them gets.
const LEASE_SCRIPT: &str = "\
local used = tonumber(redis.call('GET', KEYS[1]) or '0') \
local grant = math.min(tonumber(ARGV[1]), tonumber(ARGV[2]) - used) \
if grant <= 0 then return 0 end \
redis.call('INCRBY', KEYS[1], grant) \
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3])) \
return grant";

/// A second's key outlives it by this much: long enough for a relay whose clock is behind to
/// still find it, short enough that keys never pile up.
const KEY_TTL_S: u64 = 10;

/// One lease to ask: the tenant, the second, how much and its global rate.
pub struct Ask<'a> {
    pub tenant: &'a str,
    pub window: u64,
    pub amount: u32,
    pub rate: u32,
}

/// A connection to the store, opened when first needed and again after any failure.
pub struct Store {
    redis: String,
    key_prefix: String,
    timeout: Duration,
    conn: Option<redis::Connection>,
}

impl Store {
    pub fn new(q: &Quota) -> Store {
        Store {
            redis: q.redis.clone(),
            key_prefix: q.key_prefix.clone(),
            timeout: Duration::from_millis(q.timeout_ms),
            conn: None,
        }
    }

    fn conn(&mut self) -> Result<&mut redis::Connection, String> {
        let timeout = self.timeout;
        if self.conn.is_none() {
            let client = redis::Client::open(format!("redis://{}/", self.redis))
                .map_err(|e| describe(&e, timeout))?;
            let c = client
                .get_connection_with_timeout(self.timeout)
                .map_err(|e| format!("connecting: {}", describe(&e, timeout)))?;
            c.set_read_timeout(Some(self.timeout))
                .and_then(|_| c.set_write_timeout(Some(self.timeout)))
                .map_err(|e| describe(&e, timeout))?;
            self.conn = Some(c);
        }
        Ok(self.conn.as_mut().expect("just opened"))
    }

    /// Leases every ask in one round trip: what the store granted each, in order, or the error
    /// it answered that one with (an out-of-memory store, a read-only replica, a key of another
    /// type): the others' grants stand, the store counted them. A failed round trip drops the
    /// connection, so the next call starts a fresh one.
    pub fn lease(&mut self, asks: &[Ask<'_>]) -> Result<Vec<Result<u32, String>>, String> {
        let timeout = self.timeout;
        let mut p = redis::pipe();
        p.ignore_errors();
        for a in asks {
            p.cmd("EVAL")
                .arg(LEASE_SCRIPT)
                .arg(1)
                .arg(format!("{}{}:{}", self.key_prefix, a.tenant, a.window))
                .arg(a.amount)
                .arg(a.rate)
                .arg(KEY_TTL_S);
        }
        let result: Result<Vec<redis::RedisResult<i64>>, String> = self
            .conn()
            .and_then(|c| p.query(c).map_err(|e| describe(&e, timeout)));
        match result {
            Ok(g) if g.len() == asks.len() => Ok(g
                .into_iter()
                .map(|r| r.map(|n| n.max(0) as u32).map_err(|e| e.to_string()))
                .collect()),
            Ok(g) => {
                self.conn = None;
                Err(format!("{} answers to {} leases", g.len(), asks.len()))
            }
            Err(e) => {
                self.conn = None;
                Err(e)
            }
        }
    }

    /// One PING: how long it took, or why it failed (`run --check`).
    pub fn ping(&mut self) -> Result<Duration, String> {
        let timeout = self.timeout;
        let t = Instant::now();
        let r: Result<String, String> = self.conn().and_then(|c| {
            redis::cmd("PING")
                .query(c)
                .map_err(|e| describe(&e, timeout))
        });
        match r {
            Ok(_) => Ok(t.elapsed()),
            Err(e) => {
                self.conn = None;
                Err(e)
            }
        }
    }
}

/// What went wrong, a timeout said as one (the socket's own words are "Resource temporarily
/// unavailable" or "Interrupted system call").
fn describe(e: &redis::RedisError, timeout: Duration) -> String {
    if e.is_timeout() {
        format!("no answer within {} ms", timeout.as_millis())
    } else {
        e.to_string()
    }
}

/// `run --check`'s line about the quota store: none configured, or whether it answers.
pub fn check_line(cfg: &crate::config::Config) -> String {
    let Some(q) = &cfg.quota else {
        return "quota store: none ([quota] unset); tenants' rates hold per relay".to_string();
    };
    let limited = cfg
        .tenants
        .list
        .iter()
        .map(|t| &t.policy)
        .chain(cfg.tenants.default.iter())
        .filter(|p| p.global_rate.is_some())
        .count();
    let mut store = Store::new(q);
    match store.ping() {
        Ok(d) => format!(
            "quota store: redis {} answers (PING {:.1} ms); tenants with a global_rate: \
             {limited}, keys {}<tenant>:<second>",
            q.redis,
            d.as_secs_f64() * 1e3,
            q.key_prefix
        ),
        Err(e) => format!(
            "quota store: redis {} does not answer ({e}); tenants with a global_rate \
             ({limited}) start on one lease chunk a second until it does",
            q.redis
        ),
    }
}
