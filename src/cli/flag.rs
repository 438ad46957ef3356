//! One flag's shape (its name, variable, documented default, help line
//! and what its value does) and the raw-value rules all flags share, once,
//! in [`Flag::apply`]: the flag wins over its variable, empty values are
//! errors (but for [`EMPTY_MEANS_UNSET`]), lists and switches come from
//! variables too, and a value is text unless it is a path.
//!
//! Raw values are `OsString`s, as the command line and the environment
//! give them: a path is taken as it is (a file name need not be UTF-8),
//! and any other value that is not UTF-8 is a usage error naming its flag
//! or variable, never dropped and never a panic.

use super::settings::Settings;
use super::values::{Given, parse_switch, text};
use super::{ConfigError, Env};
use std::ffi::OsString;
use std::path::PathBuf;

/// Empty means unset for these variables: for KUBECONFIG as for kubectl;
/// for the operator's version because the downward API gives an empty
/// value for a label the pod does not carry.
pub(crate) const EMPTY_MEANS_UNSET: [&str; 2] = ["KUBECONFIG", "OPSTATUS_OPERATOR_VERSION"];

/// One setting: its flag, its variable, its default, its help line, and
/// what its value does.
pub(crate) struct Flag {
    pub name: &'static str,
    pub env: &'static str,
    pub default: Default,
    pub help: &'static str,
    pub kind: Kind,
}

/// How a flag takes its value, and what the validated value does.
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    /// `--flag VALUE` or `--flag=VALUE`; the last one counts.
    Value(fn(&mut Settings, Given) -> Result<(), ConfigError>),
    /// `--flag PATH`: a file or directory, taken as given (any bytes but
    /// none: a file name need not be UTF-8); the last one counts. Told
    /// whether it came from the variable.
    Path(fn(&mut Settings, PathBuf, bool)),
    /// `--flag` alone (or `--flag=true|false`); its variable takes
    /// true/false/1/0/yes/no. Applied only when given.
    Switch(fn(&mut Settings, bool)),
    /// Repeatable; its variable is a comma-separated list. Applied per item.
    List(fn(&mut Settings, Given) -> Result<(), ConfigError>),
}

/// The default `--help` and the README show.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Default {
    /// A value: the setting's value when the flag is not given, applied
    /// through the flag itself.
    Value(&'static str),
    /// A value, then a remark about it.
    ValueThen(&'static str, &'static str),
    /// Words for a setting that stays unset or empty (a test checks it).
    Prose(&'static str),
    /// Lists only: another program's variable, read leniently (empty items
    /// are skipped: empty means none) when the flag and its own variable
    /// are absent; then the words.
    Env(&'static str, &'static str),
}

impl Default {
    pub(super) fn text(self) -> String {
        match self {
            Default::Value(v) => v.to_string(),
            Default::ValueThen(v, then) => format!("{v} {then}"),
            Default::Prose(words) | Default::Env(_, words) => words.to_string(),
        }
    }

    /// The concrete value, when there is one: what a setting is when not given.
    pub(super) fn value(self) -> Option<&'static str> {
        match self {
            Default::Value(v) | Default::ValueThen(v, _) => Some(v),
            Default::Prose(_) | Default::Env(..) => None,
        }
    }
}

impl Flag {
    /// Reads this flag's raw values (`given` on the command line, else its
    /// variable) and applies them to `s`; nothing when it is absent.
    pub(super) fn apply(&self, s: &mut Settings, given: &[OsString], env: Env<'_>) -> Result<(), ConfigError> {
        match self.kind {
            Kind::Value(apply) => match self.one(given, env)? {
                Some((raw, source)) => apply(s, Given { value: text(raw, source)?, source }),
                None => Ok(()),
            },
            Kind::Path(apply) => {
                if let Some((raw, source)) = self.one(given, env)? {
                    apply(s, PathBuf::from(raw), source == self.env);
                }
                Ok(())
            }
            Kind::Switch(apply) => {
                if let Some((raw, source)) = self.one(given, env)? {
                    apply(s, Given { value: text(raw, source)?, source }.parse(parse_switch)?);
                }
                Ok(())
            }
            Kind::List(apply) => self.list(given, env)?.into_iter().try_for_each(|v| apply(s, v)),
        }
    }

    /// The last value given, else the variable's, with where it came from.
    fn one(&self, given: &[OsString], env: Env<'_>) -> Result<Option<(OsString, &'static str)>, ConfigError> {
        if let Some(v) = given.last() {
            if v.is_empty() {
                return Err(ConfigError(format!("{} is empty", self.name)));
            }
            return Ok(Some((v.clone(), self.name)));
        }
        match env(self.env) {
            Some(v) if v.is_empty() && EMPTY_MEANS_UNSET.contains(&self.env) => Ok(None),
            Some(v) if v.is_empty() => Err(ConfigError(format!("{} is set but empty", self.env))),
            Some(v) => Ok(Some((v, self.env))),
            None => Ok(None),
        }
    }

    /// Every value given, else the variable's comma-separated items, else
    /// those of the variable the default names.
    fn list(&self, given: &[OsString], env: Env<'_>) -> Result<Vec<Given>, ConfigError> {
        if !given.is_empty() {
            return given
                .iter()
                .map(|v| match v.is_empty() {
                    true => Err(ConfigError(format!("{} is empty", self.name))),
                    false => Ok(Given { value: text(v.clone(), self.name)?, source: self.name }),
                })
                .collect();
        }
        if let Some(v) = env(self.env) {
            let v = text(v, self.env)?;
            let items: Vec<&str> = v.split(',').map(str::trim).collect();
            if items.iter().any(|item| item.is_empty()) {
                return Err(ConfigError(format!("{} has an empty item: {v:?}", self.env)));
            }
            return Ok(items.into_iter().map(|item| Given { value: item.into(), source: self.env }).collect());
        }
        let Default::Env(var, _) = self.default else { return Ok(Vec::new()) };
        let v = env(var).map(|v| text(v, var)).transpose()?.unwrap_or_default();
        let items = v.split(',').map(str::trim).filter(|item| !item.is_empty());
        Ok(items.map(|item| Given { value: item.into(), source: var }).collect())
    }
}
