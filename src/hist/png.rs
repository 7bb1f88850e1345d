//! A PNG encoder for an RGB raster, with no system library: `flate2` (zlib) for the image
//! data, `crc32fast` for the chunk checksums. Not a decoder, and no filters, palettes or alpha:
//! the plots need none.

use std::io::{self, Write};

use flate2::Compression;
use flate2::write::ZlibEncoder;

/// The PNG encoding of an 8-bit RGB raster of `width` × `height` pixels, rows top first (no
/// filter, zlib).
pub fn encode_rgb(width: u32, height: u32, rgb: &[u8]) -> io::Result<Vec<u8>> {
    let mut raw = Vec::with_capacity(((width * 3 + 1) * height) as usize);
    for row in rgb.chunks_exact(width as usize * 3) {
        raw.push(0);
        raw.extend_from_slice(row);
    }
    let mut z = ZlibEncoder::new(Vec::new(), Compression::default());
    z.write_all(&raw)?;
    let idat = z.finish()?;
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::with_capacity(13);
    ihdr.extend_from_slice(&width.to_be_bytes());
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"IDAT", &idat);
    chunk(&mut out, b"IEND", &[]);
    Ok(out)
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let mut crc = crc32fast::Hasher::new();
    crc.update(kind);
    crc.update(data);
    out.extend_from_slice(&crc.finalize().to_be_bytes());
}
