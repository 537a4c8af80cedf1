use super::*;
use std::collections::HashMap;

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| map.get(name).cloned()
}

#[test]
fn defaults_are_valid() {
    let config = Config::load(None, env(&[])).expect("defaults");
    assert_eq!(config, Config::default());
}

#[test]
fn env_overrides_and_bad_values_name_the_variable() {
    let config = Config::load(None, env(&[("CAIRN_WORKERS", "7")])).expect("valid");
    assert_eq!(config.workers, 7);
    let error = Config::load(None, env(&[("CAIRN_WORKERS", "many")])).unwrap_err();
    assert!(error.to_string().contains("CAIRN_WORKERS"), "{error}");
    let error = Config::load(None, env(&[("CAIRN_DATABASE_URL", "mysql://x")])).unwrap_err();
    assert!(error.to_string().contains("CAIRN_DATABASE_URL"), "{error}");
}

#[test]
fn cairn_database_url_wins_over_database_url() {
    let config = Config::load(
        None,
        env(&[
            ("DATABASE_URL", "postgres://a/x"),
            ("CAIRN_DATABASE_URL", "postgres://b/y"),
        ]),
    )
    .expect("valid");
    assert_eq!(
        config.database_url.as_ref().map(Secret::expose),
        Some("postgres://b/y")
    );
}

#[test]
fn secrets_never_print() {
    let config = Config::load(
        None,
        env(&[
            ("CAIRN_LLM_DEFAULT_BASE_URL", "http://127.0.0.1:1"),
            ("CAIRN_LLM_DEFAULT_MODEL", "m"),
            ("CAIRN_LLM_DEFAULT_API_KEY", "sk-very-secret"),
            ("CAIRN_DATABASE_URL", "postgres://user:hunter2@h/db"),
        ]),
    )
    .expect("valid");
    let debug = format!("{config:?}");
    let json = serde_json::to_string(&config).expect("serializes");
    for shown in [debug, json] {
        assert!(
            !shown.contains("sk-very-secret") && !shown.contains("hunter2"),
            "{shown}"
        );
    }
}

#[test]
fn engine_settings_from_file_and_env_are_checked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cairn.toml");
    std::fs::write(&path, "[engine]\nmax_parallel = 2\nmax_retry_step = 1\n").expect("write");
    let config =
        Config::load(Some(&path), env(&[("CAIRN_ENGINE_REPAIR_AT", "0.75")])).expect("valid");
    assert_eq!(
        (
            config.engine.max_parallel,
            config.engine.max_retry_step,
            config.engine.pressure_frac
        ),
        (2, 1, 0.75)
    );
    let error = Config::load(None, env(&[("CAIRN_ENGINE_RESERVE_FRAC", "1.5")])).unwrap_err();
    assert!(
        error.to_string().contains("CAIRN_ENGINE_RESERVE_FRAC"),
        "{error}"
    );
    std::fs::write(&path, "[engine]\nmax_paralel = 2\n").expect("write");
    let error = Config::load(Some(&path), env(&[])).unwrap_err();
    assert!(error.to_string().contains("max_paralel"), "{error}");
}

#[test]
fn file_then_env() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cairn.toml");
    std::fs::write(
        &path,
        "workers = 3\nlease_ttl_ms = 5000\nheartbeat_ms = 1000\n",
    )
    .expect("write");
    let config = Config::load(Some(&path), env(&[("CAIRN_WORKERS", "5")])).expect("valid");
    assert_eq!((config.workers, config.lease_ttl_ms), (5, 5000));
    std::fs::write(&path, "wokers = 3\n").expect("write");
    let error = Config::load(Some(&path), env(&[])).unwrap_err();
    assert!(error.to_string().contains("wokers"), "{error}");
}

#[test]
fn readyz_check_models_is_off_by_default_and_read_from_env() {
    assert!(!Config::default().readyz_check_models);
    let config = Config::load(None, env(&[("CAIRN_READYZ_CHECK_MODELS", "true")])).expect("valid");
    assert!(config.readyz_check_models);
    let error = Config::load(None, env(&[("CAIRN_READYZ_CHECK_MODELS", "yes")])).unwrap_err();
    assert!(
        error.to_string().contains("CAIRN_READYZ_CHECK_MODELS"),
        "{error}"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cairn.toml");
    std::fs::write(&path, "readyz_check_models = true\n").expect("write");
    assert!(
        Config::load(Some(&path), env(&[]))
            .expect("valid")
            .readyz_check_models
    );
}

#[test]
fn cairn_auth_is_auto_on_or_off() {
    use crate::http::auth_start::AuthSetting;
    assert_eq!(Config::default().auth, AuthSetting::Auto);
    for (value, setting) in [
        ("auto", AuthSetting::Auto),
        ("on", AuthSetting::On),
        ("off", AuthSetting::Off),
    ] {
        let config = Config::load(None, env(&[("CAIRN_AUTH", value)])).expect("valid");
        assert_eq!(config.auth, setting);
    }
    let error = Config::load(None, env(&[("CAIRN_AUTH", "maybe")])).unwrap_err();
    assert!(error.to_string().contains("CAIRN_AUTH"), "{error}");
}

#[test]
fn max_running_per_tenant_is_off_by_default_checked_and_read_from_file_and_env() {
    assert_eq!(
        Config::default().max_running_per_tenant,
        0,
        "no cap by default"
    );
    let config = Config::load(None, env(&[("CAIRN_MAX_RUNNING_PER_TENANT", "3")])).expect("valid");
    assert_eq!(config.max_running_per_tenant, 3);
    for bad in ["-1", "two", "100001"] {
        let error = Config::load(None, env(&[("CAIRN_MAX_RUNNING_PER_TENANT", bad)])).unwrap_err();
        assert!(
            error.to_string().contains("CAIRN_MAX_RUNNING_PER_TENANT"),
            "{bad}: {error}"
        );
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cairn.toml");
    std::fs::write(&path, "max_running_per_tenant = 2\n").expect("write");
    let config = Config::load(Some(&path), env(&[])).expect("valid");
    assert_eq!(config.max_running_per_tenant, 2);
}
