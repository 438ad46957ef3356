//! The bearer token a [`super::Client`] sends: its `Authorization` line
//! checked once and handed to the transport, which writes it into each
//! request's head, and a token file re-read at least once a minute and at
//! once after a 401 (a rotated token), keeping the old token when a
//! re-read fails. Never logged: neither the token nor the line prints.

use super::credentials::{Auth, Secret, read_token};
use crate::util::config_error::ConfigError;
use crate::util::transport::{Authorization, AuthorizationLine};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Bound tokens expire (1 h by default) and kubelet rewrites the file at 80 %
/// of their life: re-reading it every minute never sends an expired token.
const TOKEN_RELOAD_INTERVAL: Duration = Duration::from_secs(60);

/// A bearer token with its `Authorization` line, checked once. A bound
/// service-account token is ~1 KB, and checking it as a header on every
/// request was a measurable share of a heartbeat's CPU.
#[derive(Clone)]
struct Bearer {
    token: Secret,
    line: AuthorizationLine,
}

impl Bearer {
    fn new(token: Secret) -> Result<Bearer, String> {
        let line = AuthorizationLine::bearer(token.expose())
            .ok_or("the token holds characters that cannot be sent in an HTTP header")?;
        Ok(Bearer { token, line })
    }
}

/// What a client authenticates with, as far as headers go (a client
/// certificate is the TLS configuration's), and the line its transport
/// sends ([`Token::authorization`]), kept to the current token.
pub(super) struct Token {
    held: Held,
    sent: Authorization,
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
        Ok(Token::sending(match auth {
            Auth::Token(t) => Held::Static(Bearer::new(t.clone()).map_err(ConfigError)?),
            Auth::TokenFile { path, initial } => {
                let current = Bearer::new(initial.clone())
                    .map_err(|why| ConfigError(format!("token file {}: {why}", path.display())))?;
                Held::File { path: path.clone(), current, read_at: Instant::now() }
            }
            Auth::ClientCert { .. } | Auth::Anonymous => Held::None,
        }))
    }

    fn sending(held: Held) -> Token {
        let sent = Authorization::default();
        sent.set(held.bearer().map(|b| b.line.clone()));
        Token { held, sent }
    }

    /// The same token for another client, with a line of its own for that
    /// client's transport: each re-reads a token file on its own schedule.
    pub(super) fn sibling(&self) -> Token {
        Token::sending(self.held.clone())
    }

    /// The line the client's transport writes into each request's head.
    pub(super) fn authorization(&self) -> Authorization {
        self.sent.clone()
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
                self.sent.set(Some(fresh.line.clone()));
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
