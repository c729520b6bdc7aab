//! The root-as-leaf allowance on certificates made by `openssl` exactly as the lab recipe writes it.
use super::*;
use rustls::pki_types::pem::PemObject;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The lab recipe, verbatim: `openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost -addext
/// subjectAltName=IP:127.0.0.1,DNS:localhost` (+ -keyout/-out/-days). Returns the certificate's DER.
fn lab_certificate(dir: &Path) -> CertificateDer<'static> {
    std::fs::create_dir_all(dir).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let out = Command::new("openssl")
        .args("req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1,DNS:localhost".split(' '))
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .args(["-days", "2"])
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    CertificateDer::from_pem_file(&cert).unwrap()
}

fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("nl6-tls-{name}-{}", std::process::id()))
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn now() -> UnixTime {
    UnixTime::now()
}

fn name(n: &str) -> ServerName<'static> {
    ServerName::try_from(n.to_string()).unwrap()
}

#[test]
fn a_configured_root_is_accepted_as_the_server_certificate_with_name_and_time_checked() {
    let dir = scratch("root-as-leaf");
    let cert = lab_certificate(&dir);
    let v = RootAsLeafVerifier::new(vec![cert.clone()], provider()).unwrap();
    for host in ["localhost", "127.0.0.1"] {
        v.verify_server_cert(&cert, &[], &name(host), &[], now())
            .unwrap_or_else(|e| panic!("{host}: {e}"));
    }
    // The plain webpki verifier refuses it: this is the case the allowance exists for.
    let mut store = RootCertStore::empty();
    store.add(cert.clone()).unwrap();
    let plain = WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider())
        .build()
        .unwrap();
    let e = plain
        .verify_server_cert(&cert, &[], &name("localhost"), &[], now())
        .unwrap_err();
    assert!(is_ca_used_as_end_entity(&e), "{e:?}");
    // Name and validity are still checked.
    let e = v
        .verify_server_cert(&cert, &[], &name("example.com"), &[], now())
        .unwrap_err();
    assert!(
        matches!(
            e,
            rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. }
            )
        ),
        "{e:?}"
    );
    let in_ten_years = UnixTime::since_unix_epoch(std::time::Duration::from_secs(
        now().as_secs() + 10 * 365 * 86_400,
    ));
    let e = v
        .verify_server_cert(&cert, &[], &name("localhost"), &[], in_ten_years)
        .unwrap_err();
    assert!(
        matches!(
            e,
            rustls::Error::InvalidCertificate(
                CertificateError::Expired | CertificateError::ExpiredContext { .. }
            )
        ),
        "{e:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_ca_certificate_that_is_not_a_configured_root_is_still_refused() {
    let dir = scratch("other-root");
    let server = lab_certificate(&dir.join("server"));
    let configured = lab_certificate(&dir.join("configured"));
    let v = RootAsLeafVerifier::new(vec![configured], provider()).unwrap();
    let e = v
        .verify_server_cert(&server, &[], &name("localhost"), &[], now())
        .unwrap_err();
    assert!(matches!(e, rustls::Error::InvalidCertificate(_)), "{e:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn validity_is_read_from_the_der() {
    let dir = scratch("validity");
    let cert = lab_certificate(&dir);
    let (nb, na) = validity(cert.as_ref()).unwrap();
    let t = now().as_secs();
    assert!(nb <= t + 60 && t <= nb + 3600, "notBefore {nb} vs now {t}");
    assert_eq!(na - nb, 2 * 86_400, "-days 2");
    assert_eq!(validity(&cert.as_ref()[..40]), None);
    let _ = std::fs::remove_dir_all(&dir);
}
