//! Which proxy a request goes through.
//!
//! - The API server: a kubeconfig cluster's `proxy-url`, nothing else (an
//!   `HTTPS_PROXY` set for a pod must not capture the sidecar's API traffic
//!   by surprise: in a cluster the API server is a Service address).
//! - kube9-server and `--watch-url`: the environment, as Go programs
//!   (kubectl, controller-runtime) read it: `HTTPS_PROXY` for an `https://`
//!   URL, `HTTP_PROXY` for an `http://` one (or their lower-case names),
//!   unless `NO_PROXY` exempts the host ([`exempt`]); `localhost` and
//!   loopback addresses are never proxied, so the shipped sidecar's check
//!   of `http://127.0.0.1:8081/healthz` goes straight to the operator.
//!
//! A proxy is an `http://` CONNECT proxy (ureq's): every request goes
//! through a tunnel it opens, TLS to the server end to end. The proxy's
//! URL may carry `user:password@` for Basic proxy authentication; it is
//! never shown.

use std::net::IpAddr;

/// `url` as a proxy: `http://[user:password@]host[:port]`, or
/// `host[:port]` (http assumed, as in Go).
pub(crate) fn parse(url: &str) -> Result<ureq::Proxy, String> {
    let shown = super::url::redacted(url);
    let scheme = url.split_once("://").map(|(scheme, _)| scheme.to_ascii_lowercase());
    if scheme.as_deref().is_some_and(|s| s != "http") {
        return Err(format!("{shown:?} is not an http:// proxy (the only kind opstatus goes through)"));
    }
    ureq::Proxy::new(url).map_err(|_| format!("{shown:?} is not a proxy URL (http://host:port)"))
}

/// The proxy the environment names for `url` (see the module's doc), or
/// `None`; an error names the variable whose value is no proxy URL.
pub(crate) fn from_env(url: &str) -> Result<Option<ureq::Proxy>, String> {
    from(url, &|name| std::env::var(name).ok())
}

fn from(url: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Option<ureq::Proxy>, String> {
    let Ok(uri) = url.parse::<ureq::http::Uri>() else { return Ok(None) };
    let https = uri.scheme_str() == Some("https");
    let names = if https { ["HTTPS_PROXY", "https_proxy"] } else { ["HTTP_PROXY", "http_proxy"] };
    let Some((name, value)) = names.iter().find_map(|n| env(n).filter(|v| !v.is_empty()).map(|v| (n, v))) else {
        return Ok(None);
    };
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let no_proxy = env("NO_PROXY").or_else(|| env("no_proxy")).unwrap_or_default();
    if exempt(&no_proxy, uri.host().unwrap_or_default(), port) {
        return Ok(None);
    }
    parse(&value).map(Some).map_err(|why| format!("{name}: {why}"))
}

/// Whether `host:port` goes direct: it is `localhost` or a loopback
/// address, or an entry of `no_proxy` (comma-separated) names it: `*`; an
/// IP address or a CIDR range holding it; a domain, which matches itself
/// and its subdomains (`.domain` and `*.domain` only the subdomains); each
/// optionally with `:port`.
fn exempt(no_proxy: &str, host: &str, port: u16) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
    let ip = host.parse::<IpAddr>().ok();
    if host == "localhost" || ip.is_some_and(|ip| ip.is_loopback()) {
        return true;
    }
    no_proxy.split(',').map(str::trim).filter(|e| !e.is_empty()).any(|entry| {
        if entry == "*" {
            return true;
        }
        if let Some((net, bits)) = entry.split_once('/') {
            return match (ip, net.parse::<IpAddr>(), bits.parse::<u32>()) {
                (Some(IpAddr::V4(a)), Ok(IpAddr::V4(n)), Ok(b @ 0..=32)) => {
                    (u32::from(a) ^ u32::from(n)).checked_shr(32 - b).unwrap_or(0) == 0
                }
                (Some(IpAddr::V6(a)), Ok(IpAddr::V6(n)), Ok(b @ 0..=128)) => {
                    (u128::from(a) ^ u128::from(n)).checked_shr(128 - b).unwrap_or(0) == 0
                }
                _ => false,
            };
        }
        let (name, wanted_port) = match entry.rsplit_once(':') {
            Some((name, p)) if !name.contains(':') || name.ends_with(']') => (name, p.parse::<u16>().ok()),
            _ => (entry, None),
        };
        if wanted_port.is_some_and(|p| p != port) {
            return false;
        }
        let name = name.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        if let Ok(entry_ip) = name.parse::<IpAddr>() {
            return ip == Some(entry_ip);
        }
        match name.trim_start_matches('*').strip_prefix('.') {
            Some(parent) => host.ends_with(&format!(".{parent}")),
            None => host == name || host.ends_with(&format!(".{name}")),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_proxy_reads_as_go_reads_it() {
        let direct = |host: &str, port: u16, no_proxy: &str| exempt(no_proxy, host, port);
        for host in ["localhost", "127.0.0.1", "127.9.9.9", "[::1]"] {
            assert!(direct(host, 80, ""), "{host} is never proxied");
        }
        assert!(!direct("api.kube9.dev", 443, ""));
        assert!(direct("api.kube9.dev", 443, "*"));
        // A domain: itself and its subdomains; with a dot, the subdomains only.
        assert!(direct("kube9.dev", 443, "kube9.dev") && direct("api.kube9.dev", 443, " other, kube9.dev"));
        assert!(!direct("notkube9.dev", 443, "kube9.dev"));
        assert!(direct("api.kube9.dev", 443, ".kube9.dev") && !direct("kube9.dev", 443, ".kube9.dev"));
        assert!(direct("op.ns.svc", 8081, "*.svc") && direct("OP.NS.SVC", 8081, ".svc"));
        // Ports, IP addresses and ranges.
        assert!(
            direct("api.kube9.dev", 443, "api.kube9.dev:443") && !direct("api.kube9.dev", 443, "api.kube9.dev:8443")
        );
        assert!(direct("10.96.0.1", 443, "10.96.0.1") && !direct("10.96.0.2", 443, "10.96.0.1"));
        assert!(direct("10.96.3.4", 443, "10.96.0.0/12") && !direct("10.112.0.1", 443, "10.96.0.0/12"));
        assert!(direct("192.168.1.1", 80, "0.0.0.0/0") && !direct("name.example", 80, "10.0.0.0/8"));
        assert!(direct("[fd00::5]", 80, "fd00::/8") && direct("[fd00::5]", 80, "[fd00::5]:80"));
        assert!(!direct("[fe80::5]", 80, "fd00::/8, fd00::5, 10.0.0.0/99"));
    }

    fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
    }

    #[test]
    fn each_scheme_its_variable_and_no_proxy_or_loopback_go_direct() {
        let vars =
            env(&[("HTTPS_PROXY", "http://proxy.corp:3128"), ("http_proxy", "other.corp:8080"), ("NO_PROXY", ".svc")]);
        let proxy = |url: &str| from(url, &vars).unwrap().map(|p| format!("{}:{}", p.host(), p.port()));
        assert_eq!(proxy("https://api.kube9.dev").as_deref(), Some("proxy.corp:3128"));
        assert_eq!(proxy("http://op.example:8081/healthz").as_deref(), Some("other.corp:8080"));
        assert_eq!(proxy("http://op.ns.svc:8081/healthz"), None);
        assert_eq!(proxy("http://127.0.0.1:8081/healthz"), None);
        assert!(from("https://api.kube9.dev", &env(&[])).unwrap().is_none());
        assert!(from("https://api.kube9.dev", &env(&[("HTTPS_PROXY", "")])).unwrap().is_none());
    }

    #[test]
    fn a_proxy_that_is_not_http_is_refused_unshown() {
        let e = from("https://x.example", &env(&[("HTTPS_PROXY", "socks5://u:secret@proxy:1080")])).unwrap_err();
        assert_eq!(
            e,
            "HTTPS_PROXY: \"socks5://***@proxy:1080\" is not an http:// proxy (the only kind opstatus goes through)"
        );
        assert!(parse("https://proxy.corp").is_err() && parse("http://").is_err());
        assert_eq!(parse("HTTP://u:p%40ss@proxy.corp").unwrap().password(), Some("p@ss"));
    }
}
