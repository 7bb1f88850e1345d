//! The list that header blocks of streams already gone are decoded into: the HPACK table must
//! stay in step with the peer's, but nothing reads the fields. A connection decodes one block
//! at a time and keeps nothing of it, so a thread's connections share one list, reserved at
//! startup ([`reserve`]), rather than each holding its own (1.4 KiB a relay connection, resident
//! in the thread's heap).
//!
//! It is NOT a pool: one list per thread, borrowed for one decode.

use std::cell::RefCell;

use super::config::Config;
use super::hpack::{HeaderList, HpackError, Spill};

thread_local! {
    static LIST: RefCell<Option<HeaderList>> = const { RefCell::new(None) };
}

/// The list's capacities for connections with limits `cfg`: its bytes, its fields. Room for
/// any one field a header block within the limits can carry (Huffman codes are 5 bits at the
/// shortest, so a block's bytes decode to at most 8/5 as many), since it also takes the fields
/// a live stream's list has no room for ([`super::hpack::Decoder::decode_lenient`]).
fn capacities(cfg: &Config) -> (usize, usize) {
    (
        cfg.header_list_bytes_max
            .max(cfg.header_block_bytes_max * 8 / 5 + 1),
        cfg.header_fields_max(),
    )
}

/// Bytes [`reserve`] allocates for `cfg`.
pub fn allocation_bytes(cfg: &Config) -> usize {
    let (bytes, fields) = capacities(cfg);
    HeaderList::allocation_bytes(bytes, fields)
}

/// Gives this thread a discard list for connections with limits `cfg` (replacing any earlier
/// one). One allocation, at startup.
pub fn reserve(cfg: &Config) {
    let (bytes, fields) = capacities(cfg);
    LIST.with(|l| *l.borrow_mut() = Some(HeaderList::new(bytes, fields)));
}

/// Runs `f` on an empty list of the capacities for `cfg`: this thread's reserved list when it
/// has them, else one made for the call (a thread that reserved none, such as a test's or a
/// tool's).
pub(super) fn with_list<R>(cfg: &Config, f: impl FnOnce(&mut HeaderList) -> R) -> R {
    let want = capacities(cfg);
    LIST.with(|l| match l.borrow_mut().as_mut() {
        Some(list) if list.capacities() == want => {
            list.clear();
            f(list)
        }
        _ => f(&mut HeaderList::new(want.0, want.1)),
    })
}

/// The thread's list as a decoder's [`Spill`] for connections with limits `cfg`.
pub(super) struct ThreadSpill<'a>(pub &'a Config);

impl Spill for ThreadSpill<'_> {
    fn lend(
        &mut self,
        f: &mut dyn FnMut(&mut HeaderList) -> Result<usize, HpackError>,
    ) -> Result<usize, HpackError> {
        with_list(self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reserved_list_is_lent_cleared_and_only_for_its_own_limits() {
        let cfg = Config {
            header_list_bytes_max: 1024,
            ..Config::default()
        };
        reserve(&cfg);
        let first = with_list(&cfg, |l| {
            l.push(b"grpc-status", b"0").unwrap();
            std::ptr::from_mut(l) as usize
        });
        let again = with_list(&cfg, |l| {
            assert!(l.is_empty(), "lent with the last block's fields");
            std::ptr::from_mut(l) as usize
        });
        assert_eq!(first, again, "the reserved list is the one lent");
        let larger = Config::default();
        let other = with_list(&larger, |l| {
            assert_eq!(l.capacities(), capacities(&larger));
            std::ptr::from_mut(l) as usize
        });
        assert_ne!(other, first, "a list of other limits was lent");
    }
}
