//! The bearer token a [`super::Client`] sends: its `Authorization` header
//! value checked once, when the token is read (a token that would break
//! the request's head never reaches one); a token file re-read at least
//! once a minute and at once after a 401 (a rotated token); an exec
//! plugin's token renewed shortly before it expires and at once after a
//! 401, once for a client and its siblings. A failed re-read or renewal
//! keeps the old token. Never logged: neither the token nor the header
//! value prints.

use super::Secret;
use super::credentials::{Auth, read_token};
use super::exec::Plugin;
use crate::util::config_error::ConfigError;
use crate::util::http;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use ureq::http::HeaderValue;

/// Bound tokens expire (1 h by default) and kubelet rewrites the file at 80 %
/// of their life: re-reading it every minute never sends an expired token.
const TOKEN_RELOAD_INTERVAL: Duration = Duration::from_secs(60);

/// How long before its expiry an exec plugin's token is renewed: no request
/// carries a token that expires on its way.
const RENEW_BEFORE: Duration = Duration::from_secs(30);

/// The `Authorization` header value for `token`, checked once, when the
/// token is read.
fn bearer(token: &Secret) -> Result<HeaderValue, String> {
    http::bearer(token.expose())
        .ok_or_else(|| "the token holds characters that cannot be sent in an HTTP header".into())
}

/// What a client authenticates with, as far as headers go (a client
/// certificate is the TLS configuration's): the current token's header
/// value, and where a new one comes from.
#[derive(Clone)]
pub(super) struct Token {
    /// The `Authorization` header value each request carries, if any.
    pub(super) header: Option<HeaderValue>,
    renewal: Renewal,
}

#[derive(Clone)]
enum Renewal {
    Never,
    File {
        path: PathBuf,
        read_at: Instant,
    },
    /// An exec plugin; `issuing` is shared with the siblings, so that one
    /// run renews the token for all.
    Exec {
        issuing: Arc<Mutex<Issuing>>,
        expires: Option<SystemTime>,
    },
}

/// An exec plugin and the token it last gave.
struct Issuing {
    plugin: Plugin,
    header: HeaderValue,
    expires: Option<SystemTime>,
}

impl Token {
    /// The token `auth` gives; a token that cannot be a header is a
    /// configuration error.
    pub(super) fn of(auth: &Auth) -> Result<Token, ConfigError> {
        let (header, renewal) = match auth {
            Auth::Token(t) => (bearer(t).map_err(ConfigError)?, Renewal::Never),
            Auth::TokenFile { path, initial } => {
                let header =
                    bearer(initial).map_err(|why| ConfigError(format!("token file {}: {why}", path.display())))?;
                (header, Renewal::File { path: path.clone(), read_at: Instant::now() })
            }
            Auth::Exec { plugin, issued: Some((token, expires)) } => {
                let header =
                    bearer(token).map_err(|why| ConfigError(format!("exec plugin {}: {why}", plugin.name())))?;
                let issuing = Issuing { plugin: (**plugin).clone(), header: header.clone(), expires: *expires };
                (header, Renewal::Exec { issuing: Arc::new(Mutex::new(issuing)), expires: *expires })
            }
            Auth::Exec { issued: None, .. } => unreachable!("an exec plugin runs before a client is built"),
            Auth::ClientCert { .. } | Auth::Anonymous => return Ok(Token { header: None, renewal: Renewal::Never }),
        };
        Ok(Token { header: Some(header), renewal })
    }

    /// Re-reads a token file last read [`TOKEN_RELOAD_INTERVAL`] ago or
    /// more; renews an exec plugin's token about to expire.
    pub(super) fn refresh_if_due(&mut self) {
        let due = match &self.renewal {
            Renewal::File { read_at, .. } => read_at.elapsed() >= TOKEN_RELOAD_INTERVAL,
            Renewal::Exec { expires: Some(at), .. } => SystemTime::now() + RENEW_BEFORE >= *at,
            _ => false,
        };
        if due {
            self.reload();
        }
    }

    /// Re-reads the token file, or renews the exec plugin's token (unless
    /// a sibling just did, or is doing so now); true when the token
    /// changed. A failure keeps the old token: kubelet may be mid-rewrite,
    /// a plugin may fail once.
    pub(super) fn reload(&mut self) -> bool {
        let fresh = match &mut self.renewal {
            Renewal::Never => return false,
            Renewal::File { path, read_at } => {
                *read_at = Instant::now();
                match read_token(path).map_err(|e| e.to_string()).and_then(|token| bearer(&token)) {
                    Ok(fresh) if self.header.as_ref() != Some(&fresh) => {
                        log::info!("Reloaded the changed token from {}", path.display());
                        fresh
                    }
                    Ok(_) => return false,
                    Err(e) => {
                        log::warn!("Keeping the previous token: {e}");
                        return false;
                    }
                }
            }
            Renewal::Exec { issuing, expires } => {
                let Ok(mut issuing) = issuing.try_lock() else { return false };
                if self.header.as_ref() == Some(&issuing.header) {
                    let name = issuing.plugin.name();
                    match issuing.plugin.run().and_then(|issued| {
                        let token =
                            issued.token.ok_or_else(|| format!("exec plugin {name} gave no token this time"))?;
                        Ok((bearer(&token)?, issued.expires))
                    }) {
                        Ok((fresh, until)) => {
                            let shown = until.map_or("no expiry".into(), crate::util::time::format_rfc3339);
                            log::info!("Renewed the token of exec plugin {name} (until {shown})");
                            (issuing.header, issuing.expires) = (fresh, until);
                        }
                        Err(e) => log::warn!("Keeping the previous token: {e}"),
                    }
                }
                *expires = issuing.expires;
                issuing.header.clone()
            }
        };
        let changed = self.header.as_ref() != Some(&fresh);
        self.header = Some(fresh);
        changed
    }
}
