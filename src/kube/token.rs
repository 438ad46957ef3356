//! The bearer token a [`super::Client`] sends: its `Authorization` header
//! value checked once, when the token is read (a token that would break
//! the request's head never reaches one), and a token file re-read at
//! least once a minute and at once after a 401 (a rotated token), keeping
//! the old token when a re-read fails. Never logged: neither the token nor
//! the header value prints.

use super::credentials::{Auth, Secret, read_token};
use crate::util::config_error::ConfigError;
use crate::util::http;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use ureq::http::HeaderValue;

/// Bound tokens expire (1 h by default) and kubelet rewrites the file at 80 %
/// of their life: re-reading it every minute never sends an expired token.
const TOKEN_RELOAD_INTERVAL: Duration = Duration::from_secs(60);

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
    File { path: PathBuf, current: Bearer, read_at: Instant },
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
                Auth::ClientCert { .. } | Auth::Anonymous => Held::None,
            },
        })
    }

    /// The `Authorization` header value each request carries, if any: the
    /// current token's.
    pub(super) fn header(&self) -> Option<&HeaderValue> {
        self.held.bearer().map(|b| &b.header)
    }

    /// Re-reads a token file last read [`TOKEN_RELOAD_INTERVAL`] ago or more.
    pub(super) fn refresh_if_due(&mut self) {
        if let Held::File { read_at, .. } = &self.held
            && read_at.elapsed() >= TOKEN_RELOAD_INTERVAL
        {
            self.reload();
        }
    }

    /// Re-reads the token file; true when the token changed. A failed read
    /// keeps the old token: kubelet may be mid-rewrite.
    pub(super) fn reload(&mut self) -> bool {
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
            Held::Static(b) | Held::File { current: b, .. } => Some(b),
        }
    }
}
