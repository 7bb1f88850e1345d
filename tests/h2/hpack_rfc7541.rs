//! RFC 7541 Appendix C known-answer vectors, plus the decoder's rejections.

use bundle_relay::h2::hpack::{
    Decoder, Encoder, HeaderList, HpackError, HuffmanError, decode_integer, encode_integer,
    huffman_decode, huffman_encode,
};

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn list() -> HeaderList {
    HeaderList::new(8192, 64)
}

fn fields(l: &HeaderList) -> Vec<(String, String)> {
    l.iter()
        .map(|(n, v)| {
            (
                String::from_utf8(n.to_vec()).unwrap(),
                String::from_utf8(v.to_vec()).unwrap(),
            )
        })
        .collect()
}

fn expect(l: &HeaderList, want: &[(&str, &str)]) {
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    assert_eq!(fields(l), want);
}

fn table(d: &Decoder) -> Vec<(String, String)> {
    (0..)
        .map_while(|i| d.table_entry(i))
        .map(|(n, v)| {
            (
                String::from_utf8(n.to_vec()).unwrap(),
                String::from_utf8(v.to_vec()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn c1_integer_representation() {
    let mut b = [0; 8];
    assert_eq!(encode_integer(10, 5, 0, &mut b), Some(1));
    assert_eq!(b[0], 0x0a);
    assert_eq!(decode_integer(&[0x0a], 5), Ok((10, 1)));
    assert_eq!(encode_integer(1337, 5, 0, &mut b), Some(3));
    assert_eq!(&b[..3], &[0x1f, 0x9a, 0x0a]);
    assert_eq!(decode_integer(&[0x1f, 0x9a, 0x0a], 5), Ok((1337, 3)));
    assert_eq!(encode_integer(42, 8, 0, &mut b), Some(1));
    assert_eq!(b[0], 42);
}

#[test]
fn integer_overflow_and_truncation_are_rejected() {
    let long = [
        0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
    ];
    assert_eq!(decode_integer(&long, 5), Err(HpackError::IntegerOverflow));
    assert_eq!(decode_integer(&[0x1f, 0x9a], 5), Err(HpackError::Truncated));
    // Zero-valued continuation bytes without end (found by fuzzing: a shift overflow).
    let zeros = [
        0x7f, 0xff, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00,
    ];
    assert_eq!(decode_integer(&zeros, 7), Err(HpackError::IntegerOverflow));
    assert_eq!(decode_integer(&[0xff, 0x01], 8), Ok((256, 2)));
    assert_eq!(decode_integer(&[], 5), Err(HpackError::Truncated));
}

#[test]
fn c2_1_literal_with_indexing() {
    let mut d = Decoder::new(4096);
    let mut l = list();
    d.decode(
        &hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572"),
        &mut l,
    )
    .unwrap();
    expect(&l, &[("custom-key", "custom-header")]);
    assert_eq!(d.table_size(), 55);
}

#[test]
fn c2_2_literal_without_indexing() {
    let mut d = Decoder::new(4096);
    let mut l = list();
    d.decode(&hex("040c 2f73 616d 706c 652f 7061 7468"), &mut l)
        .unwrap();
    expect(&l, &[(":path", "/sample/path")]);
    assert_eq!(d.table_size(), 0);
}

#[test]
fn c2_3_literal_never_indexed() {
    let mut d = Decoder::new(4096);
    let mut l = list();
    d.decode(&hex("1008 7061 7373 776f 7264 0673 6563 7265 74"), &mut l)
        .unwrap();
    expect(&l, &[("password", "secret")]);
    assert_eq!(d.table_size(), 0);
}

#[test]
fn c2_4_indexed() {
    let mut d = Decoder::new(4096);
    let mut l = list();
    d.decode(&hex("82"), &mut l).unwrap();
    expect(&l, &[(":method", "GET")]);
}

fn requests(blocks: [&str; 3]) {
    let mut d = Decoder::new(4096);
    let mut l = list();
    d.decode(&hex(blocks[0]), &mut l).unwrap();
    expect(
        &l,
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":authority", "www.example.com"),
        ],
    );
    assert_eq!(d.table_size(), 57);
    l.clear();
    d.decode(&hex(blocks[1]), &mut l).unwrap();
    expect(
        &l,
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":authority", "www.example.com"),
            ("cache-control", "no-cache"),
        ],
    );
    assert_eq!(d.table_size(), 110);
    l.clear();
    d.decode(&hex(blocks[2]), &mut l).unwrap();
    expect(
        &l,
        &[
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/index.html"),
            (":authority", "www.example.com"),
            ("custom-key", "custom-value"),
        ],
    );
    assert_eq!(d.table_size(), 164);
    assert_eq!(
        table(&d),
        vec![
            ("custom-key".into(), "custom-value".into()),
            ("cache-control".into(), "no-cache".into()),
            (":authority".into(), "www.example.com".into()),
        ]
    );
}

#[test]
fn c3_requests_without_huffman() {
    requests([
        "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "8286 84be 5808 6e6f 2d63 6163 6865",
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
    ]);
}

#[test]
fn c4_requests_with_huffman() {
    requests([
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        "8286 84be 5886 a8eb 1064 9cbf",
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
    ]);
}

fn responses(blocks: [&str; 3]) {
    let mut d = Decoder::new(256);
    let mut l = list();
    d.decode(&hex(blocks[0]), &mut l).unwrap();
    expect(
        &l,
        &[
            (":status", "302"),
            ("cache-control", "private"),
            ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
            ("location", "https://www.example.com"),
        ],
    );
    assert_eq!(d.table_size(), 222);
    l.clear();
    d.decode(&hex(blocks[1]), &mut l).unwrap();
    expect(
        &l,
        &[
            (":status", "307"),
            ("cache-control", "private"),
            ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
            ("location", "https://www.example.com"),
        ],
    );
    assert_eq!(d.table_size(), 222);
    assert_eq!(table(&d)[0], (":status".into(), "307".into()));
    l.clear();
    d.decode(&hex(blocks[2]), &mut l).unwrap();
    expect(
        &l,
        &[
            (":status", "200"),
            ("cache-control", "private"),
            ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
            ("location", "https://www.example.com"),
            ("content-encoding", "gzip"),
            (
                "set-cookie",
                "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
            ),
        ],
    );
    assert_eq!(d.table_size(), 215);
    assert_eq!(
        table(&d),
        vec![
            (
                "set-cookie".into(),
                "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1".into()
            ),
            ("content-encoding".into(), "gzip".into()),
            ("date".into(), "Mon, 21 Oct 2013 20:13:22 GMT".into()),
        ]
    );
}

#[test]
fn c5_responses_without_huffman_evict_from_a_256_byte_table() {
    responses([
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133
         2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70
         6c65 2e63 6f6d",
        "4803 3330 37c1 c0bf",
        "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d
         54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049
         5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e
         3d31",
    ]);
}

#[test]
fn c6_responses_with_huffman_evict_from_a_256_byte_table() {
    responses([
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
         2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "4883 640e ffc1 c0bf",
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
         77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
         9587 3160 65c0 03ed 4ee5 b106 3d50 07",
    ]);
}

#[test]
fn huffman_encoding_matches_c4_1() {
    let mut out = [0; 32];
    let n = huffman_encode(b"www.example.com", &mut out).unwrap();
    assert_eq!(&out[..n], &hex("f1e3 c2e5 f23a 6ba0 ab90 f4ff")[..]);
    let mut back = [0; 32];
    let m = huffman_decode(&out[..n], &mut back).unwrap();
    assert_eq!(&back[..m], b"www.example.com");
}

#[test]
fn encoder_output_decodes_to_the_same_fields() {
    let want: &[(&[u8], &[u8], bool)] = &[
        (b":method", b"POST", false),
        (b":scheme", b"https", false),
        (b":path", b"/searcher.SearcherService/SendBundle", false),
        (b":authority", b"ny.mainnet.block-engine.jito.wtf", false),
        (b"content-type", b"application/grpc", false),
        (b"te", b"trailers", false),
        (b"grpc-timeout", b"2000m", false),
        (b"authorization", b"Bearer abc.def", true),
    ];
    let mut out = [0; 1024];
    let mut pos = 0;
    for (n, v, s) in want {
        Encoder::encode_field(n, v, *s, &mut out, &mut pos).unwrap();
    }
    // :method POST is static index 3: one byte.
    assert_eq!(out[0], 0x83);
    let mut d = Decoder::new(4096);
    let mut l = list();
    d.decode(&out[..pos], &mut l).unwrap();
    let got: Vec<(&[u8], &[u8])> = l.iter().collect();
    let want: Vec<(&[u8], &[u8])> = want.iter().map(|(n, v, _)| (*n, *v)).collect();
    assert_eq!(got, want);
    assert_eq!(d.table_size(), 0, "nothing is added to the peer's table");
}

#[test]
fn decoder_rejects_each_kind_of_garbage() {
    let cases: &[(&str, &str, HpackError)] = &[
        ("index 0", "80", HpackError::InvalidIndex(0)),
        (
            "index past the static table",
            "be",
            HpackError::InvalidIndex(62),
        ),
        (
            "size update above our limit",
            "3fe21f",
            HpackError::SizeUpdateTooLarge(4097),
        ),
        (
            "size update after a field",
            "82 20",
            HpackError::SizeUpdateNotAtStart,
        ),
        ("literal cut short", "400a 6375", HpackError::Truncated),
        (
            "huffman EOS",
            "4084 ffff ffff 00",
            HpackError::Huffman(HuffmanError::Eos),
        ),
    ];
    for (what, block, want) in cases {
        let mut d = Decoder::new(4096);
        let mut l = list();
        assert_eq!(d.decode(&hex(block), &mut l), Err(*want), "{what}");
    }
}

#[test]
fn size_update_to_zero_empties_the_table() {
    let mut d = Decoder::new(4096);
    let mut l = list();
    d.decode(
        &hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572"),
        &mut l,
    )
    .unwrap();
    assert_eq!(d.table_size(), 55);
    d.decode(&hex("20"), &mut l).unwrap();
    assert_eq!(d.table_size(), 0);
    assert_eq!(
        d.decode(&hex("be"), &mut l),
        Err(HpackError::InvalidIndex(62))
    );
}

#[test]
fn a_list_larger_than_its_capacity_is_refused_not_grown() {
    let mut d = Decoder::new(4096);
    let mut l = HeaderList::new(16, 4);
    assert_eq!(
        d.decode(
            &hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572"),
            &mut l
        ),
        Err(HpackError::ListTooLarge)
    );
}
