//! The push's TLS: rustls under ureq, with the roots rustls-native-certs loads (`SSL_CERT_FILE` and/or
//! `SSL_CERT_DIR` when set, else the system bundle, as the platform verifier does on Linux) and one
//! allowance that curl and Go make too: a server certificate that is itself one of those roots is
//! accepted although it says `CA:TRUE`. The usual lab recipe (`openssl req -x509 -newkey rsa:2048 -nodes
//! -subj /CN=localhost -addext subjectAltName=…`) makes exactly such a certificate, and webpki refuses it
//! as `CaUsedAsEndEntity`.
//!
//! [`RootAsLeafVerifier`] runs webpki's full verification first; only its `CaUsedAsEndEntity` refusal of a
//! certificate byte-for-byte equal to a configured root is overturned, and then the name (the URL's host
//! against the certificate's subjectAltName) and the validity period are checked here. Every other
//! refusal stands, and the handshake signatures are verified by webpki as before.
//!
//! [`LabTlsConnector`] is the ureq connector that uses it (ureq's own rustls connector takes no custom
//! verifier); roots load on the first https connection, never at push start.
#![forbid(unsafe_code)]

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{
    CertificateError, ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore,
    SignatureScheme, StreamOwned,
};
use std::io::{Read, Write};
use std::sync::{Arc, OnceLock};
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, Either, LazyBuffers, NextTimeout, Transport,
    TransportAdapter,
};

/// webpki's verifier, plus acceptance of a server certificate that is itself a configured root.
#[derive(Debug)]
pub struct RootAsLeafVerifier {
    inner: Arc<WebPkiServerVerifier>,
    roots: Vec<CertificateDer<'static>>,
}

impl RootAsLeafVerifier {
    /// A verifier trusting `roots` (unparsable ones are skipped, as the platform verifier does).
    pub fn new(
        roots: Vec<CertificateDer<'static>>,
        provider: Arc<CryptoProvider>,
    ) -> Result<RootAsLeafVerifier, rustls::Error> {
        let mut store = RootCertStore::empty();
        let (added, _ignored) = store.add_parsable_certificates(roots.iter().cloned());
        if added == 0 {
            return Err(rustls::Error::General(
                "no CA certificates could be loaded (SSL_CERT_FILE, SSL_CERT_DIR or the system bundle)"
                    .into(),
            ));
        }
        let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider)
            .build()
            .map_err(|e| rustls::Error::General(e.to_string()))?;
        Ok(RootAsLeafVerifier { inner, roots })
    }

    /// The roots rustls-native-certs finds in the environment (`SSL_CERT_FILE`, `SSL_CERT_DIR`) or the
    /// system bundle.
    pub fn from_environment(provider: Arc<CryptoProvider>) -> Result<Self, rustls::Error> {
        Self::new(rustls_native_certs::load_native_certs().certs, provider)
    }

    /// The certificate is one of the configured roots: check what webpki did not get to (the name) and,
    /// independently of webpki's order of checks, the validity period.
    fn verify_root_as_leaf(
        end_entity: &CertificateDer<'_>,
        server_name: &ServerName<'_>,
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let parsed = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_name(&parsed, server_name)?;
        let (not_before, not_after) = validity(end_entity.as_ref()).ok_or(
            rustls::Error::InvalidCertificate(CertificateError::BadEncoding),
        )?;
        let now = now.as_secs();
        if now < not_before {
            return Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidYet,
            ));
        }
        if now > not_after {
            return Err(rustls::Error::InvalidCertificate(CertificateError::Expired));
        }
        Ok(ServerCertVerified::assertion())
    }
}

/// webpki's refusal of a certificate with `CA:TRUE` in the end-entity position.
fn is_ca_used_as_end_entity(e: &rustls::Error) -> bool {
    match e {
        rustls::Error::InvalidCertificate(CertificateError::Other(other)) => matches!(
            other.0.downcast_ref::<webpki::Error>(),
            Some(webpki::Error::CaUsedAsEndEntity)
        ),
        _ => false,
    }
}

impl ServerCertVerifier for RootAsLeafVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(e)
                if is_ca_used_as_end_entity(&e)
                    && self.roots.iter().any(|r| r.as_ref() == end_entity.as_ref()) =>
            {
                Self::verify_root_as_leaf(end_entity, server_name, now)
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// One DER element of tag `tag` at the start of `input`: `(content, rest)`.
fn der_element(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (&first, rest) = input.split_first()?;
    if first != tag {
        return None;
    }
    let (&len0, rest) = rest.split_first()?;
    let (len, rest) = if len0 < 0x80 {
        (len0 as usize, rest)
    } else {
        let n = (len0 & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n].iter().fold(0usize, |l, &b| (l << 8) | b as usize);
        (len, &rest[n..])
    };
    (rest.len() >= len).then(|| rest.split_at(len))
}

/// A UTCTime (`YYMMDDHHMMSSZ`, tag 0x17) or GeneralizedTime (`YYYYMMDDHHMMSSZ`, 0x18) at the start of
/// `input`, as seconds since the epoch: `(seconds, rest)`.
fn der_time(input: &[u8]) -> Option<(u64, &[u8])> {
    let (text, rest, year_digits) = match input.first()? {
        0x17 => der_element(input, 0x17).map(|(t, r)| (t, r, 2))?,
        0x18 => der_element(input, 0x18).map(|(t, r)| (t, r, 4))?,
        _ => return None,
    };
    let text = std::str::from_utf8(text).ok()?.strip_suffix('Z')?;
    if text.len() != year_digits + 10 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let num = |at: usize, n: usize| text[at..at + n].parse::<i64>().ok();
    let mut year = num(0, year_digits)?;
    if year_digits == 2 {
        // RFC 5280 §4.1.2.5.1: YY ≥ 50 is 19YY.
        year += if year >= 50 { 1900 } else { 2000 };
    }
    let at = year_digits;
    let (month, day) = (num(at, 2)? as u32, num(at + 2, 2)? as u32);
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + num(at + 4, 2)? * 3600 + num(at + 6, 2)? * 60 + num(at + 8, 2)?;
    Some((u64::try_from(secs).ok()?, rest))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The validity period (notBefore, notAfter) of a DER certificate (RFC 5280 §4.1).
fn validity(der: &[u8]) -> Option<(u64, u64)> {
    let (certificate, _) = der_element(der, 0x30)?;
    let (mut tbs, _) = der_element(certificate, 0x30)?;
    if tbs.first() == Some(&0xa0) {
        tbs = der_element(tbs, 0xa0)?.1; // [0] version
    }
    tbs = der_element(tbs, 0x02)?.1; // serialNumber
    tbs = der_element(tbs, 0x30)?.1; // signature algorithm
    tbs = der_element(tbs, 0x30)?.1; // issuer
    let (period, _) = der_element(tbs, 0x30)?;
    let (not_before, rest) = der_time(period)?;
    let (not_after, _) = der_time(rest)?;
    Some((not_before, not_after))
}

/// ureq connector wrapping the chained transport in rustls with [`RootAsLeafVerifier`] for https.
#[derive(Debug, Default)]
pub struct LabTlsConnector {
    config: OnceLock<Arc<ClientConfig>>,
}

impl LabTlsConnector {
    fn client_config(&self) -> Result<Arc<ClientConfig>, rustls::Error> {
        if let Some(c) = self.config.get() {
            return Ok(c.clone());
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = RootAsLeafVerifier::from_environment(provider.clone())?;
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .dangerous() // a custom verifier: webpki's checks plus the root-as-leaf allowance above
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        Ok(self.config.get_or_init(|| Arc::new(config)).clone())
    }
}

impl<In: Transport> Connector<In> for LabTlsConnector {
    type Out = Either<In, LabTlsTransport>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<In>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        let Some(transport) = chained else {
            return Ok(None);
        };
        if !details.needs_tls() || transport.is_tls() {
            return Ok(Some(Either::A(transport)));
        }
        let host = details
            .uri
            .host()
            .ok_or(ureq::Error::Tls("https address without a host"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(host)
            .map_err(|_| ureq::Error::Tls("the host is not a valid TLS server name"))?
            .to_owned();
        let mut conn = ClientConnection::new(self.client_config()?, name)?;
        let mut sock = TransportAdapter::new(transport.boxed(), details.current_time.clone());
        sock.set_timeout(details.timeout);
        conn.complete_io(&mut sock)?;
        let buffers = LazyBuffers::new(
            details.config.input_buffer_size(),
            details.config.output_buffer_size(),
        );
        Ok(Some(Either::B(LabTlsTransport {
            buffers,
            stream: StreamOwned { conn, sock },
        })))
    }
}

/// An established TLS connection under ureq.
pub struct LabTlsTransport {
    buffers: LazyBuffers,
    stream: StreamOwned<ClientConnection, TransportAdapter>,
}

impl std::fmt::Debug for LabTlsTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LabTlsTransport").finish_non_exhaustive()
    }
}

impl Transport for LabTlsTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        self.stream.sock.set_timeout(timeout);
        self.stream.write_all(&self.buffers.output()[..amount])?;
        Ok(())
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        self.stream.sock.set_timeout(timeout);
        let n = self.stream.read(self.buffers.input_append_buf())?;
        self.buffers.input_appended(n);
        Ok(n > 0)
    }

    fn is_open(&mut self) -> bool {
        self.stream.sock.get_mut().is_open()
    }

    fn is_tls(&self) -> bool {
        true
    }
}

#[cfg(test)]
#[path = "tls_tests.rs"]
mod tests;
