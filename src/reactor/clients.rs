//! Intake connections per client address on one reactor thread, so one host cannot take the
//! whole connection table: a fixed open-addressing table (linear probing, deletion by backward
//! shift), allocated at startup with room for every connection the thread can hold.

use std::net::IpAddr;

#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    /// The address as 128 bits (IPv4 mapped into IPv6), `count == 0` for an empty entry.
    key: u128,
    count: u32,
}

/// Live intake connections by client address.
pub struct Clients {
    entries: Box<[Entry]>,
    mask: usize,
}

fn key(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

fn slot_of(key: u128, mask: usize) -> usize {
    // Fibonacci hashing of both halves: addresses from one subnet differ in their low bits.
    let h = (key as u64) ^ ((key >> 64) as u64).rotate_left(29);
    (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & mask
}

impl Clients {
    /// A table for at most `connections` live connections (so at most that many addresses),
    /// kept at most half full.
    pub fn new(connections: usize) -> Clients {
        let size = (connections.max(1) * 2).next_power_of_two();
        Clients {
            entries: vec![Entry::default(); size].into_boxed_slice(),
            mask: size - 1,
        }
    }

    /// Bytes the table holds for `connections` (the budget counts one per thread).
    pub fn allocation_bytes(connections: usize) -> usize {
        (connections.max(1) * 2).next_power_of_two() * std::mem::size_of::<Entry>()
    }

    /// Connections `ip` holds now.
    pub fn count(&self, ip: IpAddr) -> u32 {
        let k = key(ip);
        let mut i = slot_of(k, self.mask);
        loop {
            let e = self.entries[i];
            if e.count == 0 {
                return 0;
            }
            if e.key == k {
                return e.count;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// One more connection from `ip`. The caller never holds more connections than the table
    /// was sized for.
    pub fn add(&mut self, ip: IpAddr) {
        let k = key(ip);
        let mut i = slot_of(k, self.mask);
        loop {
            let e = &mut self.entries[i];
            if e.count == 0 {
                *e = Entry { key: k, count: 1 };
                return;
            }
            if e.key == k {
                e.count += 1;
                return;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// One connection from `ip` fewer.
    pub fn remove(&mut self, ip: IpAddr) {
        let k = key(ip);
        let mut i = slot_of(k, self.mask);
        loop {
            let e = &mut self.entries[i];
            if e.count == 0 {
                debug_assert!(false, "{ip} holds no connection");
                return;
            }
            if e.key == k {
                e.count -= 1;
                if e.count == 0 {
                    self.backward_shift(i);
                }
                return;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Entry `hole` was emptied: pull later entries of its probe run back so no lookup stops
    /// early at the hole.
    fn backward_shift(&mut self, mut hole: usize) {
        let mut i = (hole + 1) & self.mask;
        loop {
            let e = self.entries[i];
            if e.count == 0 {
                break;
            }
            let home = slot_of(e.key, self.mask);
            // Move `e` into the hole unless its home lies cyclically in (hole, i].
            let stays = if hole <= i {
                home > hole && home <= i
            } else {
                home > hole || home <= i
            };
            if !stays {
                self.entries[hole] = e;
                self.entries[i] = Entry::default();
                hole = i;
            }
            i = (i + 1) & self.mask;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::collections::HashMap;

    #[test]
    fn counts_follow_a_model_through_random_adds_and_removes() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut t = Clients::new(64);
        let mut model: HashMap<IpAddr, u32> = HashMap::new();
        let mut live = 0usize;
        let addrs: Vec<IpAddr> = (0..40)
            .map(|i| {
                if i % 3 == 0 {
                    IpAddr::V6(std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, i))
                } else {
                    IpAddr::V4(std::net::Ipv4Addr::new(10, 0, (i / 7) as u8, i as u8))
                }
            })
            .collect();
        for _ in 0..20_000 {
            let ip = addrs[rng.random_range(0..addrs.len())];
            let held = model.get(&ip).copied().unwrap_or(0);
            if live < 64 && (held == 0 || rng.random_bool(0.5)) {
                t.add(ip);
                *model.entry(ip).or_default() += 1;
                live += 1;
            } else if held > 0 {
                t.remove(ip);
                *model.get_mut(&ip).unwrap() -= 1;
                live -= 1;
            }
            for a in &addrs {
                assert_eq!(t.count(*a), model.get(a).copied().unwrap_or(0), "{a}");
            }
        }
    }

    #[test]
    fn an_ipv4_address_and_its_mapped_ipv6_form_are_one_client() {
        let mut t = Clients::new(4);
        let v4: IpAddr = "127.0.0.1".parse().unwrap();
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        t.add(v4);
        assert_eq!(t.count(mapped), 1);
    }
}
