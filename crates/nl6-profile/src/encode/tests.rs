use super::*;

#[test]
fn label_text_is_quoted_as_go_quotes_it() {
    // Go's fmt %q (strconv.Quote) on the same strings.
    assert_eq!(go_quote("snmp"), r#""snmp""#);
    assert_eq!(go_quote(r#"a"b\c"#), r#""a\"b\\c""#);
    assert_eq!(go_quote("tab\there\nx\u{1b}"), r#""tab\there\nx\x1b""#);
    assert_eq!(go_quote("ünï"), "\"ünï\"");
    assert_eq!(
        label_string(&[("subsystem", "snmp"), ("a", "b")]),
        r#"{"a":"b", "subsystem":"snmp"}"#
    );
}

#[test]
fn scale_matches_go_by_hand() {
    // One 512 KiB object at the default rate: avg/rate = 1, scale = 1/(1-e^-1) = 1.58197670686...
    assert_eq!(scale_heap_sample(1, 524_288, 524_288), (1, 829_411));
    // 10 objects of 4096 bytes: scale = 1/(1-e^(-4096/524288)) = 128.50...
    assert_eq!(scale_heap_sample(10, 40_960, 524_288), (1285, 5_263_386));
    assert_eq!(scale_heap_sample(0, 100, 524_288), (0, 0));
    assert_eq!(scale_heap_sample(3, 0, 524_288), (0, 0));
    assert_eq!(scale_heap_sample(3, 300, 1), (3, 300));
}

#[test]
fn heap_values_use_alloc_minus_free() {
    let r = HeapRecord {
        stack: vec![],
        size: 4096,
        alloc_objects: 10,
        alloc_bytes: 40_960,
        free_objects: 10,
        free_bytes: 40_960,
    };
    assert_eq!(heap_values(&r, 524_288), [1285, 5_263_386, 0, 0]);
}

#[test]
fn label_string_is_sorted_and_quoted() {
    assert_eq!(
        label_string(&[("thread_name", "a\"b"), ("subsystem", "snmp")]),
        r#"{"subsystem":"snmp", "thread_name":"a\"b"}"#
    );
    assert_eq!(label_string(&[]), "");
}

#[test]
fn tabwriter_pads_with_tabs_to_multiples_of_eight() {
    let rows = vec![
        vec![
            "#".to_string(),
            "0x1".to_string(),
            "short+0x1".to_string(),
            "a.rs:1".to_string(),
        ],
        vec![
            "#".to_string(),
            "0x2".to_string(),
            "a_much_longer_name+0x2".to_string(),
            "b.rs:2".to_string(),
        ],
    ];
    let out = tabwrite(&rows);
    // Column 3 is 23 wide -> 24: "short+0x1" (9) gets 2 tabs, the long name 1.
    assert_eq!(
        out,
        "#\t0x1\tshort+0x1\t\ta.rs:1\n#\t0x2\ta_much_longer_name+0x2\tb.rs:2\n"
    );
}

#[test]
fn allocator_frames_are_recognised() {
    assert!(is_allocator_frame("alloc::alloc::exchange_malloc"));
    assert!(is_allocator_frame("alloc::raw_vec::RawVec<T,A>::grow_one"));
    assert!(is_allocator_frame(
        "<nl6_profile::heap::SamplingAllocator<A> as core::alloc::global::GlobalAlloc>::alloc"
    ));
    assert!(!is_allocator_frame("nl6::lab::snmp::serve"));
    for inlined in [
        "alloc::vec::Vec<T,A>::push_mut",
        "<alloc::vec::Vec<T> as core::clone::Clone>::clone",
        "<T as alloc::slice::<impl [T]>::to_vec_in::ConvertVec>::to_vec",
        "__rustc::__rust_alloc",
    ] {
        assert!(is_inlined_allocation_frame(inlined), "{inlined}");
    }
    assert!(!is_inlined_allocation_frame("nl6::lab::snmp::bulk"));
    assert!(!is_inlined_allocation_frame(
        "<nl6::lab::snmp::Message as core::fmt::Display>::fmt"
    ));
}
