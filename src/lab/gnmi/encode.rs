//! Leaf values on the wire: `JSON_IETF` (RFC 7951: 64-bit integers as strings), `JSON` and `PROTO`
//! (typed `TypedValue`s); the encodings a request may ask for and the refusal of the others; a
//! notification of leaves; and the value a `Set` carries, read back as a boolean.
#![forbid(unsafe_code)]

use super::path::{to_proto, Elem};
use super::proto::gnmi::{typed_value::Value as Tv, Encoding, Notification, TypedValue, Update};
use super::schema::Val;
use tonic::Status;

/// The encodings this target serves, as Capabilities lists them.
pub const SUPPORTED: [Encoding; 3] = [Encoding::Json, Encoding::JsonIetf, Encoding::Proto];

/// The encoding a request asked for (as its wire number), or the `UNIMPLEMENTED` status gNMI
/// specifies for one the target does not support.
pub fn requested(number: i32) -> Result<Encoding, Status> {
    match Encoding::try_from(number) {
        Ok(e) if SUPPORTED.contains(&e) => Ok(e),
        Ok(e) => Err(Status::unimplemented(format!(
            "encoding {} is not supported; this target serves JSON, JSON_IETF and PROTO",
            e.as_str_name()
        ))),
        Err(_) => Err(Status::unimplemented(format!(
            "encoding {number} is not a gNMI encoding; this target serves JSON, JSON_IETF and PROTO"
        ))),
    }
}

/// `val` in encoding `enc`.
pub fn typed(val: &Val, enc: Encoding) -> TypedValue {
    let json = |ietf: bool| -> Vec<u8> {
        let v = match val {
            Val::Str(s) => serde_json::Value::from(s.as_str()),
            Val::U32(n) => serde_json::Value::from(*n),
            Val::U64(n) if ietf => serde_json::Value::from(n.to_string()),
            Val::U64(n) => serde_json::Value::from(*n),
            Val::Bool(b) => serde_json::Value::from(*b),
        };
        v.to_string().into_bytes()
    };
    let value = match enc {
        Encoding::JsonIetf => Tv::JsonIetfVal(json(true)),
        Encoding::Json => Tv::JsonVal(json(false)),
        _ => match val {
            Val::Str(s) => Tv::StringVal(s.clone()),
            Val::U32(n) => Tv::UintVal(u64::from(*n)),
            Val::U64(n) => Tv::UintVal(*n),
            Val::Bool(b) => Tv::BoolVal(*b),
        },
    };
    TypedValue { value: Some(value) }
}

/// One notification at `timestamp` (ns) holding `leaves` (each a path and its value), with the
/// request's target in its prefix.
pub fn notification<'a>(
    leaves: impl IntoIterator<Item = (&'a [Elem], &'a Val)>,
    enc: Encoding,
    timestamp: u64,
    target: &str,
) -> Notification {
    let prefix = (!target.is_empty()).then(|| super::proto::gnmi::Path {
        target: target.to_string(),
        ..Default::default()
    });
    Notification {
        timestamp: timestamp as i64,
        prefix,
        update: leaves
            .into_iter()
            .map(|(path, val)| Update {
                path: Some(to_proto(path)),
                val: Some(typed(val, enc)),
                ..Update::default()
            })
            .collect(),
        ..Notification::default()
    }
}

/// Why a `Set` value is not the boolean `enabled` takes (what was sent, quoted and bounded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetValueError {
    /// JSON that does not parse (serde_json's reason).
    Json(String),
    /// A typed value that is no boolean.
    NotBoolean(String),
    /// A JSON object with more than `enabled`.
    NotEnabled(String),
    /// A JSON value that is neither true nor false.
    NotTrueFalse(String),
    NoValue,
}

impl std::fmt::Display for SetValueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SetValueError::Json(e) => write!(f, "the JSON value does not parse: {e}"),
            SetValueError::NotBoolean(v) => write!(f, "want a boolean for enabled, not {v}"),
            SetValueError::NotEnabled(v) => {
                write!(f, "only `enabled` can be set under config, not {v}")
            }
            SetValueError::NotTrueFalse(v) => write!(f, "want true or false for enabled, not {v}"),
            SetValueError::NoValue => f.write_str("the update carries no value (set `val`)"),
        }
    }
}

impl std::error::Error for SetValueError {}

fn quoted(text: &str) -> String {
    super::limits::quote(text, super::limits::MAX_QUOTE_BYTES)
}

/// The boolean a `Set` update carries: `bool_val`, or JSON `true`/`false` (also inside an object
/// `{"enabled": …}`, module-qualified or not, when the path ends at `config`).
pub fn set_bool(v: Option<&TypedValue>) -> Result<bool, SetValueError> {
    let json = |bytes: &[u8]| {
        let v: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| SetValueError::Json(e.to_string()))?;
        json_bool(&v)
    };
    match v.and_then(|t| t.value.as_ref()) {
        Some(Tv::BoolVal(b)) => Ok(*b),
        Some(Tv::JsonIetfVal(b) | Tv::JsonVal(b)) => json(b),
        Some(Tv::StringVal(s) | Tv::AsciiVal(s)) if s == "true" || s == "false" => Ok(s == "true"),
        Some(other) => Err(SetValueError::NotBoolean(quoted(&format!("{other:?}")))),
        None => Err(SetValueError::NoValue),
    }
}

fn json_bool(v: &serde_json::Value) -> Result<bool, SetValueError> {
    match v {
        serde_json::Value::Bool(b) => Ok(*b),
        serde_json::Value::Object(m) => {
            let hit = m
                .iter()
                .find(|(k, _)| k.as_str() == "enabled" || k.ends_with(":enabled"));
            match hit {
                Some((_, v)) if m.len() == 1 => json_bool(v),
                _ => Err(SetValueError::NotEnabled(quoted(&v.to_string()))),
            }
        }
        other => Err(SetValueError::NotTrueFalse(quoted(&other.to_string()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_take_each_encoding() {
        let big = Val::U64(1 << 40);
        assert_eq!(
            typed(&big, Encoding::JsonIetf).value,
            Some(Tv::JsonIetfVal(b"\"1099511627776\"".to_vec()))
        );
        assert_eq!(
            typed(&big, Encoding::Json).value,
            Some(Tv::JsonVal(b"1099511627776".to_vec()))
        );
        assert_eq!(
            typed(&big, Encoding::Proto).value,
            Some(Tv::UintVal(1 << 40))
        );
        assert_eq!(
            typed(&Val::Bool(false), Encoding::Proto).value,
            Some(Tv::BoolVal(false))
        );
        assert!(requested(Encoding::Ascii as i32)
            .unwrap_err()
            .message()
            .contains("ASCII"));
        assert_eq!(requested(9).unwrap_err().code(), tonic::Code::Unimplemented);
    }

    #[test]
    fn set_values_read_as_booleans() {
        let t = |v| Some(TypedValue { value: Some(v) });
        assert_eq!(set_bool(t(Tv::BoolVal(false)).as_ref()), Ok(false));
        assert_eq!(
            set_bool(t(Tv::JsonIetfVal(b"true".to_vec())).as_ref()),
            Ok(true)
        );
        let obj = br#"{"openconfig-interfaces:enabled": false}"#.to_vec();
        assert_eq!(set_bool(t(Tv::JsonVal(obj)).as_ref()), Ok(false));
        assert!(set_bool(t(Tv::UintVal(1)).as_ref()).is_err());
        assert!(set_bool(None).is_err());
    }
}
