//! Listing a bucket's keys (ListObjectsV2) as a hostile store may answer it: bounded in keys, pages,
//! pages in a row without a key, bytes a page and time; a continuation token seen before ends the
//! listing as an error (the store loops). Keys longer than S3 allows are dropped as they arrive, so an
//! 8 MiB key costs one page's memory and is counted, never kept.
#![forbid(unsafe_code)]

use std::time::Duration;

use rusty_s3::actions::{ListObjectsV2, ListObjectsV2Response};
use rusty_s3::S3Action;

use super::s3::{S3Error, S3, SIGNED_FOR};
use super::s3key::{self, KeyError, Skipped};

/// Most keys one listing walks (a week of hourly cycles for 2 000 targets is ~2.7 M files; a
/// bigger archive is listed in part and the sweep says so).
pub const LIST_LIMIT: usize = 4_000_000;

/// Most pages one listing requests (a store answers at most 1 000 keys a page: [`LIST_LIMIT`]'s worth
/// and some short pages).
pub const LIST_PAGES: usize = LIST_LIMIT / 1000 + 100;

/// Most consecutive pages without a key before a listing stops (a real store does not send them).
pub const LIST_EMPTY_PAGES: usize = 16;

/// Longest one listing may take.
pub const LIST_TIME: Duration = Duration::from_secs(300);

/// Most bytes of one listing page read (1 000 keys of 1 024 bytes, entity-escaped, fit).
pub const LIST_PAGE_BYTES: u64 = 16 << 20;

/// Longest continuation token taken (AWS's are a few hundred bytes).
const TOKEN_MAX: usize = 4096;

/// Why a listing stopped before the store said it was complete; what was listed is still returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListCut {
    Keys,
    Pages,
    EmptyPages,
    Time,
}

impl std::fmt::Display for ListCut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListCut::Keys => write!(f, "listed only the first {LIST_LIMIT} keys"),
            ListCut::Pages => write!(f, "listed only the first {LIST_PAGES} pages"),
            ListCut::EmptyPages => write!(
                f,
                "stopped listing after {LIST_EMPTY_PAGES} pages in a row without a key"
            ),
            ListCut::Time => write!(f, "stopped listing after {LIST_TIME:?}"),
        }
    }
}

/// What one listing returned: the keys with their sizes, the keys dropped as too long to keep
/// ([`Skipped`]), and why it stopped early, if it did.
#[derive(Debug, Default)]
pub struct Listing {
    pub keys: Vec<(String, u64)>,
    pub skipped: Skipped,
    pub cut: Option<ListCut>,
}

impl S3 {
    /// Every key under `prefix` with its size, bounded in keys ([`LIST_LIMIT`]), pages ([`LIST_PAGES`],
    /// [`LIST_EMPTY_PAGES`]) and time ([`LIST_TIME`]); keys longer than S3 allows are dropped and
    /// counted. A continuation token the store sent before is an error (`ListingLoops`).
    pub fn list(&self, prefix: &str) -> Result<Listing, S3Error> {
        let began = std::time::Instant::now();
        let mut out = Listing::default();
        let mut seen = std::collections::HashSet::new();
        let mut token: Option<String> = None;
        let mut empty = 0;
        for pages in 1..=LIST_PAGES {
            let page = self.list_page(prefix, token.as_deref())?;
            empty = if page.contents.is_empty() {
                empty + 1
            } else {
                0
            };
            for c in page.contents {
                match s3key::check(&c.key) {
                    Err(e @ KeyError::TooLong(_)) => out.skipped.add(&c.key, e),
                    _ => out.keys.push((c.key, c.size.unwrap_or(0))),
                }
            }
            let next = match page.next_continuation_token {
                Some(t) if !t.is_empty() => t,
                _ => return Ok(out),
            };
            if next.len() > TOKEN_MAX || !seen.insert(next.clone()) {
                let what = if next.len() > TOKEN_MAX {
                    "a continuation token over 4096 bytes"
                } else {
                    "a continuation token it had sent before"
                };
                return Err(self.error(
                    "LIST",
                    prefix,
                    "ListingLoops",
                    format!("the store sent {what} on page {pages}; the listing stopped"),
                ));
            }
            token = Some(next);
            out.cut = if out.keys.len() >= LIST_LIMIT {
                Some(ListCut::Keys)
            } else if empty >= LIST_EMPTY_PAGES {
                Some(ListCut::EmptyPages)
            } else if began.elapsed() > LIST_TIME {
                Some(ListCut::Time)
            } else {
                None
            };
            if out.cut.is_some() {
                return Ok(out);
            }
        }
        out.cut = Some(ListCut::Pages);
        Ok(out)
    }

    /// One ListObjectsV2 page, its body at most [`LIST_PAGE_BYTES`].
    fn list_page(
        &self,
        prefix: &str,
        token: Option<&str>,
    ) -> Result<ListObjectsV2Response, S3Error> {
        let mut action = ListObjectsV2::new(&self.bucket, Some(&self.creds));
        action.with_prefix(prefix);
        if let Some(t) = token {
            action.with_continuation_token(t.to_string());
        }
        let url = action.sign(SIGNED_FOR);
        let mut resp = self.send("LIST", prefix, |agent| agent.get(url.as_str()).call())?;
        let text = resp
            .body_mut()
            .with_config()
            .limit(LIST_PAGE_BYTES)
            .read_to_string()
            .map_err(|e| match e {
                ureq::Error::BodyExceedsLimit(_) => self.error(
                    "LIST",
                    prefix,
                    "ListingTooLarge",
                    format!("a listing page over {LIST_PAGE_BYTES} bytes"),
                ),
                e => self.error("LIST", prefix, "Unreachable", self.scrub(&e.to_string())),
            })?;
        ListObjectsV2::parse_response(&text).map_err(|e| {
            self.error(
                "LIST",
                prefix,
                "MalformedListing",
                self.scrub(&e.to_string()),
            )
        })
    }
}
