//! The header tables of RFC 7541 section 2.3: the static table, and the decoder's dynamic
//! table in one byte buffer of the size we advertise. The encoder never inserts, so only
//! the decoder has a dynamic table.

/// RFC 7541 section 4.1: every dynamic table entry costs its name and value plus 32 bytes.
pub const ENTRY_OVERHEAD: usize = 32;

/// RFC 7541 Appendix A.
pub const STATIC_TABLE: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// The decoder's dynamic table: entries stored oldest first in one byte buffer, compacted when
/// an insert would run off the end.
pub(super) struct DynamicTable {
    pub(super) bytes: Box<[u8]>,
    /// Live bytes are `bytes[head..tail]`.
    pub(super) head: usize,
    pub(super) tail: usize,
    /// Ring of (offset, name_len, value_len), oldest at `first`.
    pub(super) entries: Box<[(u32, u32, u32)]>,
    pub(super) first: usize,
    pub(super) count: usize,
    pub(super) size: usize,
    pub(super) size_max: usize,
}

impl DynamicTable {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            bytes: vec![0; capacity].into_boxed_slice(),
            head: 0,
            tail: 0,
            entries: vec![(0, 0, 0); Self::entries_for(capacity)].into_boxed_slice(),
            first: 0,
            count: 0,
            size: 0,
            size_max: capacity,
        }
    }

    pub(super) fn allocation_bytes(capacity: usize) -> usize {
        capacity + Self::entries_for(capacity) * std::mem::size_of::<(u32, u32, u32)>()
    }

    /// Entry slots for a table of `capacity` bytes: every entry costs at least
    /// [`ENTRY_OVERHEAD`].
    fn entries_for(capacity: usize) -> usize {
        capacity / ENTRY_OVERHEAD + 1
    }

    /// Entry `i` (0 = newest) as (name, value).
    pub(super) fn get(&self, i: usize) -> Option<(&[u8], &[u8])> {
        if i >= self.count {
            return None;
        }
        let slot = (self.first + self.count - 1 - i) % self.entries.len();
        let (o, n, v) = self.entries[slot];
        let (o, n, v) = (o as usize, n as usize, v as usize);
        Some((&self.bytes[o..o + n], &self.bytes[o + n..o + n + v]))
    }

    fn evict_oldest(&mut self) {
        let (_, n, v) = self.entries[self.first];
        self.size -= n as usize + v as usize + ENTRY_OVERHEAD;
        self.head += (n + v) as usize;
        self.first = (self.first + 1) % self.entries.len();
        self.count -= 1;
        if self.count == 0 {
            self.head = 0;
            self.tail = 0;
        }
    }

    pub(super) fn set_size_max(&mut self, size_max: usize) {
        self.size_max = size_max;
        while self.size > self.size_max {
            self.evict_oldest();
        }
    }

    pub(super) fn insert(&mut self, name: &[u8], value: &[u8]) {
        let entry_size = name.len() + value.len() + ENTRY_OVERHEAD;
        while self.count > 0 && self.size + entry_size > self.size_max {
            self.evict_oldest();
        }
        if entry_size > self.size_max {
            // RFC 7541 section 4.4: an entry larger than the table empties it and is not added.
            return;
        }
        let len = name.len() + value.len();
        if self.tail + len > self.bytes.len() {
            self.bytes.copy_within(self.head..self.tail, 0);
            let shift = self.head as u32;
            for k in 0..self.count {
                let slot = (self.first + k) % self.entries.len();
                self.entries[slot].0 -= shift;
            }
            self.tail -= self.head;
            self.head = 0;
        }
        let o = self.tail;
        self.bytes[o..o + name.len()].copy_from_slice(name);
        self.bytes[o + name.len()..o + len].copy_from_slice(value);
        self.tail += len;
        let slot = (self.first + self.count) % self.entries.len();
        self.entries[slot] = (o as u32, name.len() as u32, value.len() as u32);
        self.count += 1;
        self.size += entry_size;
    }
}
