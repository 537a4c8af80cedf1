//! `cairn mcp`: look at an MCP server as `cairn serve` would, before registering it: the
//! protocol revision it speaks, the tools it lists as cairn would register them (names, side
//! effects, skipped ones), and one call's answer as a step would read it. Also the client the
//! MCP conformance suite drives (`tests/mcp/conformance-client.sh`).

use std::collections::BTreeMap;
use std::process::ExitCode;

use cairn::tools::mcp::config::{self, McpServerFile, OauthFile};
use cairn::tools::mcp::{McpCall, McpHub, McpServerSpec, map};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(subcommand)]
    action: McpAction,
}

#[derive(Debug, Subcommand)]
enum McpAction {
    /// List a server's tools as cairn would register them (JSON on stdout).
    Tools(Server),
    /// Call one tool and print its answer as a step would read it (JSON on stdout).
    Call {
        #[command(flatten)]
        server: Server,
        /// The tool's name on the server (without a namespace).
        #[arg(long)]
        tool: String,
        /// The arguments, a JSON object.
        #[arg(long, default_value = "{}")]
        args: String,
    },
}

/// A server as the tools file's `[[mcp]]` table would name it.
#[derive(Debug, Args)]
struct Server {
    /// The streamable HTTP endpoint, e.g. http://127.0.0.1:7301/mcp.
    url: String,
    /// A header sent with every request, `Name: value` (repeatable; `${VAR}` reads the
    /// environment).
    #[arg(long = "header")]
    headers: Vec<String>,
    /// Per-request timeout in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    timeout_ms: u64,
    /// OAuth client credentials: the token endpoint (discovered from the server when absent).
    #[arg(long, requires_all = ["client_id", "client_secret"])]
    token_url: Option<String>,
    /// OAuth client credentials: the client id (with --client-secret).
    #[arg(long, requires = "client_secret")]
    client_id: Option<String>,
    /// May be `${VAR}`, read from the environment.
    #[arg(long)]
    client_secret: Option<String>,
}

impl Server {
    fn spec(&self) -> Result<McpServerSpec, String> {
        let mut headers = BTreeMap::new();
        for header in &self.headers {
            let (name, value) = header
                .split_once(':')
                .ok_or_else(|| format!("--header {header:?} is not `Name: value`"))?;
            headers.insert(name.trim().to_string(), value.trim().to_string());
        }
        let oauth = match (&self.client_id, &self.client_secret) {
            (Some(client_id), Some(client_secret)) => Some(OauthFile {
                token_url: self.token_url.clone(),
                client_id: client_id.clone(),
                client_secret: client_secret.clone(),
                scope: None,
            }),
            _ => None,
        };
        let file = McpServerFile {
            name: "probe".into(),
            url: self.url.clone(),
            headers,
            oauth,
            timeout_ms: self.timeout_ms,
            allow: None,
            deny: Vec::new(),
            side_effects: BTreeMap::new(),
            sandbox_url: None,
        };
        config::check(file, &|var| std::env::var(var).ok())
            .map_err(|(field, message)| format!("{field}: {message}"))
    }
}

pub fn run(args: McpArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("cairn mcp: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(act(args.action)) {
        Ok(value) => {
            println!("{value:#}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("cairn mcp: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn act(action: McpAction) -> Result<Value, String> {
    let hub = McpHub::default();
    match action {
        McpAction::Tools(server) => {
            let spec = server.spec()?;
            let listing = hub.list(&spec).await.map_err(|e| e.to_string())?;
            let mut tools = Vec::new();
            let mut skipped = Vec::new();
            for tool in &listing.tools {
                match map::spec(&spec, tool) {
                    Ok(registered) => tools.push(json!({
                        "name": tool.name, "side_effects": registered.side_effects,
                        "idempotent": registered.idempotent,
                        "description": registered.description,
                        "artifacts": registered.artifacts,
                        "args_schema": registered.args_schema,
                    })),
                    Err(why) => skipped.push(format!("{}: {why}", tool.name)),
                }
            }
            Ok(json!({"protocol": listing.protocol, "tools": tools, "skipped": skipped}))
        }
        McpAction::Call { server, tool, args } => {
            let spec = server.spec()?;
            let args: Value = serde_json::from_str(&args)
                .map_err(|error| format!("--args is not JSON: {error}"))?;
            if !args.is_object() {
                return Err("--args must be a JSON object".into());
            }
            let result = hub
                .call(McpCall {
                    server: &spec,
                    url: &spec.url,
                    tool: &tool,
                    args: &args,
                    traceparent: None,
                })
                .await
                .map_err(|e| e.to_string())?;
            let answered = map::answer(result, &[]);
            Ok(json!({"output": answered.output, "error": answered.error}))
        }
    }
}
