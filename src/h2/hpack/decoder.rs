//! The HPACK decoder: one header block at a time into a [`HeaderList`], the dynamic table
//! kept in step across blocks.

use super::error::HpackError;
use super::header_list::HeaderList;
use super::integer::decode_integer;
use super::table::{DynamicTable, STATIC_TABLE};

/// HPACK decoder with a dynamic table of at most `table_size_max` bytes (the value we send as
/// SETTINGS_HEADER_TABLE_SIZE).
pub struct Decoder {
    table: DynamicTable,
    table_size_limit: usize,
}

impl Decoder {
    pub fn new(table_size_max: usize) -> Self {
        Self {
            table: DynamicTable::new(table_size_max),
            table_size_limit: table_size_max,
        }
    }

    /// Bytes [`Decoder::new`] allocates for a table of `table_size_max` bytes.
    pub fn allocation_bytes(table_size_max: usize) -> usize {
        DynamicTable::allocation_bytes(table_size_max)
    }

    /// Back to an empty dynamic table at its full size, as for a new connection; keeps its
    /// storage.
    pub fn reset(&mut self) {
        let t = &mut self.table;
        t.head = 0;
        t.tail = 0;
        t.first = 0;
        t.count = 0;
        t.size = 0;
        t.size_max = self.table_size_limit;
    }

    /// A decoder with no storage, standing in while a real one is moved (allocates nothing).
    pub fn placeholder() -> Self {
        Self {
            table: DynamicTable {
                bytes: Box::default(),
                head: 0,
                tail: 0,
                entries: Box::default(),
                first: 0,
                count: 0,
                size: 0,
                size_max: 0,
            },
            table_size_limit: 0,
        }
    }

    /// The dynamic table's current size in RFC 7541 units.
    pub fn table_size(&self) -> usize {
        self.table.size
    }

    /// Dynamic table entry `i` (0 = newest), for tests.
    pub fn table_entry(&self, i: usize) -> Option<(&[u8], &[u8])> {
        self.table.get(i)
    }

    /// Decodes one complete header block, appending fields to `out`.
    pub fn decode(&mut self, block: &[u8], out: &mut HeaderList) -> Result<(), HpackError> {
        self.decode_into(block, out, None).map(|_| ())
    }

    /// As [`Decoder::decode`], but a field `out` has no room for is decoded into a list
    /// `spill` lends (an empty one, for each such field), so the dynamic table stays in step
    /// with the peer's however large the list: returns whether every field reached `out`.
    /// Fails only on a block that breaks HPACK, or a field too large for the spill list alone.
    /// `spill` is asked only when a field does not fit.
    pub fn decode_lenient(
        &mut self,
        block: &[u8],
        out: &mut HeaderList,
        spill: &mut dyn Spill,
    ) -> Result<bool, HpackError> {
        self.decode_into(block, out, Some(spill))
    }

    fn decode_into(
        &mut self,
        block: &[u8],
        out: &mut HeaderList,
        mut spill: Option<&mut dyn Spill>,
    ) -> Result<bool, HpackError> {
        let mut pos = 0;
        let mut fields_seen = false;
        let mut whole = true;
        while pos < block.len() {
            let rest = &block[pos..];
            if rest[0] & 0xe0 == 0x20 {
                if fields_seen {
                    return Err(HpackError::SizeUpdateNotAtStart);
                }
                let (size, used) = decode_integer(rest, 5)?;
                if size as usize > self.table_size_limit {
                    return Err(HpackError::SizeUpdateTooLarge(size));
                }
                self.table.set_size_max(size as usize);
                pos += used;
                continue;
            }
            fields_seen = true;
            let mark = out.mark();
            pos += match self.field(rest, out) {
                Ok(used) => used,
                Err(HpackError::ListTooLarge) => {
                    let Some(spill) = spill.as_deref_mut() else {
                        return Err(HpackError::ListTooLarge);
                    };
                    // A failed field changed nothing but `out`'s tail, which goes back.
                    out.reset_to(mark);
                    whole = false;
                    spill.lend(&mut |list| self.field(rest, list))?
                }
                Err(e) => return Err(e),
            };
        }
        Ok(whole)
    }

    /// Decodes the field representation at the start of `rest` (not a size update) into
    /// `out`, inserting it into the table if it says so; returns the bytes it took. On an
    /// error nothing but `out` changed.
    fn field(&mut self, rest: &[u8], out: &mut HeaderList) -> Result<usize, HpackError> {
        let b = rest[0];
        if b & 0x80 != 0 {
            let (index, used) = decode_integer(rest, 7)?;
            let (name, value) = self.lookup(index)?;
            // Borrow juggling: copy from the table into the list.
            let start = out.bytes_len;
            out.append(name)?;
            out.append(value)?;
            out.commit(start, name.len(), value.len())?;
            return Ok(used);
        }
        // 01xxxxxx: with incremental indexing (6-bit prefix); 0000xxxx without
        // indexing and 0001xxxx never indexed (4-bit prefix).
        let indexing = b & 0x40 != 0;
        let prefix = if indexing { 6 } else { 4 };
        let (index, mut used) = decode_integer(rest, prefix)?;
        let start = out.bytes_len;
        let name_len = if index == 0 {
            let (n, u) = out.append_literal(&rest[used..])?;
            used += u;
            n
        } else {
            let (name, _) = self.lookup(index)?;
            out.append(name)?;
            name.len()
        };
        let (value_len, u) = out.append_literal(&rest[used..])?;
        used += u;
        out.commit(start, name_len, value_len)?;
        if indexing {
            let name = &out.bytes[start..start + name_len];
            let value = &out.bytes[start + name_len..start + name_len + value_len];
            self.table.insert(name, value);
        }
        Ok(used)
    }

    fn lookup(&self, index: u64) -> Result<(&[u8], &[u8]), HpackError> {
        match index {
            0 => Err(HpackError::InvalidIndex(0)),
            1..=61 => {
                let (n, v) = STATIC_TABLE[index as usize - 1];
                Ok((n.as_bytes(), v.as_bytes()))
            }
            _ => self
                .table
                .get(index as usize - 62)
                .ok_or(HpackError::InvalidIndex(index)),
        }
    }
}

/// Where [`Decoder::decode_lenient`] decodes the fields its list has no room for: an empty
/// list, lent for one field at a time.
pub trait Spill {
    /// Runs `f` on an empty list.
    fn lend(
        &mut self,
        f: &mut dyn FnMut(&mut HeaderList) -> Result<usize, HpackError>,
    ) -> Result<usize, HpackError>;
}

impl Spill for HeaderList {
    fn lend(
        &mut self,
        f: &mut dyn FnMut(&mut HeaderList) -> Result<usize, HpackError>,
    ) -> Result<usize, HpackError> {
        self.clear();
        f(self)
    }
}
