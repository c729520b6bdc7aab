//! The label-set table is bounded and says so: past its text limit and past its set limit, building a
//! set returns a typed error (`try_new`) or the overflow set (`new`), never a panic; every refusal is
//! counted, and the profiles' comments name it. Its own test binary: it fills the process's table.
mod support;
use nl6_profile::labels::{self, LabelError, LabelSet, MAX_SETS, MAX_TEXT_BYTES};
use nl6_profile::{encode, threads};
use prost::Message;
use std::io::Read;
use std::time::Duration;
use support::proto;

#[test]
fn a_full_table_refuses_with_a_reason_and_the_profiles_say_so() {
    assert_eq!(labels::refused(), 0);
    // Text first: 1 KiB values fill the text budget long before the set budget.
    let big = |i: usize| format!("{i:01024}");
    let mut built = 0;
    let text_error = loop {
        match LabelSet::try_new([("blob", big(built))]) {
            Ok(_) => built += 1,
            Err(e) => break e,
        }
        assert!(built <= MAX_TEXT_BYTES / 1024, "text limit never reached");
    };
    assert_eq!(
        text_error,
        LabelError::TooMuchText {
            max: MAX_TEXT_BYTES
        }
    );
    assert!(
        text_error.to_string().contains("bytes of keys and values"),
        "{text_error}"
    );
    // A set already held is still found (no new text), and the overflow set is what `new` returns.
    assert_eq!(
        LabelSet::new([("blob", big(0))]).get("blob").map(str::len),
        Some(1024)
    );
    assert_eq!(LabelSet::new([("blob", big(built))]), LabelSet::OVERFLOW);
    // Sets made of strings already held need no text, so they fit until the set count runs out.
    let mut i = 0;
    let set_error = loop {
        match LabelSet::try_new([(big(i % built), big(i / built))]) {
            Ok(_) => i += 1,
            Err(e) => break e,
        }
        assert!(i <= MAX_SETS, "set limit never reached");
    };
    assert_eq!(set_error, LabelError::TooManySets { max: MAX_SETS });
    let overflow = LabelSet::new([("blob", big(1))].into_iter().chain([("more", big(2))]));
    assert_eq!(overflow, LabelSet::OVERFLOW);
    assert_eq!(overflow.pairs(), &[("label_overflow", "true")]);
    assert_eq!(labels::refused(), 4);

    // Samples taken under it say so, and the profile's comments give the count.
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (ready_tx, ready) = std::sync::mpsc::channel::<()>();
    let t = threads::spawn_labelled(overflow, "overflowed", move || {
        ready_tx.send(()).unwrap();
        let _ = rx.recv();
    })
    .unwrap();
    ready.recv().unwrap();
    let stacks = threads::capture_all(Duration::from_secs(2));
    drop(tx);
    t.join().unwrap();
    let mine = stacks
        .iter()
        .find(|t| t.name == "overflowed")
        .unwrap_or_else(|| panic!("not listed: {stacks:?}"));
    assert_eq!(mine.label, LabelSet::OVERFLOW.index(), "{mine:?}");
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(&encode::goroutine(&stacks)[..])
        .read_to_end(&mut raw)
        .unwrap();
    let p = proto::Profile::decode(&raw[..]).unwrap();
    let comments: Vec<&str> = p
        .comment
        .iter()
        .map(|&i| p.string_table[i as usize].as_str())
        .collect();
    assert!(
        comments
            .iter()
            .any(|c| c.contains("4 label set(s) refused")),
        "comments: {comments:?}"
    );
    assert!(p.string_table.iter().any(|s| s == "label_overflow"));
}
