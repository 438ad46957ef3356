//! URLs given by the user (a watched health endpoint, kube9-server, a
//! kubeconfig's API server): the rules about credentials in them and about
//! where they point.
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
pub(crate) fn redacted(url: &str) -> String {
    match authority(url).and_then(|(start, auth)| Some((start, start + auth.rfind('@')?))) {
        Some((start, at)) => format!("{}***{}", &url[..start], &url[at..]),
        None => url.to_string(),
    }
}

/// Refuses a URL that carries a user name or password, has no host, or a
/// port that is not a number from 1 to 65535 (the HTTP client would
/// quietly use the scheme's default port, and a token or API key would go
/// where the user did not say), or holds white space or a control
/// character (a CR or LF would split the request line; no server answers
/// a path with a space: such a URL can never work). The message shows the
/// URL redacted.
pub(crate) fn check_url(url: &str) -> Result<(), String> {
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "{:?} holds white space or a control character: write a space as %20 (a CR or LF has no place in a URL)",
            redacted(url)
        ));
    }
    let Some((_, auth)) = authority(url) else { return Ok(()) };
    if auth.contains('@') {
        return Err(format!(
            "{:?} holds a user name or password (user:password@): opstatus never sends credentials in a URL \
             (and does not show them); remove them",
            redacted(url)
        ));
    }
    let (host, port, bracketed) = match auth.strip_prefix('[') {
        // An IPv6 literal: `[fd00::1]` or `[fd00::1]:6443`.
        Some(v6) => {
            let Some((inside, after)) = v6.split_once(']') else {
                return Err(format!("{url:?} has an IPv6 host without its closing ']'"));
            };
            // `[::1]x:1` reads as port "x:1": refused below.
            (inside, (!after.is_empty()).then(|| after.strip_prefix(':').unwrap_or(after)), true)
        }
        None => match auth.rsplit_once(':') {
            Some((host, port)) => (host, Some(port), false),
            None => (auth, None, false),
        },
    };
    if host.is_empty() {
        return Err(format!("{url:?} has no host"));
    }
    let host_char = |c: char| c.is_ascii_alphanumeric() || "-._~%".contains(c) || (bracketed && c == ':');
    if !host.chars().all(host_char) {
        return Err(format!("{url:?} has host {host:?}, which is no host name or IP address"));
    }
    if let Some(port) = port {
        let number = if port.bytes().all(|b| b.is_ascii_digit()) { port.parse::<u16>().ok() } else { None };
        if number.is_none_or(|p| p == 0) {
            return Err(format!("{url:?} has port {port:?}: a port is a number from 1 to 65535"));
        }
    }
    Ok(())
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
            let e = check_url(url).unwrap_err();
            assert!(!e.contains("secret") && e.contains("***@"), "{e}");
        }
    }

    #[test]
    fn a_port_or_host_the_client_would_misread_is_refused() {
        for (url, said) in [
            ("https://127.0.0.1:abc", "has port \"abc\": a port is a number from 1 to 65535"),
            ("https://host:6443x/api", "has port \"6443x\""),
            ("https://host:", "has port \"\""),
            ("https://host:0", "has port \"0\""),
            ("https://host:65536", "has port \"65536\""),
            ("https://host:+443", "has port \"+443\""),
            ("https://:443", "has no host"),
            ("https://", "has no host"),
            ("https://fd00::1", "has host \"fd00:\", which is no host name"),
            ("https://[fd00::1", "without its closing ']'"),
            ("https://[fd00::1]x:1", "has port \"x:1\""),
            ("https://[fd00::1]:x", "has port \"x\""),
            ("https://ho!st:443", "has host \"ho!st\""),
        ] {
            let e = check_url(url).unwrap_err();
            assert!(e.contains(said), "{url}: {e}");
        }
    }

    /// A URL that can never be requested is refused where it enters.
    #[test]
    fn white_space_and_control_characters_are_refused() {
        for url in [
            "http://127.0.0.1:8081/healthz\r\nX-Injected: 1",
            "http://127.0.0.1:8081/health z",
            "http://127.0.0.1:8081/healthz\n",
            "http://127.0.0.1:8081/\thealthz",
            "https://u:secret@host/a b",
        ] {
            let e = check_url(url).unwrap_err();
            assert!(e.contains("holds white space or a control character"), "{url:?}: {e}");
            assert!(!e.contains("secret"), "{e}");
        }
    }

    #[test]
    fn urls_without_userinfo_pass_and_show_as_they_are() {
        for url in ["https://10.96.0.1:443", "http://127.0.0.1:8081/healthz?user=a@b", "https://[fd00::1]:6443/x#a@b"] {
            assert_eq!(check_url(url), Ok(()));
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
        assert!(check_url("http://a b:secret@host/").is_err());
    }
}
