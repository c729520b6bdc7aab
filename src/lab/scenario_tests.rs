//! Tests of [`super`]: request bodies, good and bad (each error names its field).
use super::*;

fn parse(body: &str) -> Result<Request, RequestError> {
    parse_request(body.as_bytes(), |d| d == "nl6-dev-0000")
}

#[test]
fn good_bodies_parse() {
    let r = parse(r#"{"name":"link-flap","device":"nl6-dev-0000","duration":"30s"}"#).unwrap();
    assert_eq!(r.duration, Duration::from_secs(30));
    assert_eq!(r.start_at, None);
    let r = parse(r#"{"name":"link-flap","device":"nl6-dev-0000","duration":"1m","start_at":"2030-01-01T00:00:00Z"}"#).unwrap();
    assert!(r.start_at.is_some());
}

#[test]
fn bad_bodies_name_the_field() {
    for (body, needle) in [
        ("not json", "body: invalid JSON"),
        ("[]", "body: want a JSON object"),
        (
            r#"{"device":"nl6-dev-0000","duration":"1s"}"#,
            "field \"name\" is required",
        ),
        (
            r#"{"name":"meltdown","device":"nl6-dev-0000","duration":"1s"}"#,
            "field \"name\": unknown scenario",
        ),
        (
            r#"{"name":"link-flap","device":"nope","duration":"1s"}"#,
            "field \"device\": no device",
        ),
        (
            r#"{"name":"link-flap","device":"nl6-dev-0000"}"#,
            "field \"duration\" is required",
        ),
        (
            r#"{"name":"link-flap","device":"nl6-dev-0000","duration":"soon"}"#,
            "field \"duration\": invalid duration",
        ),
        (
            r#"{"name":"link-flap","device":"nl6-dev-0000","duration":"0s"}"#,
            "field \"duration\": must be above 0",
        ),
        (
            r#"{"name":"link-flap","device":"nl6-dev-0000","duration":30}"#,
            "field \"duration\" must be a string",
        ),
        (
            r#"{"name":"link-flap","device":"nl6-dev-0000","duration":"1s","start_at":"tomorrow"}"#,
            "field \"start_at\"",
        ),
        (
            r#"{"name":"link-flap","device":"nl6-dev-0000","duration":"1s","when":"now"}"#,
            "field \"when\" is not known",
        ),
    ] {
        let e = parse(body).unwrap_err().to_string();
        assert!(e.starts_with(needle), "{body}: {e}");
    }
}

#[test]
fn impossible_start_dates_are_refused_naming_start_at() {
    for date in [
        "2030-02-30T00:00:00Z",
        "2030-11-31T00:00:00Z",
        "2030-01-01T00:00:00+99:99",
        "2030-01-01T00:00:60Z",
    ] {
        let body = format!(
            r#"{{"name":"link-flap","device":"nl6-dev-0000","duration":"1s","start_at":"{date}"}}"#
        );
        let err = parse(&body).expect_err(date).to_string();
        assert!(err.starts_with("field \"start_at\""), "{date}: {err}");
    }
}

#[test]
fn duplicate_keys_are_refused_naming_the_key() {
    let err =
        parse(r#"{"name":"link-flap","device":"nl6-dev-0000","duration":"1s","duration":"2s"}"#)
            .unwrap_err()
            .to_string();
    assert!(err.contains("duplicate key \"duration\""), "{err}");
}
