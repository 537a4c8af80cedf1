//! An MCP server registration: one `[[mcp]]` table of the tools file, checked before start.
//!
//! Operators register servers, never goal submitters (a goal cannot make cairn reach a new
//! URL). Header values may name environment variables (`"Bearer ${GITHUB_TOKEN}"`) so secrets
//! stay out of the file; they are read once at start, kept as [`Secret`]s, and never shown:
//! `GET /v1/tools` lists the header names only. Credentials are the operator's, per server,
//! not per tenant: every tenant's tasks reach a server as the same client.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use crate::secret::Secret;
use crate::tools::registry::{MAX_TIMEOUT_MS, check_url};

/// One `[[mcp]]` table, as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerFile {
    /// The namespace of the server's tools: `name.tool`.
    pub name: String,
    /// The streamable HTTP endpoint (`http://host:port/mcp`).
    pub url: String,
    /// Sent with every request; `${VAR}` is replaced by the environment variable's value.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// OAuth 2.0 client credentials: a bearer token fetched from `token_url` and renewed.
    #[serde(default)]
    pub oauth: Option<OauthFile>,
    /// Per-call timeout in milliseconds (also the listing's).
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Only these tools (the server's own names) are registered; absent: all.
    #[serde(default)]
    pub allow: Option<Vec<String>>,
    /// These tools are never registered, whatever `allow` says.
    #[serde(default)]
    pub deny: Vec<String>,
    /// Overrides the server's hints per tool: `{ tool = true }` marks a tool as writing.
    #[serde(default)]
    pub side_effects: BTreeMap<String, bool>,
    /// Used instead of `url` by shadow runs, for the tools with side effects.
    #[serde(default)]
    pub sandbox_url: Option<String>,
}

/// OAuth client credentials, as written; the secret may name an environment variable.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OauthFile {
    /// The token endpoint; absent, it is discovered from the server's metadata.
    #[serde(default)]
    pub token_url: Option<String>,
    pub client_id: String,
    pub client_secret: String,
    #[serde(default)]
    pub scope: Option<String>,
}

fn default_timeout_ms() -> u64 {
    30_000
}

/// A checked registration, secrets resolved.
#[derive(Debug, Clone)]
pub struct McpServerSpec {
    pub name: String,
    pub url: String,
    pub headers: Vec<(String, Secret)>,
    pub oauth: Option<Oauth>,
    pub timeout_ms: u64,
    pub allow: Option<BTreeSet<String>>,
    pub deny: BTreeSet<String>,
    pub side_effects: BTreeMap<String, bool>,
    pub sandbox_url: Option<String>,
}

/// Checked OAuth client credentials.
#[derive(Debug, Clone)]
pub struct Oauth {
    pub token_url: Option<String>,
    pub client_id: String,
    pub client_secret: Secret,
    pub scope: Option<String>,
}

impl McpServerSpec {
    /// Whether the registry offers the server's tool `tool`.
    pub fn offers(&self, tool: &str) -> bool {
        !self.deny.contains(tool) && self.allow.as_ref().is_none_or(|allow| allow.contains(tool))
    }
}

/// Checks a registration; returns the offending field and why. `env` reads a variable.
pub fn check(
    file: McpServerFile,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<McpServerSpec, (&'static str, String)> {
    let name_ok = !file.name.is_empty()
        && file.name.len() <= 32
        && file
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
    if !name_ok {
        return Err((
            "name",
            "must be 1-32 characters of letters, digits, '_' or '-' (it prefixes the tool names)"
                .into(),
        ));
    }
    check_url(&file.url).map_err(|message| ("url", message))?;
    if let Some(sandbox) = &file.sandbox_url {
        check_url(sandbox).map_err(|message| ("sandbox_url", message))?;
    }
    if file.timeout_ms == 0 || file.timeout_ms > MAX_TIMEOUT_MS {
        return Err((
            "timeout_ms",
            format!("must be 1..={MAX_TIMEOUT_MS}, got {}", file.timeout_ms),
        ));
    }
    let mut headers = Vec::with_capacity(file.headers.len());
    for (header, value) in &file.headers {
        if reqwest::header::HeaderName::from_bytes(header.as_bytes()).is_err() {
            return Err(("headers", format!("{header:?} is not a header name")));
        }
        let value = expand(value, env).map_err(|message| ("headers", message))?;
        if reqwest::header::HeaderValue::from_str(&value).is_err() {
            return Err((
                "headers",
                format!("the value of {header:?} is not a header value"),
            ));
        }
        headers.push((header.clone(), Secret::new(value)));
    }
    let oauth = match file.oauth {
        None => None,
        Some(oauth) => {
            if let Some(url) = &oauth.token_url {
                check_url(url).map_err(|message| ("oauth.token_url", message))?;
            }
            Some(Oauth {
                client_secret: Secret::new(
                    expand(&oauth.client_secret, env)
                        .map_err(|message| ("oauth.client_secret", message))?,
                ),
                token_url: oauth.token_url,
                client_id: oauth.client_id,
                scope: oauth.scope,
            })
        }
    };
    Ok(McpServerSpec {
        name: file.name,
        url: file.url,
        headers,
        oauth,
        timeout_ms: file.timeout_ms,
        allow: file.allow.map(|allow| allow.into_iter().collect()),
        deny: file.deny.into_iter().collect(),
        side_effects: file.side_effects,
        sandbox_url: file.sandbox_url,
    })
}

/// Replaces each `${VAR}` with the variable's value; an unset variable is an error naming it
/// (never its neighbours' values).
fn expand(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| "an unclosed ${ in a value".to_string())?;
        let var = &after[..end];
        let value = env(var).ok_or_else(|| format!("the environment variable {var} is not set"))?;
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(toml_text: &str) -> McpServerFile {
        toml::from_str(toml_text).expect("parses")
    }

    fn env(var: &str) -> Option<String> {
        (var == "TOKEN").then(|| "s3cret".to_string())
    }

    #[test]
    fn headers_read_the_environment_and_stay_secret() {
        let spec = check(
            file(
                "name = \"gh\"\nurl = \"http://127.0.0.1:1/mcp\"\n\
                 headers = { Authorization = \"Bearer ${TOKEN}\" }\ndeny = [\"printEnv\"]\n",
            ),
            &env,
        )
        .expect("valid");
        assert_eq!(spec.headers[0].1.expose(), "Bearer s3cret");
        assert!(!format!("{spec:?}").contains("s3cret"));
        assert!(spec.offers("echo") && !spec.offers("printEnv"));
    }

    #[test]
    fn bad_registrations_name_the_field() {
        let cases = [
            ("name = \"a.b\"\nurl = \"http://x/mcp\"\n", "name"),
            ("name = \"a\"\nurl = \"ftp://x/mcp\"\n", "url"),
            (
                "name = \"a\"\nurl = \"http://x\"\ntimeout_ms = 0\n",
                "timeout_ms",
            ),
            (
                "name = \"a\"\nurl = \"http://x\"\nheaders = { X = \"${NOPE}\" }\n",
                "headers",
            ),
        ];
        for (text, field) in cases {
            let (got, message) = check(file(text), &env).expect_err("refused");
            assert_eq!(got, field, "{message}");
        }
        let (_, message) = check(
            file("name = \"a\"\nurl = \"http://x\"\nheaders = { X = \"${NOPE}\" }\n"),
            &env,
        )
        .expect_err("refused");
        assert!(message.contains("NOPE"), "{message}");
    }
}
