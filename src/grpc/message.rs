//! Protobuf by hand for the hot path: SendBundle encoded straight from the transactions' wire
//! bytes, the response's uuid read without allocating; prost for the cold-path methods.

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

fn put_varint(out: &mut [u8], pos: &mut usize, mut v: u64) -> Option<()> {
    while v >= 0x80 {
        *out.get_mut(*pos)? = (v as u8) | 0x80;
        *pos += 1;
        v >>= 7;
    }
    *out.get_mut(*pos)? = v as u8;
    *pos += 1;
    Some(())
}

/// `packet.Meta { size = 1 }` body length.
fn meta_len(size: usize) -> usize {
    if size == 0 {
        0
    } else {
        1 + varint_len(size as u64)
    }
}

fn packet_len(tx: &[u8]) -> usize {
    let data = if tx.is_empty() {
        0
    } else {
        1 + varint_len(tx.len() as u64) + tx.len()
    };
    let m = meta_len(tx.len());
    data + 1 + varint_len(m as u64) + m
}

/// Encodes `SendBundleRequest { bundle: Bundle { packets: [Packet { data: tx, meta: Meta {
/// size: tx.len() } }] } }` (field numbers: jito-facts.md section 2) into `out`; returns the
/// length, or `None` when `out` is too short. Matches prost's encoding byte for byte.
pub fn encode_send_bundle<'t>(
    txs: impl Iterator<Item = &'t [u8]> + Clone,
    out: &mut [u8],
) -> Option<usize> {
    let bundle_len: usize = txs
        .clone()
        .map(|tx| {
            let p = packet_len(tx);
            1 + varint_len(p as u64) + p
        })
        .sum();
    let mut pos = 0;
    put_varint(out, &mut pos, 0x0a)?; // SendBundleRequest.bundle = 1, length-delimited
    put_varint(out, &mut pos, bundle_len as u64)?;
    for tx in txs {
        put_varint(out, &mut pos, 0x1a)?; // Bundle.packets = 3
        put_varint(out, &mut pos, packet_len(tx) as u64)?;
        if !tx.is_empty() {
            put_varint(out, &mut pos, 0x0a)?; // Packet.data = 1
            put_varint(out, &mut pos, tx.len() as u64)?;
            out.get_mut(pos..pos + tx.len())?.copy_from_slice(tx);
            pos += tx.len();
        }
        put_varint(out, &mut pos, 0x12)?; // Packet.meta = 2
        put_varint(out, &mut pos, meta_len(tx.len()) as u64)?;
        if !tx.is_empty() {
            put_varint(out, &mut pos, 0x08)?; // Meta.size = 1, varint
            put_varint(out, &mut pos, tx.len() as u64)?;
        }
    }
    Some(pos)
}

/// `SendBundleResponse.uuid` (field 1) without allocating; `None` for malformed input.
pub fn send_bundle_uuid(msg: &[u8]) -> Option<&str> {
    let mut pos = 0;
    let mut uuid = "";
    while pos < msg.len() {
        let (key, used) = get_varint(&msg[pos..])?;
        pos += used;
        match key & 7 {
            0 => pos += get_varint(&msg[pos..])?.1,
            1 => pos += 8,
            5 => pos += 4,
            2 => {
                let (len, used) = get_varint(&msg[pos..])?;
                pos += used;
                let v = msg.get(pos..pos.checked_add(len as usize)?)?;
                if key >> 3 == 1 {
                    uuid = std::str::from_utf8(v).ok()?;
                }
                pos += len as usize;
            }
            _ => return None,
        }
    }
    (pos == msg.len()).then_some(uuid)
}

fn get_varint(b: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &c) in b.iter().enumerate().take(10) {
        v |= ((c & 0x7f) as u64) << (7 * i);
        if c & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// Encodes any prost message (cold-path methods: GetTipAccounts, GetNextScheduledLeader).
pub fn encode_prost<M: prost::Message>(m: &M, out: &mut [u8]) -> Option<usize> {
    let len = m.encoded_len();
    let mut buf = out.get_mut(..len)?;
    m.encode(&mut buf).ok()?;
    Some(len)
}
