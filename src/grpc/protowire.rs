//! The protobuf wire format read by hand, for the few answers the relay decodes on its reactor
//! threads (GetTipAccounts, GetNextScheduledLeader): prost's generated types would allocate a
//! `String` per field, and nothing on a reactor allocates after startup.
//!
//! [`Fields`] yields a message's top-level fields in order and follows the rules prost's decoder
//! enforces: multi-byte (and overlong) varints, keys within 32 bits, field 0 refused, groups
//! skipped whole but nested at most [`GROUP_DEPTH_MAX`] deep and closed by their own field,
//! lengths within the message. What a field means, and which wire type it must have, is the
//! caller's: a known field with the wrong type (a group included) is malformed there, an unknown
//! one is skipped.

/// A varint is at most 10 bytes (64 bits, 7 per byte), and then its last byte holds bit 63 only.
const VARINT_BYTES_MAX: usize = 10;
/// Groups nested this deep are refused, as prost refuses them; proto3 never sends groups, so
/// the limit only bounds a hostile message.
pub const GROUP_DEPTH_MAX: usize = 100;

const WIRE_VARINT: u32 = 0;
const WIRE_FIXED64: u32 = 1;
const WIRE_LEN: u32 = 2;
const WIRE_START_GROUP: u32 = 3;
const WIRE_END_GROUP: u32 = 4;
const WIRE_FIXED32: u32 = 5;

/// One top-level field's value, by wire type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    Varint(u64),
    Fixed64(u64),
    /// Strings, bytes, embedded messages, packed repeated fields.
    Len(&'a [u8]),
    Fixed32(u32),
    /// A group (proto2), skipped whole: yielded once it closes, so a caller can refuse a known
    /// field sent as one, as prost does.
    Group,
}

/// The message is not valid protobuf; nothing read from it should be kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Malformed;

/// The top-level fields of a message, in order (see the module docs). After an `Err` the
/// iterator ends.
pub struct Fields<'a> {
    rest: &'a [u8],
    /// The field numbers of the groups being skipped, innermost last.
    groups: [u32; GROUP_DEPTH_MAX],
    depth: usize,
    done: bool,
}

impl<'a> Fields<'a> {
    pub fn new(msg: &'a [u8]) -> Fields<'a> {
        Fields {
            rest: msg,
            groups: [0; GROUP_DEPTH_MAX],
            depth: 0,
            done: false,
        }
    }

    /// A base-128 varint, least significant group first. Overlong encodings (`0x81 0x00` for
    /// 1) are valid protobuf; one past 64 bits is not.
    fn varint(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for i in 0..VARINT_BYTES_MAX {
            let b = *self.rest.get(i)?;
            value |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                if i == VARINT_BYTES_MAX - 1 && b > 1 {
                    return None;
                }
                self.rest = &self.rest[i + 1..];
                return Some(value);
            }
        }
        None
    }

    fn take(&mut self, n: u64) -> Option<&'a [u8]> {
        let n = usize::try_from(n).ok().filter(|&n| n <= self.rest.len())?;
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Some(head)
    }

    /// The next top-level field, `None` at a well-formed end.
    fn step(&mut self) -> Result<Option<(u32, Value<'a>)>, Malformed> {
        loop {
            if self.rest.is_empty() {
                return if self.depth == 0 {
                    Ok(None)
                } else {
                    Err(Malformed)
                };
            }
            // A key is a varint too, but one past 32 bits is malformed.
            let key = self
                .varint()
                .and_then(|k| u32::try_from(k).ok())
                .ok_or(Malformed)?;
            let (field, wire) = (key >> 3, key & 7);
            if field == 0 {
                return Err(Malformed);
            }
            if wire == WIRE_END_GROUP {
                // Closes the innermost open group, which must be the same field.
                if self.depth == 0 || self.groups[self.depth - 1] != field {
                    return Err(Malformed);
                }
                self.depth -= 1;
                if self.depth == 0 {
                    return Ok(Some((field, Value::Group)));
                }
                continue;
            }
            if self.depth == GROUP_DEPTH_MAX {
                return Err(Malformed);
            }
            let value = match wire {
                WIRE_VARINT => Value::Varint(self.varint().ok_or(Malformed)?),
                WIRE_FIXED64 => {
                    let b = self.take(8).ok_or(Malformed)?;
                    Value::Fixed64(u64::from_le_bytes(b.try_into().expect("8 bytes")))
                }
                WIRE_LEN => {
                    let n = self.varint().ok_or(Malformed)?;
                    Value::Len(self.take(n).ok_or(Malformed)?)
                }
                WIRE_START_GROUP => {
                    self.groups[self.depth] = field;
                    self.depth += 1;
                    continue;
                }
                WIRE_FIXED32 => {
                    let b = self.take(4).ok_or(Malformed)?;
                    Value::Fixed32(u32::from_le_bytes(b.try_into().expect("4 bytes")))
                }
                _ => return Err(Malformed),
            };
            if self.depth == 0 {
                return Ok(Some((field, value)));
            }
        }
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Value<'a>), Malformed>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.step() {
            Ok(Some(f)) => Some(Ok(f)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// Writes a length-delimited field (`field`, wire type 2) holding `bytes` at the start of
/// `out`, returning its length; `None` when it does not fit.
pub fn put_len_field(field: u32, bytes: &[u8], out: &mut [u8]) -> Option<usize> {
    let mut n = put_varint(u64::from(field << 3 | WIRE_LEN), out)?;
    n += put_varint(bytes.len() as u64, out.get_mut(n..)?)?;
    out.get_mut(n..n + bytes.len())?.copy_from_slice(bytes);
    Some(n + bytes.len())
}

fn put_varint(mut v: u64, out: &mut [u8]) -> Option<usize> {
    let mut i = 0;
    loop {
        let b = out.get_mut(i)?;
        if v < 0x80 {
            *b = v as u8;
            return Some(i + 1);
        }
        *b = (v as u8 & 0x7f) | 0x80;
        v >>= 7;
        i += 1;
    }
}
