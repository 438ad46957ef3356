//! Kubernetes object-name rules (RFC 1123 labels and subdomains), for
//! checking names before they reach a URL or a request.

/// RFC 1123 label, as Kubernetes requires of namespace names.
pub(crate) fn check_dns_label(v: &str) -> Result<(), &'static str> {
    if v.len() > 63 {
        return Err("at most 63 characters");
    }
    check_label_chars(v)
}

/// RFC 1123 subdomain, as Kubernetes requires of most object names.
pub(crate) fn check_dns_subdomain(v: &str) -> Result<(), &'static str> {
    if v.len() > 253 {
        return Err("at most 253 characters");
    }
    v.split('.').try_for_each(check_label_chars)
}

fn check_label_chars(v: &str) -> Result<(), &'static str> {
    let b = v.as_bytes();
    if b.is_empty() {
        return Err("must not be empty");
    }
    if !b.iter().all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-') {
        return Err("only lowercase letters, digits and '-' are allowed");
    }
    if b[0] == b'-' || b[b.len() - 1] == b'-' {
        return Err("must start and end with a letter or digit");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(check_dns_label("kube9-system").is_ok());
        assert!(check_dns_label(&"a".repeat(64)).is_err());
        assert!(check_dns_subdomain("kube9.operator-status").is_ok());
        assert!(check_dns_subdomain("UPPER").is_err());
    }
}
