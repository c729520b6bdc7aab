//! The wire decoder's bounds, tested in the engine only: `proto.rs` is also compiled into nl6 and the
//! engine's integration tests (`#[path]`), which should not each run this 64 MiB test again.
use crate::proto::*;
use std::io::Write;

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(data).unwrap();
    gz.finish().unwrap()
}

#[test]
fn decoding_is_bounded_before_prost_sees_the_input() {
    // A small gzip that inflates past the bound: refused naming the limit, not inflated whole.
    let bomb = gzip(&vec![0u8; (MAX_INFLATED_BYTES + 4096) as usize]);
    assert!(bomb.len() < 1 << 20, "{} bytes", bomb.len());
    let err = decode(&bomb).unwrap_err().to_string();
    assert!(
        err.contains("gunzipped profile exceeds the limit of 67108864 bytes"),
        "{err}"
    );
    // The bound as a parameter, for gzip'd and uncompressed input alike.
    let mut p = Profile::default();
    p.string_table.push(String::new());
    p.string_table.push("x".repeat(100));
    let wire = prost::Message::encode_to_vec(&p);
    assert_eq!(decode_bounded(&gzip(&wire), wire.len() as u64).unwrap(), p);
    assert_eq!(decode_bounded(&wire, wire.len() as u64).unwrap(), p);
    let err = decode_bounded(&gzip(&wire), wire.len() as u64 - 1).unwrap_err();
    assert!(err.to_string().contains("exceeds the limit"), "{err}");
    let err = decode_bounded(&wire, 10).unwrap_err();
    assert!(
        err.to_string()
            .contains("the profile exceeds the limit of 10 bytes"),
        "{err}"
    );
}
