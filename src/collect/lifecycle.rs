//! The bucket lifecycle rule `-retain` asks for, as XML text: S3's
//! (`<Rule><ID/><Filter><Prefix/></Filter><Status>Enabled</Status><Expiration><Days/></Expiration></Rule>`)
//! or, for `gs://`, GCS's XML API form (`<Action><Delete/></Action><Condition><Age/><MatchesPrefix/>`),
//! and how an existing configuration compares with it. No I/O.
#![forbid(unsafe_code)]

use super::pages::markup_escape as escape;

/// How the bucket's configuration stands against the collector's rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// No configuration, or no rules.
    Missing,
    /// Only our rule, expiring after the same days.
    Same,
    /// Only our rule, with other days.
    Different,
    /// Rules of someone else's: never replaced.
    Foreign,
}

/// One rule: expire objects under `prefix` after `days`.
pub fn rule_xml(id: &str, prefix: &str, days: u64, gcs: bool) -> String {
    let (id, prefix) = (escape(id), escape(prefix));
    if gcs {
        format!(
            "<Rule><Action><Delete/></Action><Condition><Age>{days}</Age><MatchesPrefix>{prefix}</MatchesPrefix></Condition></Rule>"
        )
    } else {
        format!(
            "<Rule><ID>{id}</ID><Filter><Prefix>{prefix}</Prefix></Filter><Status>Enabled</Status><Expiration><Days>{days}</Days></Expiration></Rule>"
        )
    }
}

/// The whole document around `rule`.
pub fn document(rule: &str, gcs: bool) -> String {
    let ns = if gcs {
        ""
    } else {
        " xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\""
    };
    format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?><LifecycleConfiguration{ns}>{rule}</LifecycleConfiguration>")
}

/// Compares the bucket's configuration (`None`: it has none) with rule `id` expiring after `days`.
pub fn compare(current: Option<&str>, id: &str, days: u64) -> State {
    let Some(xml) = current else {
        return State::Missing;
    };
    let rules = xml.matches("<Rule>").count();
    if rules == 0 {
        return State::Missing;
    }
    if rules > 1 || !xml.contains(&format!("<ID>{}</ID>", escape(id))) {
        return State::Foreign;
    }
    let found = super::s3::xml_field(xml, "Days").or_else(|| super::s3::xml_field(xml, "Age"));
    if found.as_deref() == Some(days.to_string().as_str()) {
        State::Same
    } else {
        State::Different
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_and_their_comparison() {
        let r = rule_xml("nl6-collect-prod", "prod/", 7, false);
        assert!(
            r.contains("<Prefix>prod/</Prefix>") && r.contains("<Days>7</Days>"),
            "{r}"
        );
        let doc = document(&r, false);
        assert_eq!(compare(Some(&doc), "nl6-collect-prod", 7), State::Same);
        assert_eq!(compare(Some(&doc), "nl6-collect-prod", 3), State::Different);
        assert_eq!(compare(Some(&doc), "other", 7), State::Foreign);
        assert_eq!(compare(None, "x", 7), State::Missing);
        assert_eq!(
            compare(Some("<LifecycleConfiguration/>"), "x", 7),
            State::Missing
        );
        let two = document(&format!("{r}{r}"), false);
        assert_eq!(compare(Some(&two), "nl6-collect-prod", 7), State::Foreign);
        let g = rule_xml("x", "p/", 7, true);
        assert!(
            g.contains("<Age>7</Age>") && g.contains("<MatchesPrefix>p/</MatchesPrefix>"),
            "{g}"
        );
    }
}
