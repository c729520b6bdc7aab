//! The bucket's credentials as every S3 tool takes them: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`
//! and `AWS_SESSION_TOKEN` from the environment, or the `[default]` (or `$AWS_PROFILE`) section of an AWS
//! shared credentials file named by `-s3-credentials`. Never from argv; no error or log line built here
//! quotes a value (only names: the file, the section, the missing field).
#![forbid(unsafe_code)]

use std::path::Path;

use rusty_s3::Credentials;

/// Credentials from `file` when given, else from the environment read through `env`.
pub fn load(
    file: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Credentials, String> {
    let (key, secret, token) = match file {
        Some(path) => from_file(path, env)?,
        None => (
            env("AWS_ACCESS_KEY_ID"),
            env("AWS_SECRET_ACCESS_KEY"),
            env("AWS_SESSION_TOKEN"),
        ),
    };
    let from = || match file {
        Some(p) => format!("-s3-credentials {}", p.display()),
        None => "the environment".to_string(),
    };
    match (key.filter(|k| !k.is_empty()), secret.filter(|s| !s.is_empty())) {
        (Some(k), Some(s)) => Ok(match token.filter(|t| !t.is_empty()) {
            Some(t) => Credentials::new_with_token(k, s, t),
            None => Credentials::new(k, s),
        }),
        _ => Err(format!(
            "no bucket credentials in {}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (GCS: an HMAC key of a service account), or pass -s3-credentials FILE ([default] aws_access_key_id = …, aws_secret_access_key = …)",
            from()
        )),
    }
}

type Fields = (Option<String>, Option<String>, Option<String>);

fn from_file(path: &Path, env: &dyn Fn(&str) -> Option<String>) -> Result<Fields, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("-s3-credentials {}: {e}", path.display()))?;
    let profile = env("AWS_PROFILE").unwrap_or_else(|| "default".to_string());
    let mut in_section = false;
    let mut seen = false;
    let (mut key, mut secret, mut token) = (None, None, None);
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            in_section = name.trim() == profile;
            seen |= in_section;
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        if !in_section {
            continue;
        }
        let v = Some(v.trim().to_string());
        match k.trim() {
            "aws_access_key_id" => key = v,
            "aws_secret_access_key" => secret = v,
            "aws_session_token" => token = v,
            _ => {}
        }
    }
    if !seen {
        return Err(format!(
            "-s3-credentials {}: no [{profile}] section",
            path.display()
        ));
    }
    Ok((key, secret, token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_and_file_and_errors_without_values() {
        let env = |k: &str| match k {
            "AWS_ACCESS_KEY_ID" => Some("AKIDEXAMPLE".to_string()),
            "AWS_SECRET_ACCESS_KEY" => Some("s3cr3t".to_string()),
            _ => None,
        };
        let c = load(None, &env).unwrap();
        assert_eq!(
            (c.key(), c.secret(), c.token()),
            ("AKIDEXAMPLE", "s3cr3t", None)
        );
        let d = std::env::temp_dir().join(format!("nl6-s3creds-{}", std::process::id()));
        std::fs::write(
            &d,
            "[other]\naws_access_key_id = NO\n[default]\naws_access_key_id = FILEKEY\naws_secret_access_key=FILESECRET\naws_session_token = TOK\n",
        )
        .unwrap();
        let c = load(Some(&d), &|_| None).unwrap();
        assert_eq!(
            (c.key(), c.secret(), c.token()),
            ("FILEKEY", "FILESECRET", Some("TOK"))
        );
        let e = load(Some(&d), &|k| {
            (k == "AWS_PROFILE").then(|| "missing".into())
        })
        .unwrap_err();
        assert!(e.contains("no [missing] section"), "{e}");
        std::fs::write(&d, "[default]\naws_access_key_id = FILEKEY\n").unwrap();
        let e = load(Some(&d), &|_| None).unwrap_err();
        assert!(
            !e.contains("FILEKEY") && e.contains("no bucket credentials"),
            "{e}"
        );
        let e = load(None, &|k| (k == "AWS_ACCESS_KEY_ID").then(|| "K".into())).unwrap_err();
        assert!(e.contains("the environment"), "{e}");
        std::fs::remove_file(&d).unwrap();
    }
}
