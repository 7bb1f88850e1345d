//! Heap allocations per frame after the handshake, counted by the counting allocator (only
//! the client's calls are counted, not the in-memory server's).
//!
//! Found with rustls 0.23 + ring: one allocation to encrypt a record (ring seals into a fresh
//! buffer, which rustls then copies into ours) and one to decrypt (rustls hands each received
//! record over as an owned chunk), with the unbuffered API. Nothing in `TlsSession` adds to
//! them: the count below is rustls'.

use crate::counting_alloc;
use crate::tls_support;

use bundle_relay::tls::{self, TlsSession};
use rustls::ServerConnection;
use tls_support::{handshake, pki, server_config, server_read, server_write};

const FRAME_BYTES: usize = 2 * 1024;
const FRAMES: u64 = 200;
/// Frames before counting: rustls' queues reach their steady size on first use.
const WARMUP_FRAMES: u64 = 8;

#[test]
fn steady_state_costs_one_allocation_per_record_each_way() {
    let p = pki(&["engine.test"]);
    let cfg = tls::client_config_from_pem(p.ca_pem.as_bytes()).unwrap();
    let mut c = TlsSession::new(cfg, "engine.test").unwrap();
    let mut s = ServerConnection::new(server_config(&p, &[b"h2"])).unwrap();
    handshake(&mut c, &mut s).unwrap();
    let frame = [0x42u8; FRAME_BYTES];
    let mut out = vec![0u8; FRAME_BYTES];
    let mut wire = Vec::with_capacity(4 * FRAME_BYTES);
    let (mut encrypt, mut decrypt) = (0, 0);
    for i in 0..WARMUP_FRAMES + FRAMES {
        if i == WARMUP_FRAMES {
            (encrypt, decrypt) = (0, 0);
        }
        let before = counting_alloc::allocations();
        assert_eq!(c.write_plaintext(&frame).unwrap(), FRAME_BYTES);
        encrypt += counting_alloc::allocations() - before;
        let mut rd = c.poll_transmit();
        let len = rd.len();
        s.read_tls(&mut rd).unwrap();
        s.process_new_packets().unwrap();
        let before = counting_alloc::allocations();
        c.advance_transmit(len);
        encrypt += counting_alloc::allocations() - before;
        assert_eq!(server_read(&mut s, &mut out), FRAME_BYTES);

        server_write(&mut s, &frame);
        wire.clear();
        s.write_tls(&mut wire).unwrap();
        let before = counting_alloc::allocations();
        assert_eq!(c.feed_ciphertext(&wire).unwrap(), wire.len());
        assert_eq!(c.read_plaintext(&mut out), FRAME_BYTES);
        decrypt += counting_alloc::allocations() - before;
    }
    assert_eq!(encrypt, FRAMES, "encrypt: allocations for {FRAMES} frames");
    assert_eq!(decrypt, FRAMES, "decrypt: allocations for {FRAMES} frames");
}
