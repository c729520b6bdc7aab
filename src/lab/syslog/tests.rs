//! Tests of [`super`]: RFC 5424 messages, RFC 6587 framing and the TCP send queue.
use super::*;
use crate::timefmt::parse_rfc3339;

fn ts(text: &str, digits: u8, offset_minutes: i32) -> Timestamp {
    // The text's wall-clock fields as written; the offset is only printed.
    let t = parse_rfc3339(text).unwrap();
    let mut s = Timestamp::utc_millis(t);
    let nanos = t
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    s.fraction = nanos / 10u32.pow(9 - digits as u32);
    s.frac_digits = digits;
    s.offset_minutes = offset_minutes;
    s
}

fn text(m: &Message) -> Vec<u8> {
    let mut v = Vec::new();
    m.write_to(&mut v);
    v
}

#[test]
fn rfc5424_example_1_with_bom() {
    let m = Message {
        facility: 4,
        severity: 2,
        timestamp: Some(ts("2003-10-11T22:14:15.003Z", 3, 0)),
        hostname: "mymachine.example.com",
        app_name: "su",
        procid: "",
        msgid: "ID47",
        structured_data: &[],
        msg: "'su root' failed for lonvick on /dev/pts/8",
        bom: true,
    };
    let want = b"<34>1 2003-10-11T22:14:15.003Z mymachine.example.com su - ID47 - \xef\xbb\xbf'su root' failed for lonvick on /dev/pts/8";
    assert_eq!(text(&m), want.to_vec());
}

#[test]
fn rfc5424_example_2_with_offset_and_microseconds() {
    let m = Message {
        facility: 20,
        severity: 5,
        timestamp: Some(ts("2003-08-24T05:14:15.000003Z", 6, -7 * 60)),
        hostname: "192.0.2.1",
        app_name: "myproc",
        procid: "8710",
        msgid: "",
        structured_data: &[],
        msg: "%% It's time to make the do-nuts.",
        bom: false,
    };
    assert_eq!(
        String::from_utf8(text(&m)).unwrap(),
        "<165>1 2003-08-24T05:14:15.000003-07:00 192.0.2.1 myproc 8710 - - %% It's time to make the do-nuts."
    );
}

#[test]
fn rfc5424_examples_3_and_4_structured_data() {
    let p1 = [
        ("iut", "3"),
        ("eventSource", "Application"),
        ("eventID", "1011"),
    ];
    let p2 = [("class", "high")];
    let sd = [
        SdElement {
            id: "exampleSDID@32473",
            params: &p1,
        },
        SdElement {
            id: "examplePriority@32473",
            params: &p2,
        },
    ];
    let m = Message {
        facility: 20,
        severity: 5,
        timestamp: Some(ts("2003-10-11T22:14:15.003Z", 3, 0)),
        hostname: "mymachine.example.com",
        app_name: "evntslog",
        procid: "",
        msgid: "ID47",
        structured_data: &sd[..1],
        msg: "An application event log entry...",
        bom: true,
    };
    let want = b"<165>1 2003-10-11T22:14:15.003Z mymachine.example.com evntslog - ID47 [exampleSDID@32473 iut=\"3\" eventSource=\"Application\" eventID=\"1011\"] \xef\xbb\xbfAn application event log entry...";
    assert_eq!(text(&m), want.to_vec());
    let m4 = Message {
        structured_data: &sd,
        msg: "",
        bom: false,
        ..m
    };
    assert_eq!(
        String::from_utf8(text(&m4)).unwrap(),
        "<165>1 2003-10-11T22:14:15.003Z mymachine.example.com evntslog - ID47 [exampleSDID@32473 iut=\"3\" eventSource=\"Application\" eventID=\"1011\"][examplePriority@32473 class=\"high\"]"
    );
}

#[test]
fn param_values_escape_quote_backslash_and_bracket() {
    let p = [("v", "a\"b\\c]d")];
    let sd = [SdElement {
        id: "x@32473",
        params: &p,
    }];
    let m = Message {
        facility: 1,
        severity: 0,
        timestamp: None,
        hostname: "",
        app_name: "",
        procid: "",
        msgid: "",
        structured_data: &sd,
        msg: "",
        bom: false,
    };
    assert_eq!(
        String::from_utf8(text(&m)).unwrap(),
        r#"<8>1 - - - - - [x@32473 v="a\"b\\c\]d"]"#
    );
}

#[test]
fn octet_counting_counts_octets_not_characters() {
    // RFC 6587 3.4.1: MSG-LEN is the octet count of SYSLOG-MSG; the BOM and 'é' are multi-octet.
    let msg = "<34>1 2003-10-11T22:14:15.003Z mymachine.example.com su - ID47 - \u{feff}'su root' failed é".as_bytes();
    let mut f = Vec::new();
    frame_octet_counting(msg, &mut f);
    frame_octet_counting(b"<13>1 - - - - - -", &mut f);
    let first_len = msg.len();
    assert_eq!(first_len, 87);
    assert!(f.starts_with(b"87 <34>1 "));
    assert_eq!(&f[3 + 87..], b"17 <13>1 - - - - - -");
    let (msgs, used) = parse_octet_counted(&f).unwrap();
    assert_eq!(msgs, vec![msg.to_vec(), b"<13>1 - - - - - -".to_vec()]);
    assert_eq!(used, f.len());
    // A partial frame stays for the next read; garbage is a framing error.
    let (msgs, used) = parse_octet_counted(&f[..50]).unwrap();
    assert!(msgs.is_empty() && used == 0);
    assert!(parse_octet_counted(b"<34>1 x").is_err());
}

#[test]
fn a_batch_counts_only_frames_written_whole() {
    let q = SendQueue::new(8);
    for (dev, len) in [(0, 5), (1, 7), (0, 3)] {
        assert!(q.push(dev, vec![b'x'; len]));
    }
    let mut b = Batch::default();
    assert!(q.front_batch(Duration::ZERO, 12, &mut b));
    // 5 + 7 fit the 12-byte bound, the third frame waits for the next batch.
    assert_eq!(
        (b.bytes.len(), b.frames.clone()),
        (12, vec![(0, 5), (1, 7)])
    );
    assert_eq!(
        [0, 4, 5, 11, 12].map(|w| b.whole_frames(w)),
        [0, 0, 1, 1, 2]
    );
    q.pop(1);
    assert!(q.front_batch(Duration::ZERO, 1, &mut b));
    // A frame larger than the bound still goes, alone.
    assert_eq!(b.frames, vec![(1, 7)]);
    assert_eq!(q.len(), 2);
}

#[test]
fn full_queue_refuses() {
    let q = SendQueue::new(2);
    assert!(q.push(0, vec![1]) && q.push(0, vec![2]));
    assert!(!q.push(0, vec![3]));
    assert_eq!(q.len(), 2);
}
