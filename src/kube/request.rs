//! One request as the [`super::Client`] sends it: the method (with its
//! body), the URL, and what it is for, as error messages say it.

use std::borrow::Cow;

pub(super) struct Request<'a> {
    pub method: Method<'a>,
    pub url: &'a str,
    /// What it is for, as error messages say it.
    pub action: Cow<'a, str>,
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

#[cfg(test)]
mod tests {
    use super::*;

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
