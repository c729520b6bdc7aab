//! JSON request bodies as nl6 accepts them: parsed into a `serde_json::Value`, refusing a key that
//! appears twice in one object (at any depth). serde_json alone keeps the last value, so
//! `{"enabled":true,"enabled":false}` would mean "closed" to nl6 and possibly "open" to a proxy or
//! audit log in front of it that keeps the first.
//!
//! Every JSON body nl6 reads (the gate's POST, a scenario's POST) goes through [`parse`].
#![forbid(unsafe_code)]

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// Why a body was refused.
#[derive(Debug)]
pub enum BodyError {
    /// Not JSON at all (serde_json's message says where).
    Invalid(serde_json::Error),
    /// Valid JSON with a key twice in one object: `duplicate key "enabled": each field may appear once
    /// at line 1 column 32`.
    DuplicateKey(String),
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::Invalid(e) => write!(f, "not valid JSON: {e}"),
            BodyError::DuplicateKey(m) => f.write_str(m),
        }
    }
}

/// Parses `body` as JSON, refusing a duplicate key (naming it) as well as anything serde_json refuses.
pub fn parse(body: &[u8]) -> Result<Value, BodyError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let parsed = Unique::deserialize_value(&mut de).and_then(|v| de.end().map(|()| v));
    parsed.map_err(|e| {
        // The visitor's only own error is the duplicate key; syntax and EOF errors are serde_json's.
        if e.is_data() {
            BodyError::DuplicateKey(e.to_string())
        } else {
            BodyError::Invalid(e)
        }
    })
}

/// A `Value` visitor whose objects refuse repeated keys.
struct Unique;

impl Unique {
    fn deserialize_value<'de, D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
        d.deserialize_any(Unique)
    }
}

/// One nested value, through the same visitor.
struct Nested(Value);

impl<'de> de::Deserialize<'de> for Nested {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Unique::deserialize_value(d).map(Nested)
    }
}

impl<'de> Visitor<'de> for Unique {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Unique::deserialize_value(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(Nested(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "duplicate key {key:?}: each field may appear once"
                )));
            }
            let Nested(v) = map.next_value()?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_refused_at_any_depth_and_named() {
        let e = parse(br#"{"enabled":true,"enabled":false}"#).unwrap_err();
        assert!(matches!(e, BodyError::DuplicateKey(_)), "{e}");
        assert!(
            e.to_string().starts_with("duplicate key \"enabled\""),
            "{e}"
        );
        let e = parse(br#"{"a":[{"b":1,"b":2}]}"#).unwrap_err();
        assert!(e.to_string().contains("duplicate key \"b\""), "{e}");
        // An escaped spelling of the same key is the same key.
        let e = parse(br#"{"enabled":true,"enabl\u0065d":false}"#).unwrap_err();
        assert!(e.to_string().contains("duplicate key"), "{e}");
    }

    #[test]
    fn other_documents_parse_as_serde_json_does() {
        for doc in [
            r#"{"a":1,"b":[1,2.5,-3,null,true,"x"],"c":{"a":1}}"#,
            "[]",
            "\"s\"",
            "18446744073709551615",
        ] {
            let ours = parse(doc.as_bytes()).unwrap();
            let theirs: Value = serde_json::from_str(doc).unwrap();
            assert_eq!(ours, theirs, "{doc}");
        }
        assert!(
            matches!(parse(b"{} x"), Err(BodyError::Invalid(_))),
            "trailing characters"
        );
        assert!(matches!(parse(b"{\"a\":"), Err(BodyError::Invalid(_))));
    }
}
