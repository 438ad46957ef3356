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

/// A bearer token with its `Authorization` header value, checked once.
#[derive(Clone)]
struct Bearer {
    token: Secret,
    header: HeaderValue,
}

impl Bearer {
    fn new(token: Secret) -> Result<Bearer, String> {
        let header =
            http::bearer(token.expose()).ok_or("the token holds characters that cannot be sent in an HTTP header")?;
        Ok(Bearer { token, header })
    }
}

/// What a client authenticates with, as far as headers go (a client
/// certificate is the TLS configuration's), kept to the current token.
#[derive(Clone)]
pub(super) struct Token {
    held: Held,
}

#[derive(Clone)]
enum Held {
    None,
    Static(Bearer),
    File {
        path: PathBuf,
        current: Bearer,
        read_at: Instant,
    },
    /// An exec plugin's token; `issuing` is shared with the siblings, so
    /// that one run renews it for all.
    Exec {
        issuing: Arc<Mutex<Issuing>>,
        current: Bearer,
        expires: Option<SystemTime>,
    },
}

/// An exec plugin and the token it last gave.
struct Issuing {
    plugin: Plugin,
    current: Bearer,
    expires: Option<SystemTime>,
}

impl Token {
    /// The token `auth` gives; a token that cannot be a header is a
    /// configuration error.
    pub(super) fn of(auth: &Auth) -> Result<Token, ConfigError> {
        Ok(Token {
            held: match auth {
                Auth::Token(t) => Held::Static(Bearer::new(t.clone()).map_err(ConfigError)?),
                Auth::TokenFile { path, initial } => {
                    let current = Bearer::new(initial.clone())
                        .map_err(|why| ConfigError(format!("token file {}: {why}", path.display())))?;
                    Held::File { path: path.clone(), current, read_at: Instant::now() }
                }
                Auth::Exec { plugin, issued: Some((token, expires)) } => {
                    let current = Bearer::new(token.clone())
                        .map_err(|why| ConfigError(format!("exec plugin {}: {why}", plugin.name())))?;
                    let issuing = Issuing { plugin: (**plugin).clone(), current: current.clone(), expires: *expires };
                    Held::Exec { issuing: Arc::new(Mutex::new(issuing)), current, expires: *expires }
                }
                Auth::Exec { issued: None, .. } => unreachable!("an exec plugin runs before a client is built"),
                Auth::ClientCert { .. } | Auth::Anonymous => Held::None,
            },
        })
    }

    /// The `Authorization` header value each request carries, if any: the
    /// current token's.
    pub(super) fn header(&self) -> Option<&HeaderValue> {
        self.held.bearer().map(|b| &b.header)
    }

    /// Re-reads a token file last read [`TOKEN_RELOAD_INTERVAL`] ago or
    /// more; renews an exec plugin's token about to expire.
    pub(super) fn refresh_if_due(&mut self) {
        match &self.held {
            Held::File { read_at, .. } if read_at.elapsed() >= TOKEN_RELOAD_INTERVAL => {
                self.reload();
            }
            Held::Exec { expires: Some(at), .. } if SystemTime::now() + RENEW_BEFORE >= *at => {
                self.reload();
            }
            _ => {}
        }
    }

    /// Re-reads the token file, or renews the exec plugin's token (unless
    /// a sibling just did, or is doing so now); true when the token
    /// changed. A failure keeps the old token: kubelet may be mid-rewrite,
    /// a plugin may fail once.
    pub(super) fn reload(&mut self) -> bool {
        if let Held::Exec { issuing, current, expires } = &mut self.held {
            let Ok(mut issuing) = issuing.try_lock() else { return false };
            if issuing.current.token == current.token {
                let name = issuing.plugin.name();
                match issuing.plugin.run().and_then(|issued| {
                    let token = issued.token.ok_or_else(|| format!("exec plugin {name} gave no token this time"))?;
                    Ok((Bearer::new(token)?, issued.expires))
                }) {
                    Ok((fresh, until)) => {
                        let shown = until.map_or("no expiry".into(), crate::util::time::format_rfc3339);
                        log::info!("Renewed the token of exec plugin {name} (until {shown})");
                        (issuing.current, issuing.expires) = (fresh, until);
                    }
                    Err(e) => log::warn!("Keeping the previous token: {e}"),
                }
            }
            let changed = issuing.current.token != current.token;
            (*current, *expires) = (issuing.current.clone(), issuing.expires);
            return changed;
        }
        let Held::File { path, current, read_at } = &mut self.held else {
            return false;
        };
        *read_at = Instant::now();
        match read_token(path)
            .map_err(|e| e.to_string())
            .and_then(|fresh| if fresh == current.token { Ok(None) } else { Bearer::new(fresh).map(Some) })
        {
            Ok(Some(fresh)) => {
                *current = fresh;
                log::info!("Reloaded the changed token from {}", path.display());
                true
            }
            Ok(None) => false,
            Err(e) => {
                log::warn!("Keeping the previous token: {e}");
                false
            }
        }
    }
}

impl Held {
    fn bearer(&self) -> Option<&Bearer> {
        match self {
            Held::None => None,
            Held::Static(b) | Held::File { current: b, .. } | Held::Exec { current: b, .. } => Some(b),
        }
    }
}
