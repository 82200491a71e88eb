//! `config.toml`: every setting with its default, environment overrides, and errors that name the bad key.
//!
//! Any key can be overridden from the environment as `NANOGATE_<SECTION>__<KEY>` (or `NANOGATE_<KEY>` for a
//! top-level key): `NANOGATE_SESSION__DURABILITY=os`. The value is read as a TOML value when it is one
//! (`30`, `true`, `"text"`) and as a plain string otherwise. Unknown keys, in the file or the environment, are
//! errors that name the key, so a typo never silently falls back to a default.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::session::{Durability, StoreOptions};

/// Prefix of environment overrides.
const ENV_PREFIX: &str = "NANOGATE_";

/// The whole configuration.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The workspace directory (sessions, memory, templates); default `~/.nanogate/workspace`.
    pub workspace: Option<PathBuf>,
    /// `[session]`: how sessions are cached and written.
    pub session: SessionConfig,
}

/// `[session]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionConfig {
    /// Minutes an unused session stays in memory; 0 keeps sessions cached forever.
    pub cache_idle_minutes: u64,
    /// `"fsync"` (default): a commit is on disk before the reply is sent; `"os"`: leave flushing to the OS.
    pub durability: Durability,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            cache_idle_minutes: 30,
            durability: Durability::Fsync,
        }
    }
}

impl SessionConfig {
    /// The store options these settings describe.
    pub fn store_options(&self) -> StoreOptions {
        StoreOptions {
            durability: self.durability,
            cache_idle: std::time::Duration::from_secs(self.cache_idle_minutes.saturating_mul(60)),
        }
    }
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but cannot be read, or an explicitly named file is missing.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The file is not valid TOML or has an unknown or mistyped key.
    #[error("config file {path} is invalid: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// toml's description, with line and column.
        message: String,
    },
    /// An environment override is invalid.
    #[error("environment variable {var} is invalid: {message}")]
    Env {
        /// The variable.
        var: String,
        /// What is wrong with it.
        message: String,
    },
    /// `$HOME` is not set, so the default paths cannot be found.
    #[error(
        "HOME is not set, so ~/.nanogate cannot be found; pass --workspace and --config explicitly"
    )]
    NoHome,
}

/// `~/.nanogate`, where the default config and workspace live (as nanobot uses `~/.nanobot`).
pub fn data_dir() -> Result<PathBuf, ConfigError> {
    match std::env::var_os("HOME") {
        Some(h) if !h.is_empty() => Ok(PathBuf::from(h).join(".nanogate")),
        _ => Err(ConfigError::NoHome),
    }
}

/// Replaces a leading `~` with `$HOME`.
pub fn expand_tilde(p: &Path) -> PathBuf {
    match (p.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => p.to_path_buf(),
    }
}

impl Config {
    /// Reads `path` (or `~/.nanogate/config.toml` when `None`; a missing default file means all defaults), then
    /// applies `NANOGATE_…` overrides from the process environment.
    pub fn load(path: Option<&Path>) -> Result<(Config, PathBuf), ConfigError> {
        let (path, explicit) = match path {
            Some(p) => (expand_tilde(p), true),
            None => (data_dir()?.join("config.toml"), false),
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => String::new(),
            Err(source) => return Err(ConfigError::Read { path, source }),
        };
        let config = Self::from_toml(&text, std::env::vars(), &path)?;
        Ok((config, path))
    }

    /// Parses TOML text and applies overrides from `env` (name/value pairs; only `NANOGATE_…` ones are used).
    pub fn from_toml(
        text: &str,
        env: impl Iterator<Item = (String, String)>,
        path: &Path,
    ) -> Result<Config, ConfigError> {
        let invalid = |e: toml::de::Error| ConfigError::Invalid {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        // Parse the file alone first so its errors carry line numbers.
        let config: Config = toml::from_str(text).map_err(invalid)?;
        let mut table: toml::Table = toml::from_str(text).map_err(invalid)?;
        let mut overridden = Vec::new();
        for (var, raw) in env {
            let Some(name) = var.strip_prefix(ENV_PREFIX) else {
                continue;
            };
            let parts: Vec<String> = name.split("__").map(str::to_lowercase).collect();
            let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
                .ok()
                .and_then(|mut t| t.remove("v"))
                .unwrap_or_else(|| toml::Value::String(raw.clone()));
            let env_err = |message: String| ConfigError::Env {
                var: var.clone(),
                message,
            };
            match parts.as_slice() {
                [key] if !key.is_empty() => {
                    table.insert(key.clone(), value);
                }
                [section, key] if !section.is_empty() && !key.is_empty() => {
                    let entry = table
                        .entry(section.clone())
                        .or_insert_with(|| toml::Value::Table(Default::default()));
                    let toml::Value::Table(t) = entry else {
                        return Err(env_err(format!("`{section}` is not a section")));
                    };
                    t.insert(key.clone(), value);
                }
                _ => {
                    return Err(env_err(
                        "expected NANOGATE_<SECTION>__<KEY> or NANOGATE_<KEY>".into(),
                    ));
                }
            }
            overridden.push(var);
        }
        if overridden.is_empty() {
            return Ok(config);
        }
        Config::deserialize(toml::Value::Table(table)).map_err(|e| ConfigError::Env {
            var: overridden.join(", "),
            message: e.to_string(),
        })
    }

    /// The workspace: `--workspace` when given, else the `workspace` key, else `~/.nanogate/workspace`.
    pub fn workspace_dir(&self, flag: Option<&Path>) -> Result<PathBuf, ConfigError> {
        match flag.or(self.workspace.as_deref()) {
            Some(p) => Ok(expand_tilde(p)),
            None => Ok(data_dir()?.join("workspace")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<Vec<_>>();
        Config::from_toml(text, env.into_iter(), Path::new("config.toml"))
    }

    #[test]
    fn defaults() {
        let c = parse("", &[]).unwrap();
        assert_eq!(c.session.cache_idle_minutes, 30);
        assert_eq!(c.session.durability, Durability::Fsync);
    }

    #[test]
    fn unknown_key_is_named() {
        let e = parse("[session]\ncache_idle_minute = 3\n", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("cache_idle_minute"), "{e}");
        assert!(e.contains("line 2"), "{e}");
        let e = parse("", &[("NANOGATE_SESSION__BOGUS", "1")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("NANOGATE_SESSION__BOGUS") && e.contains("bogus"),
            "{e}"
        );
    }

    #[test]
    fn env_overrides_file() {
        let c = parse(
            "[session]\ndurability = \"fsync\"\n",
            &[
                ("NANOGATE_SESSION__DURABILITY", "os"),
                ("NANOGATE_SESSION__CACHE_IDLE_MINUTES", "5"),
                ("OTHER", "x"),
            ],
        )
        .unwrap();
        assert_eq!(c.session.durability, Durability::Os);
        assert_eq!(c.session.cache_idle_minutes, 5);
        let c = parse("", &[("NANOGATE_WORKSPACE", "/tmp/ws")]).unwrap();
        assert_eq!(c.workspace.as_deref(), Some(Path::new("/tmp/ws")));
    }

    #[test]
    fn bad_value_is_clear() {
        let e = parse("[session]\ndurability = \"sometimes\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("sometimes") || e.contains("durability"), "{e}");
    }
}
