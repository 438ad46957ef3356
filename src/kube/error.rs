//! [`KubeError`]: every way a request to the API server can fail, worded so
//! that a cluster admin knows what to do.

use crate::util::text::{MAX_FOREIGN, sanitize};
use serde_json::Value;
use std::fmt;
use std::time::Duration;

/// A failed request to the API server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KubeError {
    /// No HTTP answer: refused, reset, timed out, TLS or DNS failure.
    Transport { message: String },
    /// The server answered with an error status.
    Api {
        code: u16,
        /// The `Status` reason (`Forbidden`, `NotFound`, …), or the HTTP
        /// reason phrase when the body was not a `Status`.
        reason: String,
        /// The `Status` message, or a short excerpt of a non-`Status` body.
        message: String,
        /// What the request was, e.g. `patch configmaps "x" in namespace "y"`.
        action: String,
        retry_after: Option<Duration>,
        /// Where the permission is granted (a manifest, or who grants it),
        /// supplied by the feature that made the request: the client knows
        /// no features.
        grant: Option<&'static str>,
    },
    /// A success status with a body that is not what the API promises.
    Response { message: String },
}

impl KubeError {
    /// Says where the permission for this request is granted, for a 403's
    /// message.
    pub fn granted_by(mut self, manifest: &'static str) -> KubeError {
        if let KubeError::Api { grant, .. } = &mut self {
            *grant = Some(manifest);
        }
        self
    }

    /// The server's requested wait (`Retry-After` on 429 and 503).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            KubeError::Api { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The HTTP status code, when the server answered.
    pub fn code(&self) -> Option<u16> {
        match self {
            KubeError::Api { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// A 404 that says the object does not exist (a `Status` with reason
    /// `NotFound`), as opposed to a path the API server does not serve at
    /// all (a CRD that is not installed answers a plain "404 page not found").
    pub fn is_missing_object(&self) -> bool {
        matches!(self, KubeError::Api { code: 404, reason, message, .. }
            if reason == "NotFound" && !message.starts_with(NON_STATUS))
    }

    /// A server-side apply without force that would change fields another
    /// field manager owns (as opposed to a stale `resourceVersion`).
    pub fn is_apply_conflict(&self) -> bool {
        matches!(self, KubeError::Api { code: 409, message, .. } if message.starts_with("Apply failed with"))
    }

    /// A short, bounded label for metrics (`error_type`).
    pub fn kind(&self) -> &'static str {
        match self {
            KubeError::Transport { .. } => "transport",
            KubeError::Response { .. } => "response",
            KubeError::Api { code, .. } => match code {
                401 => "unauthorized",
                403 => "forbidden",
                404 => "not_found",
                409 => "conflict",
                422 => "invalid",
                429 => "throttled",
                500..=599 => "server_error",
                _ => "client_error",
            },
        }
    }
}

impl fmt::Display for KubeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KubeError::Transport { message } | KubeError::Response { message } => f.write_str(message),
            KubeError::Api { code, reason, message, action, grant, .. } => {
                write!(f, "{code} {reason}")?;
                if !message.is_empty() {
                    write!(f, ": {message}")?;
                }
                match code {
                    401 => write!(
                        f,
                        " (the API server rejected the credentials: the token is expired or revoked, \
                         or its ServiceAccount was deleted)"
                    ),
                    403 => {
                        // A namespaced Role cannot list across namespaces:
                        // the likely fix is the scope, not more RBAC.
                        if action.ends_with(" in all namespaces") {
                            f.write_str(" (with a namespaced Role, probe its namespace with --probe-namespace; or ")?;
                        } else {
                            f.write_str(" (")?;
                        }
                        write!(f, "grant the permission to {action}")?;
                        if let Some(manifest) = grant {
                            write!(f, ": {manifest}")?;
                        }
                        // The API server answers 403 before it looks for the
                        // namespace: a misspelt one reads like missing RBAC.
                        if let Some(ns) = action.split(" in namespace ").nth(1) {
                            write!(f, "; and check that namespace {ns} exists: a missing one is refused the same way")?;
                        }
                        f.write_str(")")
                    }
                    _ => Ok(()),
                }
            }
        }
    }
}

/// How a message built from a non-`Status` error body begins.
const NON_STATUS: &str = "unexpected non-Status body";

/// Longest excerpt of a non-`Status` error body kept in a message.
const EXCERPT: usize = 200;

/// Longest `Status` reason kept (they are single words like `Forbidden`).
const MAX_REASON: usize = 64;

/// Builds the error for a non-2xx answer from its body.
pub(crate) fn from_response(code: u16, body: &[u8], action: &str, retry_after: Option<Duration>) -> KubeError {
    // A `metav1.Status`, or any other body.
    let status = serde_json::from_slice::<Value>(body).ok().filter(|v| v["kind"] == "Status");
    let (reason, message) = match status {
        // The server's words go to logs, the ConfigMap and the
        // ClusterOperator: printable and bounded, whatever the server sent.
        Some(status) => (
            status["reason"].as_str().map_or_else(|| reason_phrase(code).into(), |r| sanitize(r, MAX_REASON)),
            sanitize(status["message"].as_str().unwrap_or_default(), MAX_FOREIGN),
        ),
        _ => {
            // Not a Status (a proxy's HTML page, a truncated body): keep a
            // short, printable excerpt so the log line stays one line.
            let text = sanitize(&String::from_utf8_lossy(&body[..body.len().min(4 * EXCERPT)]), EXCERPT);
            let text = text.trim();
            let message = if text.is_empty() { String::new() } else { format!("{NON_STATUS}: {text:?}") };
            (reason_phrase(code).into(), message)
        }
    };
    KubeError::Api { code, reason, message, action: action.to_string(), retry_after, grant: None }
}

fn reason_phrase(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        409 => "Conflict",
        410 => "Gone",
        413 => "RequestEntityTooLarge",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        502 => "BadGateway",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ACTION: &str = "patch configmaps \"kube9-operator-status\" in namespace \"ops\"";

    #[test]
    fn forbidden_names_the_permission_and_the_manifest() {
        let body = br#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"configmaps \"kube9-operator-status\" is forbidden: User \"system:serviceaccount:ops:op\" cannot patch resource \"configmaps\" in API group \"\" in the namespace \"ops\"","reason":"Forbidden","details":{"name":"kube9-operator-status","kind":"configmaps"},"code":403}"#;
        let e = from_response(403, body, ACTION, None).granted_by("see manifests/base/role.yaml");
        assert_eq!(e.kind(), "forbidden");
        assert_eq!(
            e.to_string(),
            "403 Forbidden: configmaps \"kube9-operator-status\" is forbidden: User \"system:serviceaccount:ops:op\" \
             cannot patch resource \"configmaps\" in API group \"\" in the namespace \"ops\" \
             (grant the permission to patch configmaps \"kube9-operator-status\" in namespace \"ops\": see \
             manifests/base/role.yaml; and check that namespace \"ops\" exists: a missing one is refused the same way)"
        );
    }

    #[test]
    fn forbidden_in_all_namespaces_names_probe_namespace_first() {
        let e = from_response(
            403,
            br#"{"kind":"Status","reason":"Forbidden","message":"no"}"#,
            "list foos.example.com in all namespaces",
            None,
        )
        .granted_by("see manifests/olm");
        assert_eq!(
            e.to_string(),
            "403 Forbidden: no (with a namespaced Role, probe its namespace with --probe-namespace; or grant the \
             permission to list foos.example.com in all namespaces: see manifests/olm)"
        );
    }

    #[test]
    fn unauthorized_explains_the_likely_causes() {
        let body = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#;
        let e = from_response(401, body, ACTION, None);
        assert_eq!(e.kind(), "unauthorized");
        assert!(e.to_string().starts_with("401 Unauthorized: Unauthorized (the API server rejected the credentials"));
    }

    #[test]
    fn non_status_bodies_are_excerpted_on_one_line() {
        let body = format!("<html>\n<body>{}</body></html>", "x".repeat(5000));
        let e = from_response(502, body.as_bytes(), ACTION, None);
        let text = e.to_string();
        assert!(text.starts_with("502 BadGateway: unexpected non-Status body: \"<html> <body>xxx"), "{text}");
        assert!(!text.contains('\n') && text.len() < 300, "{text}");
        let e = from_response(503, b"", ACTION, Some(Duration::from_secs(5)));
        assert_eq!(e.to_string(), "503 ServiceUnavailable");
        assert_eq!(e.retry_after(), Some(Duration::from_secs(5)));
        assert_eq!(e.kind(), "server_error");
    }

    #[test]
    fn status_messages_are_printable_and_bounded() {
        let message = format!("\u{1b}[2J\u{1b}]0;owned\u{7}\rforged\nline {}", "m".repeat(5000));
        let body = serde_json::json!({"kind": "Status", "reason": "Bad\u{1b}[31mReason", "message": message});
        let e = from_response(422, body.to_string().as_bytes(), ACTION, None);
        let text = e.to_string();
        assert!(text.starts_with("422 Bad [31mReason:  [2J ]0;owned  forged line mmm"), "{text}");
        assert!(!text.chars().any(|c| c.is_control()) && text.len() < MAX_FOREIGN + 100, "{}", text.len());
    }

    #[test]
    fn kinds_are_a_small_fixed_set() {
        for (code, kind) in
            [(404, "not_found"), (409, "conflict"), (422, "invalid"), (429, "throttled"), (418, "client_error")]
        {
            assert_eq!(from_response(code, b"{}", ACTION, None).kind(), kind);
        }
        assert_eq!(KubeError::Transport { message: "x".into() }.kind(), "transport");
    }
}
