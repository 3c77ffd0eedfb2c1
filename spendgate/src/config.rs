//! The operator's one configuration: `spendgate.toml` and the environment.
//!
//! Guarantees:
//! - Every setting has one name ([`Name`]). It is read from the file (the
//!   path from `--config` or `SPENDGATE_CONFIG`; `spendgate.toml` in the
//!   working directory when that exists) and overridden by
//!   `SPENDGATE_<KEY>`; the three database URLs also by `DATABASE_URL`,
//!   `MIGRATION_DATABASE_URL` and `ONBOARD_DATABASE_URL`, which the rest of
//!   the Postgres world (and `harness db`) uses.
//! - A file that does not parse, or holds a key that is not a setting, is
//!   refused with the file, the line and the key. A named file that does
//!   not exist is refused; nothing is guessed.
//! - A value is checked where a command needs it, with an error naming the
//!   key, where it came from and what to do: a ledger key or webhook secret
//!   shorter than 32 bytes, a provider that is not `razorpay` or `demo`, a
//!   live-mode Razorpay key, an address that does not parse.
//! - The log key (`log_key`) signs each tenant's checkpoints; like the
//!   ledger key it is never stored in the database nor derived from
//!   another secret.
//! - The ledger key is never derived from another secret: a command that
//!   writes or verifies the ledger refuses to run without one.
//! - Secrets are never shown: [`Config::describe`] redacts them, and a
//!   database URL's password.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The variable naming the configuration file.
pub const CONFIG_ENV: &str = "SPENDGATE_CONFIG";
/// The file read from the working directory when no path is given.
pub const DEFAULT_FILE: &str = "spendgate.toml";
/// The shortest ledger key or webhook secret accepted, in bytes.
pub const MIN_SECRET_BYTES: usize = 32;
/// Where the service listens unless `bind` says otherwise.
pub const DEFAULT_BIND: &str = "127.0.0.1:8080";
/// How often `serve` signs grown tenants' checkpoints unless
/// `checkpoint_interval_ms` says otherwise: a second bounds the delay from a
/// commit to a checkpoint covering it at about a second, and costs an idle
/// gate one statement a second (the heads against the kept checkpoints).
pub const DEFAULT_CHECKPOINT_INTERVAL_MS: &str = "1000";
/// The shortest and longest `checkpoint_interval_ms` accepted.
pub const CHECKPOINT_INTERVAL_MS: std::ops::RangeInclusive<u64> = 10..=3_600_000;
/// `row_security` when nothing sets it: whether `spendgate migrate` enables
/// row-level security (see `migrations/*_row_security.sql`).
pub const DEFAULT_ROW_SECURITY: &str = "false";

/// Every setting, by its one name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Name {
    DatabaseUrl,
    MigrationDatabaseUrl,
    OnboardDatabaseUrl,
    Bind,
    LedgerKey,
    LogKey,
    CheckpointIntervalMs,
    WebhookSecret,
    WebhookSecretPrevious,
    Provider,
    RazorpayKeyId,
    RazorpayKeySecret,
    RazorpayBaseUrl,
    MandateKeys,
    RowSecurity,
}

impl Name {
    /// Every key, in the order `config check` prints them.
    pub const ALL: [Name; 15] = [
        Name::DatabaseUrl,
        Name::MigrationDatabaseUrl,
        Name::OnboardDatabaseUrl,
        Name::Bind,
        Name::LedgerKey,
        Name::LogKey,
        Name::CheckpointIntervalMs,
        Name::WebhookSecret,
        Name::WebhookSecretPrevious,
        Name::Provider,
        Name::RazorpayKeyId,
        Name::RazorpayKeySecret,
        Name::RazorpayBaseUrl,
        Name::MandateKeys,
        Name::RowSecurity,
    ];

    /// The name in `spendgate.toml`.
    pub fn name(self) -> &'static str {
        match self {
            Name::DatabaseUrl => "database_url",
            Name::MigrationDatabaseUrl => "migration_database_url",
            Name::OnboardDatabaseUrl => "onboard_database_url",
            Name::Bind => "bind",
            Name::LedgerKey => "ledger_key",
            Name::LogKey => "log_key",
            Name::CheckpointIntervalMs => "checkpoint_interval_ms",
            Name::WebhookSecret => "webhook_secret",
            Name::WebhookSecretPrevious => "webhook_secret_previous",
            Name::Provider => "provider",
            Name::RazorpayKeyId => "razorpay_key_id",
            Name::RazorpayKeySecret => "razorpay_key_secret",
            Name::RazorpayBaseUrl => "razorpay_base_url",
            Name::MandateKeys => "mandate_keys",
            Name::RowSecurity => "row_security",
        }
    }

    /// `SPENDGATE_<KEY>`.
    pub fn env(self) -> String {
        format!("SPENDGATE_{}", self.name().to_ascii_uppercase())
    }

    /// The conventional variable that also sets it, read after `SPENDGATE_<KEY>`.
    fn conventional_env(self) -> Option<&'static str> {
        match self {
            Name::DatabaseUrl => Some("DATABASE_URL"),
            Name::MigrationDatabaseUrl => Some("MIGRATION_DATABASE_URL"),
            Name::OnboardDatabaseUrl => Some("ONBOARD_DATABASE_URL"),
            _ => None,
        }
    }

    /// Whether its value is a secret (never shown).
    pub fn is_secret(self) -> bool {
        matches!(
            self,
            Name::LedgerKey
                | Name::LogKey
                | Name::WebhookSecret
                | Name::WebhookSecretPrevious
                | Name::RazorpayKeySecret
        )
    }

    /// Whether its value is a database URL (shown with the password redacted).
    fn is_database_url(self) -> bool {
        matches!(
            self,
            Name::DatabaseUrl | Name::MigrationDatabaseUrl | Name::OnboardDatabaseUrl
        )
    }

    /// The value used when nothing sets it.
    fn default_value(self) -> Option<&'static str> {
        match self {
            Name::Bind => Some(DEFAULT_BIND),
            Name::CheckpointIntervalMs => Some(DEFAULT_CHECKPOINT_INTERVAL_MS),
            Name::RazorpayBaseUrl => Some(gate::provider::RAZORPAY_API),
            Name::RowSecurity => Some(DEFAULT_ROW_SECURITY),
            _ => None,
        }
    }

    /// What the setting is for, and how to set it: the text of a "missing" error.
    fn hint(self) -> &'static str {
        match self {
            Name::DatabaseUrl => {
                "the application role's URL, postgres://spendgate_app:PASSWORD@HOST/spendgate"
            }
            Name::MigrationDatabaseUrl => {
                "the owner role's URL, postgres://spendgate_owner:PASSWORD@HOST/spendgate \
                 (only `spendgate migrate` uses it)"
            }
            Name::OnboardDatabaseUrl => {
                "the onboarding role's URL, postgres://spendgate_onboard:PASSWORD@HOST/spendgate \
                 (only `spendgate tenant apply` and `spendgate keys` use it: the gate's own \
                 login cannot create tenants, people, agents, merchants, keys or root delegations)"
            }
            Name::Bind => "the address to listen on, e.g. 127.0.0.1:8080",
            Name::LedgerKey => {
                "at least 32 random bytes, kept outside the database and apart from every \
                 other secret: `openssl rand -hex 32`"
            }
            Name::LogKey => {
                "at least 32 random bytes, kept outside the database and apart from every \
                 other secret, from which each tenant's Ed25519 log key is derived: \
                 `openssl rand -hex 32` (changing it changes every tenant's public key)"
            }
            Name::CheckpointIntervalMs => {
                "how often, in milliseconds, `serve` signs the checkpoint of each tenant whose \
                 ledger grew (from 10 to 3600000; default 1000)"
            }
            Name::WebhookSecret => {
                "the webhook secret set in the provider's dashboard, at least 32 bytes \
                 (`openssl rand -hex 32` for the demo provider)"
            }
            Name::WebhookSecretPrevious => {
                "the webhook secret before a rotation, accepted for 24 hours of retries"
            }
            Name::Provider => {
                "`razorpay` (Razorpay Test Mode) or `demo` (in-process, kept in Postgres)"
            }
            Name::RazorpayKeyId => "a Razorpay Test Mode key id, rzp_test_...",
            Name::RazorpayKeySecret => "the secret of razorpay_key_id",
            Name::RazorpayBaseUrl => "the Orders API's base URL",
            Name::MandateKeys => {
                "the keys file of the humans who may sign mandates: one `TENANT PERSON \
                 ed25519:BASE64` per line (`spendgate mandate keygen` prints the line); \
                 without it no policy verifies and every proposal is POLICY_INVALID"
            }
            Name::RowSecurity => {
                "`true` or `false`: whether the database keeps tenants apart with row-level \
                 security (applied by `spendgate migrate`; `spendgate tenant apply` writes \
                 each tenant's token first)"
            }
        }
    }

    fn parse(name: &str) -> Option<Name> {
        Name::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    File(PathBuf),
    Env(String),
    Default,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::File(path) => write!(f, "{}", path.display()),
            Source::Env(var) => write!(f, "${var}"),
            Source::Default => f.write_str("default"),
        }
    }
}

/// One value and where it came from.
#[derive(Clone, PartialEq, Eq)]
pub struct Setting {
    pub value: String,
    pub source: Source,
}

/// Never shows the value: it may be a secret.
impl std::fmt::Debug for Setting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Setting")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// Why the configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the configuration file {path}: {cause}")]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{path}, line {line}: {message}")]
    Parse {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{path}, line {line}: `{key}` is not a setting (settings: {known})")]
    UnknownKey {
        path: PathBuf,
        line: usize,
        key: String,
        known: String,
    },
    #[error("{key} is not set: set `{key}` in spendgate.toml or {env}: {hint}")]
    Missing {
        key: &'static str,
        env: String,
        hint: &'static str,
    },
    #[error("{key} (from {origin}) {problem}")]
    Invalid {
        key: &'static str,
        origin: Source,
        problem: String,
    },
}

/// The settings in force.
#[derive(Debug, Clone, Default)]
pub struct Config {
    settings: BTreeMap<Name, Setting>,
    file: Option<PathBuf>,
}

/// Which payment provider the gate talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    /// Razorpay Test Mode over HTTP.
    Razorpay,
    /// The in-process provider, its orders kept in Postgres.
    Demo,
}

/// Razorpay's settings, checked.
#[derive(Clone)]
pub struct RazorpaySettings {
    pub key_id: String,
    pub key_secret: String,
    pub base_url: String,
}

impl Config {
    /// Reads `file` (or `SPENDGATE_CONFIG`'s, or `./spendgate.toml` when it
    /// exists), then the environment through `env`.
    pub fn load(
        file: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let named = file
            .map(Path::to_path_buf)
            .or_else(|| nonblank(env(CONFIG_ENV)).map(PathBuf::from));
        let path = match named {
            Some(path) => Some(path),
            None => Some(PathBuf::from(DEFAULT_FILE)).filter(|p| p.is_file()),
        };
        let mut config = Config::default();
        if let Some(path) = path {
            let text = std::fs::read_to_string(&path).map_err(|cause| ConfigError::Read {
                path: path.clone(),
                cause,
            })?;
            for (key, value) in parse_file(&path, &text)? {
                config.settings.insert(
                    key,
                    Setting {
                        value,
                        source: Source::File(path.clone()),
                    },
                );
            }
            config.file = Some(path);
        }
        for key in Name::ALL {
            let own = key.env();
            let found = nonblank(env(&own)).map(|v| (own.clone(), v)).or_else(|| {
                key.conventional_env()
                    .and_then(|var| nonblank(env(var)).map(|v| (var.to_owned(), v)))
            });
            if let Some((var, value)) = found {
                config.settings.insert(
                    key,
                    Setting {
                        value,
                        source: Source::Env(var),
                    },
                );
            }
        }
        Ok(config)
    }

    /// The file that was read, if any.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// The setting in force for `key`: set, or its default.
    pub fn get(&self, key: Name) -> Option<Setting> {
        self.settings.get(&key).cloned().or_else(|| {
            key.default_value().map(|v| Setting {
                value: v.to_owned(),
                source: Source::Default,
            })
        })
    }

    fn required(&self, key: Name) -> Result<Setting, ConfigError> {
        self.get(key).ok_or_else(|| ConfigError::Missing {
            key: key.name(),
            env: key.env(),
            hint: key.hint(),
        })
    }

    /// The application role's database URL.
    pub fn database_url(&self) -> Result<String, ConfigError> {
        self.required(Name::DatabaseUrl).map(|s| s.value)
    }

    /// The onboarding role's database URL (`tenant apply`, `keys`).
    pub fn onboard_database_url(&self) -> Result<String, ConfigError> {
        self.required(Name::OnboardDatabaseUrl).map(|s| s.value)
    }

    /// The owner role's database URL (migrations).
    pub fn migration_database_url(&self) -> Result<String, ConfigError> {
        self.required(Name::MigrationDatabaseUrl).map(|s| s.value)
    }

    /// The address to listen on.
    pub fn bind(&self) -> Result<SocketAddr, ConfigError> {
        let setting = self.required(Name::Bind)?;
        setting
            .value
            .parse()
            .map_err(|e| invalid(Name::Bind, &setting, format!("is not an address: {e}")))
    }

    /// The ledger key's bytes (at least 32).
    /// The keys file `mandate_keys` names, if it is set.
    pub fn mandate_keys(&self) -> Option<PathBuf> {
        self.get(Name::MandateKeys).map(|s| PathBuf::from(s.value))
    }

    pub fn ledger_key(&self) -> Result<Vec<u8>, ConfigError> {
        self.secret(Name::LedgerKey)
    }

    /// The log key's bytes (at least 32): each tenant's checkpoint signing
    /// key is derived from it.
    pub fn log_key(&self) -> Result<Vec<u8>, ConfigError> {
        self.secret(Name::LogKey)
    }

    /// How often `serve` signs the checkpoints of the tenants whose ledger
    /// grew ([`CHECKPOINT_INTERVAL_MS`] milliseconds at most and least).
    pub fn checkpoint_interval(&self) -> Result<std::time::Duration, ConfigError> {
        let setting = self.required(Name::CheckpointIntervalMs)?;
        let bad = |problem: String| invalid(Name::CheckpointIntervalMs, &setting, problem);
        let ms: u64 = setting.value.trim().parse().map_err(|_| {
            bad(format!(
                "is `{}`, not a whole number of milliseconds",
                shown(&setting.value)
            ))
        })?;
        if !CHECKPOINT_INTERVAL_MS.contains(&ms) {
            return Err(bad(format!(
                "is {ms} ms; it must be from {} to {} ms",
                CHECKPOINT_INTERVAL_MS.start(),
                CHECKPOINT_INTERVAL_MS.end()
            )));
        }
        Ok(std::time::Duration::from_millis(ms))
    }

    /// The webhook secret's bytes (at least 32).
    pub fn webhook_secret(&self) -> Result<Vec<u8>, ConfigError> {
        self.secret(Name::WebhookSecret)
    }

    /// The previous webhook secret, when one is set (at least 32 bytes).
    pub fn webhook_secret_previous(&self) -> Result<Option<Vec<u8>>, ConfigError> {
        match self.get(Name::WebhookSecretPrevious) {
            None => Ok(None),
            Some(_) => self.secret(Name::WebhookSecretPrevious).map(Some),
        }
    }

    fn secret(&self, key: Name) -> Result<Vec<u8>, ConfigError> {
        let setting = self.required(key)?;
        let len = setting.value.len();
        if len < MIN_SECRET_BYTES {
            return Err(invalid(
                key,
                &setting,
                format!(
                    "is {len} bytes; it must be at least {MIN_SECRET_BYTES}: {}",
                    key.hint()
                ),
            ));
        }
        Ok(setting.value.into_bytes())
    }

    /// Which provider to talk to.
    pub fn provider(&self) -> Result<ProviderKind, ConfigError> {
        let setting = self.required(Name::Provider)?;
        match setting.value.as_str() {
            "razorpay" => Ok(ProviderKind::Razorpay),
            "demo" => Ok(ProviderKind::Demo),
            other => Err(invalid(
                Name::Provider,
                &setting,
                format!("is `{}`, not `razorpay` or `demo`", shown(other)),
            )),
        }
    }

    /// Whether the database enforces row-level security for the gate's
    /// runtime role (`row_security`: `true` or `false`).
    pub fn row_security(&self) -> Result<bool, ConfigError> {
        let setting = self.required(Name::RowSecurity)?;
        match setting.value.as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            other => Err(invalid(
                Name::RowSecurity,
                &setting,
                format!("is `{}`, not `true` or `false`", shown(other)),
            )),
        }
    }

    /// Razorpay's key, secret and base URL: a `rzp_live_` key is refused here,
    /// before anything is sent or listened on.
    pub fn razorpay(&self) -> Result<RazorpaySettings, ConfigError> {
        let id = self.required(Name::RazorpayKeyId)?;
        if id.value.starts_with("rzp_live_") {
            return Err(invalid(
                Name::RazorpayKeyId,
                &id,
                "is a live-mode key (rzp_live_...): spendgate talks only to Razorpay Test Mode; \
                 use a rzp_test_ key"
                    .to_owned(),
            ));
        }
        if !id.value.starts_with("rzp_test_") {
            return Err(invalid(
                Name::RazorpayKeyId,
                &id,
                "is not a Razorpay Test Mode key id (rzp_test_...)".to_owned(),
            ));
        }
        let secret = self.required(Name::RazorpayKeySecret)?;
        let base = self.required(Name::RazorpayBaseUrl)?;
        let parsed = reqwest::Url::parse(&base.value)
            .map_err(|e| invalid(Name::RazorpayBaseUrl, &base, format!("is not a URL ({e})")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(invalid(
                Name::RazorpayBaseUrl,
                &base,
                "must be an http or https URL".to_owned(),
            ));
        }
        Ok(RazorpaySettings {
            key_id: id.value,
            key_secret: secret.value,
            base_url: base.value.trim_end_matches('/').to_owned(),
        })
    }

    /// Every setting in force, one line each: `key = value (source)`, secrets
    /// redacted, a database URL's password hidden, unset keys said to be so.
    pub fn describe(&self) -> Vec<String> {
        Name::ALL
            .into_iter()
            .map(|key| match self.get(key) {
                None => format!("{:<24} (not set)", key.name()),
                Some(setting) => {
                    let value = if key.is_secret() {
                        format!("[redacted, {} bytes]", setting.value.len())
                    } else if key.is_database_url() {
                        gate::db::redact_url(&setting.value)
                    } else {
                        setting.value.clone()
                    };
                    format!("{:<24} {value}  ({})", key.name(), setting.source)
                }
            })
            .collect()
    }
}

fn invalid(key: Name, setting: &Setting, problem: String) -> ConfigError {
    ConfigError::Invalid {
        key: key.name(),
        origin: setting.source.clone(),
        problem,
    }
}

/// At most 40 characters of an operator's value, for an error message.
fn shown(value: &str) -> String {
    let mut out: String = value.chars().take(40).collect();
    if value.chars().count() > 40 {
        out.push('…');
    }
    out.escape_debug().to_string()
}

fn nonblank(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.trim().is_empty())
}

/// The file's settings: a flat TOML table of strings.
fn parse_file(path: &Path, text: &str) -> Result<Vec<(Name, String)>, ConfigError> {
    #[derive(Deserialize)]
    #[serde(transparent)]
    struct Flat(BTreeMap<String, toml::Spanned<toml::Value>>);
    let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
    let flat: Flat = toml::from_str(text).map_err(|e| ConfigError::Parse {
        path: path.to_path_buf(),
        line: e.span().map_or(1, |s| line_of(s.start)),
        message: e.message().to_owned(),
    })?;
    let mut out = Vec::new();
    for (name, value) in flat.0 {
        let line = line_of(value.span().start);
        let Some(key) = Name::parse(&name) else {
            return Err(ConfigError::UnknownKey {
                path: path.to_path_buf(),
                line,
                key: shown(&name),
                known: Name::ALL.map(Name::name).join(", "),
            });
        };
        match value.into_inner() {
            toml::Value::String(s) => out.push((key, s)),
            other => {
                return Err(ConfigError::Parse {
                    path: path.to_path_buf(),
                    line,
                    message: format!(
                        "`{}` must be a string, not a {}",
                        key.name(),
                        other.type_str()
                    ),
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    fn file(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spendgate.toml");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn the_environment_overrides_the_file_and_says_where_each_value_came_from() {
        let (_dir, path) = file("provider = \"demo\"\nbind = \"127.0.0.1:9000\"\n");
        let config = Config::load(
            Some(&path),
            &env_of(&[
                ("SPENDGATE_BIND", "127.0.0.1:9100"),
                ("DATABASE_URL", "postgres://a@h/d"),
            ]),
        )
        .unwrap();
        assert_eq!(config.bind().unwrap().port(), 9100);
        assert_eq!(config.provider().unwrap(), ProviderKind::Demo);
        assert_eq!(config.database_url().unwrap(), "postgres://a@h/d");
        let bind = config.get(Name::Bind).unwrap();
        assert_eq!(bind.source, Source::Env("SPENDGATE_BIND".into()));
        assert_eq!(
            config.get(Name::Provider).unwrap().source,
            Source::File(path.clone())
        );
    }

    #[test]
    fn spendgate_database_url_wins_over_the_conventional_variable() {
        let config = Config::load(
            None,
            &env_of(&[
                ("SPENDGATE_DATABASE_URL", "postgres://own@h/d"),
                ("DATABASE_URL", "postgres://conventional@h/d"),
            ]),
        )
        .unwrap();
        assert_eq!(config.database_url().unwrap(), "postgres://own@h/d");
    }

    #[test]
    fn an_unknown_key_is_refused_with_its_line() {
        let (_dir, path) = file("provider = \"demo\"\n\nledger_keys = \"x\"\n");
        let err = Config::load(Some(&path), &env_of(&[])).unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, ConfigError::UnknownKey { line: 3, .. }),
            "{text}"
        );
        assert!(
            text.contains("ledger_keys") && text.contains("line 3"),
            "{text}"
        );
    }

    #[test]
    fn a_value_that_is_not_a_string_names_its_line_and_key() {
        let (_dir, path) = file("bind = \"127.0.0.1:1\"\nprovider = 7\n");
        let text = Config::load(Some(&path), &env_of(&[]))
            .unwrap_err()
            .to_string();
        assert!(
            text.contains("line 2") && text.contains("`provider` must be a string"),
            "{text}"
        );
    }

    #[test]
    fn a_file_that_does_not_parse_names_its_line() {
        let (_dir, path) = file("provider = \"demo\"\nbind = \n");
        let err = Config::load(Some(&path), &env_of(&[])).unwrap_err();
        assert!(matches!(err, ConfigError::Parse { line: 2, .. }), "{err}");
    }

    #[test]
    fn a_named_file_that_does_not_exist_is_refused() {
        let err =
            Config::load(Some(Path::new("/nonexistent/spendgate.toml")), &env_of(&[])).unwrap_err();
        assert!(matches!(err, ConfigError::Read { .. }), "{err}");
    }

    #[test]
    fn a_missing_ledger_key_names_the_key_and_its_variable() {
        let config = Config::load(None, &env_of(&[])).unwrap();
        let text = config.ledger_key().unwrap_err().to_string();
        assert!(
            text.contains("ledger_key") && text.contains("SPENDGATE_LEDGER_KEY"),
            "{text}"
        );
    }

    #[test]
    fn a_short_secret_is_refused_and_a_32_byte_one_taken() {
        let config =
            Config::load(None, &env_of(&[("SPENDGATE_LEDGER_KEY", &"k".repeat(31))])).unwrap();
        let text = config.ledger_key().unwrap_err().to_string();
        assert!(
            text.contains("31 bytes") && text.contains("SPENDGATE_LEDGER_KEY"),
            "{text}"
        );
        let config =
            Config::load(None, &env_of(&[("SPENDGATE_LEDGER_KEY", &"k".repeat(32))])).unwrap();
        assert_eq!(config.ledger_key().unwrap().len(), 32);
    }

    #[test]
    fn the_checkpoint_interval_defaults_to_a_second_and_refuses_what_is_out_of_range() {
        let config = Config::load(None, &env_of(&[])).unwrap();
        assert_eq!(
            config.checkpoint_interval().unwrap(),
            std::time::Duration::from_millis(1000)
        );
        assert_eq!(
            config.checkpoint_interval().unwrap(),
            gate::service::checkpointer::DEFAULT_INTERVAL,
            "serve's default is the signer's"
        );
        let (_dir, path) = file("checkpoint_interval_ms = \"250\"\n");
        let config = Config::load(Some(&path), &env_of(&[])).unwrap();
        assert_eq!(
            config.checkpoint_interval().unwrap(),
            std::time::Duration::from_millis(250)
        );
        for (value, said) in [
            ("0", "is 0 ms"),
            ("3600001", "is 3600001 ms"),
            ("1s", "not a whole number"),
        ] {
            let config = Config::load(
                Some(&path),
                &env_of(&[("SPENDGATE_CHECKPOINT_INTERVAL_MS", value)]),
            )
            .unwrap();
            let text = config.checkpoint_interval().unwrap_err().to_string();
            assert!(
                text.contains("checkpoint_interval_ms")
                    && text.contains("SPENDGATE_CHECKPOINT_INTERVAL_MS")
                    && text.contains(said),
                "{text}"
            );
        }
    }

    #[test]
    fn a_live_razorpay_key_is_refused_naming_the_setting() {
        let config = Config::load(
            None,
            &env_of(&[
                ("SPENDGATE_RAZORPAY_KEY_ID", "rzp_live_abc"),
                ("SPENDGATE_RAZORPAY_KEY_SECRET", "s"),
            ]),
        )
        .unwrap();
        let text = config.razorpay().err().unwrap().to_string();
        assert!(
            text.contains("razorpay_key_id") && text.contains("live-mode"),
            "{text}"
        );
    }

    #[test]
    fn a_provider_that_is_neither_is_refused() {
        let config = Config::load(None, &env_of(&[("SPENDGATE_PROVIDER", "stripe")])).unwrap();
        let text = config.provider().unwrap_err().to_string();
        assert!(
            text.contains("`stripe`") && text.contains("SPENDGATE_PROVIDER"),
            "{text}"
        );
    }

    #[test]
    fn describe_never_shows_a_secret_or_a_password() {
        let config = Config::load(
            None,
            &env_of(&[
                (
                    "SPENDGATE_LEDGER_KEY",
                    "ledger-key-that-is-long-enough-000000",
                ),
                ("DATABASE_URL", "postgres://app:hunter2@h/d"),
            ]),
        )
        .unwrap();
        let text = config.describe().join("\n");
        assert!(
            !text.contains("ledger-key-that") && !text.contains("hunter2"),
            "{text}"
        );
        assert!(text.contains("[redacted, 37 bytes]"), "{text}");
        assert!(text.contains("(not set)"), "{text}");
    }
}
