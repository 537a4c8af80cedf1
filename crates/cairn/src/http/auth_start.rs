//! How `cairn serve` picks its [`AuthMode`] at start-up (the `auth` setting, `CAIRN_AUTH`), and
//! the one case in which it refuses to start: no key, and an address other than loopback.

use super::auth::AuthMode;

/// The `auth` setting (`CAIRN_AUTH`): how `cairn serve` picks its [`AuthMode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthSetting {
    /// Keys when the store holds any; with none, dev mode on a loopback address and a refusal to
    /// start on any other.
    #[default]
    Auto,
    /// Keys always, even while the store holds none (create one with `cairn keys create`).
    On,
    /// No authentication at all: every request is the default tenant with every scope.
    Off,
}

impl std::str::FromStr for AuthSetting {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "auto" => Ok(AuthSetting::Auto),
            "on" => Ok(AuthSetting::On),
            "off" => Ok(AuthSetting::Off),
            other => Err(format!(
                "expected \"auto\", \"on\" or \"off\", got {other:?}"
            )),
        }
    }
}

/// Why `cairn serve` refuses to start.
#[derive(Debug, thiserror::Error)]
pub enum AuthStartError {
    #[error(
        "refusing to listen on {0} (not a loopback address) with no API key in the store: create \
         one with `cairn keys create --tenant T --scopes read,submit,admin`, or set CAIRN_AUTH=off \
         to serve without authentication"
    )]
    NoKeys(std::net::SocketAddr),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// The mode `cairn serve` runs in, decided at start-up and announced loudly when it is not
/// [`AuthMode::Required`].
pub async fn start_mode(
    setting: AuthSetting,
    listen: std::net::SocketAddr,
    store: &dyn crate::store::Store,
) -> Result<AuthMode, AuthStartError> {
    let mode = match setting {
        AuthSetting::Off => AuthMode::Off,
        AuthSetting::On => AuthMode::Required,
        AuthSetting::Auto if store.has_api_keys().await? => AuthMode::Required,
        AuthSetting::Auto if listen.ip().is_loopback() => AuthMode::DevUntilKeys,
        AuthSetting::Auto => return Err(AuthStartError::NoKeys(listen)),
    };
    let warning = match mode {
        AuthMode::Required => None,
        AuthMode::Off => Some(
            "AUTHENTICATION IS OFF (CAIRN_AUTH=off): every request is tenant `default` with \
             every scope"
                .to_string(),
        ),
        AuthMode::DevUntilKeys => Some(format!(
            "DEV MODE: no API key in the store, so every request to {listen} is tenant `default` \
             with every scope until one is created with `cairn keys create`"
        )),
    };
    if let Some(warning) = warning {
        println!("cairn: WARNING: {warning}");
        tracing::warn!("{warning}");
    }
    Ok(mode)
}
