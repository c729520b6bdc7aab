//! Tests of [`super`]: BER encoding and decoding, OIDs and the bounds a hostile message meets.
use super::*;

fn enc(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    put_value(&mut out, v);
    out
}

#[test]
fn integers_match_x690_minimal_twos_complement() {
    let cases: &[(i64, &[u8])] = &[
        (0, &[0x02, 0x01, 0x00]),
        (127, &[0x02, 0x01, 0x7f]),
        (128, &[0x02, 0x02, 0x00, 0x80]),
        (256, &[0x02, 0x02, 0x01, 0x00]),
        (-128, &[0x02, 0x01, 0x80]),
        (-129, &[0x02, 0x02, 0xff, 0x7f]),
        (-1, &[0x02, 0x01, 0xff]),
        (i64::MIN, &[0x02, 0x08, 0x80, 0, 0, 0, 0, 0, 0, 0]),
    ];
    for (v, bytes) in cases {
        assert_eq!(enc(&Value::Integer(*v)), *bytes, "encode {v}");
        assert_eq!(Reader::new(bytes).read_integer().unwrap(), *v, "decode {v}");
    }
}

#[test]
fn oids_match_x690_examples() {
    // X.690 8.19.5: { 2 100 3 } is 06 03 81 34 03.
    assert_eq!(
        enc(&Value::Oid(Oid(vec![2, 100, 3]))),
        [0x06, 0x03, 0x81, 0x34, 0x03]
    );
    // sysDescr.0 as every SNMP trace shows it.
    let sys_descr = Oid::parse("1.3.6.1.2.1.1.1.0").unwrap();
    assert_eq!(
        enc(&Value::Oid(sys_descr.clone())),
        [0x06, 0x08, 0x2b, 6, 1, 2, 1, 1, 1, 0]
    );
    assert_eq!(
        Reader::new(&[0x06, 0x03, 0x81, 0x34, 0x03])
            .read_oid()
            .unwrap(),
        Oid(vec![2, 100, 3])
    );
    let big = Oid(vec![1, 3, 6, 1, 4, 1, 4294967295]);
    assert_eq!(
        Reader::new(&enc(&Value::Oid(big.clone())))
            .read_oid()
            .unwrap(),
        big
    );
}

#[test]
fn unsigned_types_get_a_leading_zero_when_the_top_bit_is_set() {
    assert_eq!(
        enc(&Value::Counter32(0xffff_ffff)),
        [0x41, 0x05, 0x00, 0xff, 0xff, 0xff, 0xff]
    );
    assert_eq!(enc(&Value::Gauge32(0)), [0x42, 0x01, 0x00]);
    assert_eq!(enc(&Value::TimeTicks(200)), [0x43, 0x02, 0x00, 0xc8]);
    assert_eq!(
        enc(&Value::Counter64(u64::MAX)),
        [0x46, 9, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]
    );
}

#[test]
fn long_lengths_round_trip() {
    let s = Value::OctetString(vec![b'x'; 201]);
    let e = enc(&s);
    assert_eq!(&e[..3], &[0x04, 0x81, 0xc9]);
    let s2 = Value::OctetString(vec![b'y'; 300]);
    assert_eq!(&enc(&s2)[..4], &[0x04, 0x82, 0x01, 0x2c]);
    for v in [s, s2] {
        assert_eq!(Reader::new(&enc(&v)).read_value().unwrap(), v);
    }
}

#[test]
fn every_value_round_trips() {
    let values = [
        Value::Integer(-5),
        Value::OctetString(b"lab".to_vec()),
        Value::Null,
        Value::Oid(Oid(vec![0, 0])),
        Value::IpAddress([127, 0, 0, 1]),
        Value::Counter32(123456),
        Value::Gauge32(1_000_000_000),
        Value::TimeTicks(42),
        Value::Opaque(vec![1, 2]),
        Value::Counter64(1 << 40),
        Value::NoSuchObject,
        Value::NoSuchInstance,
        Value::EndOfMibView,
    ];
    for v in values {
        let bytes = enc(&v);
        let mut r = Reader::new(&bytes);
        assert_eq!(r.read_value().unwrap(), v);
        assert!(r.is_empty());
    }
}

#[test]
fn constructed_length_is_patched_for_long_content() {
    let mut out = Vec::new();
    put_constructed(&mut out, tag::SEQUENCE, |o| {
        put_tlv(o, tag::OCTET_STRING, &[7u8; 130])
    });
    assert_eq!(&out[..5], &[0x30, 0x81, 0x85, 0x04, 0x81]);
    let mut r = Reader::new(&out);
    let mut inner = r.read_constructed(tag::SEQUENCE).unwrap();
    assert_eq!(inner.read_octets().unwrap().len(), 130);
}

#[test]
fn malformed_inputs_are_errors() {
    let bad: &[(&[u8], BerError)] = &[
        (&[], BerError::Truncated),
        (&[0x02], BerError::Truncated),
        (&[0x02, 0x02, 0x01], BerError::Truncated),
        (&[0x04, 0x80, 0x00, 0x00], BerError::BadLength),
        (&[0x04, 0x85, 1, 1, 1, 1, 1], BerError::BadLength),
        (&[0x04, 0x84, 0xff, 0xff, 0xff, 0xff], BerError::Truncated),
        (&[0x02, 0x00], BerError::BadInteger),
        (&[0x06, 0x00], BerError::BadOid),
        (&[0x06, 0x02, 0x2b, 0x86], BerError::BadOid),
        (&[0x06, 0x02, 0x80, 0x01], BerError::BadOid),
        (&[0x05, 0x01, 0x00], BerError::BadValue(0x05)),
        (&[0x40, 0x03, 1, 2, 3], BerError::BadValue(0x40)),
        (&[0x41, 0x05, 0x01, 0, 0, 0, 0], BerError::BadInteger),
        (&[0x1f, 0x01, 0x00], BerError::BadValue(0x1f)),
    ];
    for (input, want) in bad {
        assert_eq!(
            Reader::new(input).read_value().unwrap_err(),
            *want,
            "input {input:02x?}"
        );
    }
}

#[test]
fn arbitrary_bytes_never_panic() {
    // A deterministic pseudo-random sweep: every prefix and mutation of a real encoding, plus noise.
    let mut base = Vec::new();
    put_constructed(&mut base, tag::SEQUENCE, |o| {
        put_integer(o, tag::INTEGER, 1);
        put_tlv(o, tag::OCTET_STRING, b"public");
        put_oid(o, &Oid::parse("1.3.6.1.2.1.2.2.1.10.1").unwrap());
    });
    let mut seed: u32 = 0x1234_5678;
    for i in 0..5000 {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        let mut m = base.clone();
        let at = seed as usize % m.len();
        m[at] = (seed >> 8) as u8;
        m.truncate(m.len() - i % 3);
        let mut r = Reader::new(&m);
        while let Ok((t, c)) = r.read_tlv() {
            let _ = decode_value(t, c);
            let mut inner = Reader::new(c);
            while inner.read_value().is_ok() {}
        }
    }
}
