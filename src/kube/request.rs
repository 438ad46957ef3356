//! One request as the [`super::Client`] sends it: the method (with its
//! body), the URL, and what it is for, as error messages say it; and the
//! last URL sent, kept parsed.

use super::object_ref::ObjectRef;
use ureq::http::Uri;
use ureq::http::uri::InvalidUri;

pub(super) struct Request<'a> {
    pub method: Method<'a>,
    pub url: &'a str,
    pub action: Action<'a>,
}

/// What a request is for, as error messages say it. An object's is spelled
/// out only when an error needs it: the heartbeat's apply succeeds.
pub(super) enum Action<'a> {
    Said(&'a str),
    On(&'a ObjectRef<'a>, &'static str),
}

impl Action<'_> {
    pub(super) fn text(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Action::Said(text) => (*text).into(),
            Action::On(object, verb) => object.action(verb).into(),
        }
    }
}

pub(super) enum Method<'a> {
    Get,
    /// Server-side apply (`PATCH`, `application/apply-patch+yaml`).
    Apply(&'a [u8]),
    /// A JSON merge patch: fields set to absolute values, so sending it
    /// twice is the same as once.
    MergePatch(&'a [u8]),
    Put(&'a [u8]),
    Post(&'a [u8]),
}

impl Method<'_> {
    /// Whether sending it twice does no harm (see [`super::Client`]'s `send_on_kept`).
    pub(super) fn safe_to_repeat(&self) -> bool {
        !matches!(self, Method::Post(_))
    }
}

/// The last URL sent, parsed: every heartbeat sends the same one, which
/// ureq would parse again (given as text) for each request.
#[derive(Default)]
pub(super) struct LastUrl(Option<(String, Uri)>);

impl LastUrl {
    /// `url` parsed: the same as last time, or parsed now and kept.
    pub(super) fn parsed(&mut self, url: &str) -> Result<Uri, InvalidUri> {
        match &self.0 {
            Some((last, uri)) if last == url => Ok(uri.clone()),
            _ => {
                let uri: Uri = url.parse()?;
                self.0 = Some((url.to_string(), uri.clone()));
                Ok(uri)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_url_is_kept_parsed_and_a_new_one_replaces_it() {
        let mut last = LastUrl::default();
        let first = "https://10.96.0.1/api/v1/namespaces/ops/configmaps/s?fieldManager=opstatus&force=true";
        assert_eq!(last.parsed(first).unwrap(), first.parse::<Uri>().unwrap());
        assert_eq!(
            last.parsed(first).unwrap().path_and_query().unwrap().query(),
            Some("fieldManager=opstatus&force=true")
        );
        let other = "https://10.96.0.1/api/v1/namespaces/ops/events";
        assert_eq!(last.parsed(other).unwrap().path(), "/api/v1/namespaces/ops/events");
        assert!(last.parsed("https://a b/").is_err());
        assert_eq!(last.parsed(other).unwrap().path(), "/api/v1/namespaces/ops/events", "a bad URL keeps nothing");
    }

    #[test]
    fn a_post_is_never_sent_twice() {
        assert!(!Method::Post(b"{}").safe_to_repeat());
        assert!(
            Method::Get.safe_to_repeat()
                && Method::Apply(b"{}").safe_to_repeat()
                && Method::MergePatch(b"{}").safe_to_repeat()
                && Method::Put(b"{}").safe_to_repeat()
        );
    }
}
