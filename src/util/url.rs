//! URLs given by the user (a watched health endpoint, kube9-server, a
//! kubeconfig's API server): the one rule about credentials in them.
//!
//! A URL's userinfo (`https://user:password@host`) is refused where the URL
//! enters, so no message, published object or log line that shows a URL can
//! carry a password, and ureq never turns it into Basic auth behind the
//! user's back. The error names the input with the userinfo replaced by
//! `***` ([`redacted`]), never the password itself.

/// The authority (`userinfo@host:port`) of `url`, when it has `scheme://`.
fn authority(url: &str) -> Option<(usize, &str)> {
    let start = url.find("://")? + 3;
    let rest = &url[start..];
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    Some((start, &rest[..end]))
}

/// `url` with its userinfo, if any, shown as `***`.
pub fn redacted(url: &str) -> String {
    match authority(url) {
        Some((start, auth)) => match auth.rfind('@') {
            Some(at) => format!("{}***{}", &url[..start], &url[start + at..]),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

/// Refuses a URL that carries a user name or password. The message shows
/// the URL redacted.
pub fn check_no_userinfo(url: &str) -> Result<(), String> {
    match authority(url) {
        Some((_, auth)) if auth.contains('@') => Err(format!(
            "{:?} holds a user name or password (user:password@): opstatus never sends credentials in a URL \
             (and does not show them); remove them",
            redacted(url)
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_is_refused_and_never_echoed() {
        for url in [
            "https://user:secret@host:6443",
            "http://user:secret@127.0.0.1:8081/healthz",
            "https://:secret@host/",
            "https://secret@host?x=1",
            "https://us@er:secret@host/p@th",
        ] {
            let e = check_no_userinfo(url).unwrap_err();
            assert!(!e.contains("secret") && e.contains("***@"), "{e}");
        }
    }

    #[test]
    fn urls_without_userinfo_pass_and_show_as_they_are() {
        for url in ["https://10.96.0.1:443", "http://127.0.0.1:8081/healthz?user=a@b", "https://[fd00::1]:6443/x#a@b"] {
            assert_eq!(check_no_userinfo(url), Ok(()));
            assert_eq!(redacted(url), url);
        }
        assert_eq!(redacted("https://u:p@h/x@y"), "https://***@h/x@y");
    }

    /// The authority found here is the one ureq's URI parser (the `http`
    /// crate) finds, so what is refused is exactly what ureq would send as
    /// Basic auth; and URLs that parser refuses are still checked here.
    #[test]
    fn the_authority_is_the_one_the_http_client_sees() {
        for url in [
            "https://user:secret@host:6443/x",
            "https://us@er:secret@host/p@th",
            "http://127.0.0.1:8081/healthz?user=a@b",
            "https://[fd00::1]:6443/x#a@b",
            "http://127.0.0.1:8081",
        ] {
            let uri: ureq::http::Uri = url.parse().unwrap();
            assert_eq!(authority(url).map(|(_, a)| a), uri.authority().map(|a| a.as_str()), "{url}");
        }
        assert!("http://a b:secret@host/".parse::<ureq::http::Uri>().is_err());
        assert!(check_no_userinfo("http://a b:secret@host/").is_err());
    }
}
