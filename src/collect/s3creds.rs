//! The bucket's credentials as every S3 tool takes them: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`
//! and `AWS_SESSION_TOKEN` from the environment, or the `[default]` (or `$AWS_PROFILE`) section of an AWS
//! shared credentials file named by `-s3-credentials`. Never from argv; no error or log line built here
//! quotes a value (only names: the file, the section, the missing field).
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

use rusty_s3::Credentials;

/// Why no credentials could be had (names only: never a value).
#[derive(Debug)]
pub enum CredsError {
    /// The `-s3-credentials` file could not be read.
    Read(PathBuf, std::io::Error),
    /// The file has no section for the profile (`default` or `$AWS_PROFILE`).
    NoSection(PathBuf, String),
    /// No key and secret in the file (given) or the environment (`None`).
    Missing(Option<PathBuf>),
}

impl std::fmt::Display for CredsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CredsError::Read(path, e) => write!(f, "-s3-credentials {}: {e}", path.display()),
            CredsError::NoSection(path, profile) => write!(
                f,
                "-s3-credentials {}: no [{profile}] section",
                path.display()
            ),
            CredsError::Missing(file) => {
                let from = match file {
                    Some(p) => format!("-s3-credentials {}", p.display()),
                    None => "the environment".to_string(),
                };
                write!(
                    f,
                    "no bucket credentials in {from}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (GCS: an HMAC key of a service account), or pass -s3-credentials FILE ([default] aws_access_key_id = …, aws_secret_access_key = …)"
                )
            }
        }
    }
}

impl std::error::Error for CredsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CredsError::Read(_, e) => Some(e),
            _ => None,
        }
    }
}

/// Credentials from `file` when given, else from the environment read through `env`.
pub fn load(
    file: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Credentials, CredsError> {
    let (key, secret, token) = match file {
        Some(path) => from_file(path, env)?,
        None => (
            env("AWS_ACCESS_KEY_ID"),
            env("AWS_SECRET_ACCESS_KEY"),
            env("AWS_SESSION_TOKEN"),
        ),
    };
    match (
        key.filter(|k| !k.is_empty()),
        secret.filter(|s| !s.is_empty()),
    ) {
        (Some(k), Some(s)) => Ok(match token.filter(|t| !t.is_empty()) {
            Some(t) => Credentials::new_with_token(k, s, t),
            None => Credentials::new(k, s),
        }),
        _ => Err(CredsError::Missing(file.map(Path::to_path_buf))),
    }
}

type Fields = (Option<String>, Option<String>, Option<String>);

fn from_file(path: &Path, env: &dyn Fn(&str) -> Option<String>) -> Result<Fields, CredsError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| CredsError::Read(path.to_path_buf(), e))?;
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
        return Err(CredsError::NoSection(path.to_path_buf(), profile));
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
        .unwrap_err()
        .to_string();
        assert!(e.contains("no [missing] section"), "{e}");
        std::fs::write(&d, "[default]\naws_access_key_id = FILEKEY\n").unwrap();
        let e = load(Some(&d), &|_| None).unwrap_err().to_string();
        assert!(
            !e.contains("FILEKEY") && e.contains("no bucket credentials"),
            "{e}"
        );
        let e = load(None, &|k| (k == "AWS_ACCESS_KEY_ID").then(|| "K".into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("the environment"), "{e}");
        std::fs::remove_file(&d).unwrap();
    }
}
