//! The `cairn` command line: a thin shell over the library.
//!
//! Configuration and start-up errors are printed as one clear line and end the process with a
//! non-zero status; nothing here panics on user input.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use cairn::config::{Config, LogFormat};
use cairn::store::keys::{self, ApiKey};

mod client;
mod eval;
mod mcp;
mod otel;

/// jemalloc, whose background threads (switched on first thing in `main`) return freed memory
/// to the system within about ten seconds: after 2,000 event streams closed, glibc's malloc kept
/// the ~35 MiB they had used, and the process never shrank.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Debug, Parser)]
#[command(
    name = "cairn",
    version,
    about = "A durable planning service for LLM agents"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the HTTP API, the worker pool and the reaper until SIGINT/SIGTERM.
    Serve {
        /// TOML config file (also `CAIRN_CONFIG`); `CAIRN_*` variables override it.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Apply database migrations and exit.
    Migrate {
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Print the OpenAPI document (what `openapi/openapi.json` holds).
    Openapi,
    /// Create, list and revoke API keys (in the configured store).
    Keys {
        #[arg(long)]
        config: Option<PathBuf>,
        #[command(subcommand)]
        action: KeysAction,
    },
    /// Serve a simulated OpenAI-compatible model and tools from a scenario file (loopback only;
    /// everything it answers is labelled simulated). See docs/scenarios.md.
    Sim {
        /// Scenario file (.json or .toml), e.g. scenarios/worked_example.json.
        #[arg(long)]
        scenario: PathBuf,
        /// Port on 127.0.0.1 (0 picks a free one).
        #[arg(long, default_value_t = 8090)]
        port: u16,
    },
    /// Run a task suite through several strategies against the simulated world and write
    /// report.md, report.json and chart.svg (see docs/evaluation.md).
    ///
    /// `cairn eval calls OUT --task ID` prints one run of a live evaluation call by call.
    Eval(eval::EvalCommand),
    /// Submit a goal to a running server (`CAIRN_URL`); with --follow, show its progress until
    /// it ends. See docs/cli.md.
    Submit(client::SubmitArgs),
    /// List, show, follow, cancel and steer a server's tasks.
    Tasks(client::TasksArgs),
    /// List the tools a server has registered.
    Tools(client::ToolsArgs),
    /// Show what a waiting task asks a person to sign off, and decide it.
    Approve(client::ApproveArgs),
    /// Look at an MCP tool server as `cairn serve` would: its tools, or one call's answer.
    Mcp(mcp::McpArgs),
}

#[derive(Debug, Subcommand)]
enum KeysAction {
    /// Create a key and print it once, alone on stdout (only its hash is stored).
    Create {
        /// The tenant the key acts for: 1-64 letters, digits, '.', '_' or '-'.
        #[arg(long)]
        tenant: String,
        /// Comma-separated: read, submit, admin, approve.
        #[arg(long)]
        scopes: String,
        /// A label to recognise the key by in `cairn keys list`.
        #[arg(long)]
        name: Option<String>,
        /// Only when the store holds no key yet (a first-start bootstrap step); otherwise
        /// print nothing and succeed.
        #[arg(long)]
        if_no_keys: bool,
    },
    /// List keys: id, tenant, scopes, name, created, revoked (never a secret).
    List,
    /// Revoke a key by id; requests with it are refused from then on.
    Revoke { id: String },
}

fn main() -> ExitCode {
    // See ALLOCATOR. Without background threads the memory is still reused, only kept.
    let _ = tikv_jemalloc_ctl::background_thread::write(true);
    let cli = Cli::parse();
    match cli.command {
        Command::Openapi => {
            print!("{}", cairn::http::openapi_json());
            ExitCode::SUCCESS
        }
        Command::Serve { config } => run(config, |config| async move {
            // Installed before start-up, so an early SIGTERM still shuts down cleanly.
            let shutdown = cairn::server::shutdown_signal();
            cairn::server::serve(config, shutdown).await
        }),
        Command::Eval(command) => eval::run(command),
        Command::Migrate { config } => run(config, |config| async move {
            cairn::server::open_migrated(&config).await.map(|_| ())
        }),
        Command::Sim { scenario, port } => run_sim(scenario, port),
        Command::Keys { config, action } => run_keys(config, action),
        Command::Submit(args) => client::submit(args),
        Command::Tasks(args) => client::tasks(args),
        Command::Tools(args) => client::tools(args),
        Command::Approve(args) => client::approve(args),
        Command::Mcp(args) => mcp::run(args),
    }
}

/// `cairn sim`: needs no config or store, only the scenario.
fn run_sim(scenario: PathBuf, port: u16) -> ExitCode {
    let _traces = otel::init(LogFormat::Text, "info");
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("cairn: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let served = runtime.block_on(async {
        let shutdown = cairn::server::shutdown_signal();
        cairn::sim::run(&scenario, port, shutdown).await
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("cairn sim: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Loads the config, starts logging and the runtime, runs `body`, maps failure to exit code 1.
fn run<F, Fut, E>(file: Option<PathBuf>, body: F) -> ExitCode
where
    F: FnOnce(Config) -> Fut,
    Fut: std::future::Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    let config = match Config::from_process_env(file.as_deref()) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("cairn: configuration error: {error}");
            return ExitCode::from(2);
        }
    };
    let traces = otel::init(config.log_format, "info");
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("cairn: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let code = match runtime.block_on(body(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "cairn failed");
            eprintln!("cairn: {error}");
            ExitCode::FAILURE
        }
    };
    traces.shutdown();
    code
}

/// `cairn keys ...`: usage errors exit 2, store failures 1, each with one line on stderr.
fn run_keys(file: Option<PathBuf>, action: KeysAction) -> ExitCode {
    if let KeysAction::Create { tenant, scopes, .. } = &action {
        let checked = keys::validate_tenant(tenant).and_then(|()| keys::parse_scopes(scopes));
        if let Err(error) = checked {
            eprintln!("cairn keys: {error}");
            return ExitCode::from(2);
        }
    }
    run(file, |config| async move {
        // Not `open_migrated`: stdout carries only the new key, for `KEY=$(cairn keys create ..)`.
        let store = cairn::store::open(&config.store()).await?;
        store.migrate().await?;
        keys_action(store.as_ref(), &cairn::clock::SystemClock, action).await
    })
}

async fn keys_action(
    store: &dyn cairn::store::Store,
    clock: &dyn cairn::clock::Clock,
    action: KeysAction,
) -> anyhow::Result<()> {
    match action {
        KeysAction::Create {
            tenant,
            scopes,
            name,
            if_no_keys,
        } => {
            if if_no_keys && store.has_api_keys().await? {
                eprintln!("cairn keys: the store already holds a key; none created");
                return Ok(());
            }
            let generated = keys::generate_key(&tenant, keys::parse_scopes(&scopes)?, name)?;
            let key = store.create_api_key(generated.new, clock.now()).await?;
            println!("{}", generated.token.expose());
            eprintln!(
                "cairn keys: created key {} for tenant {} with scopes {}; it is shown only \
                 this once, store it now",
                key.id,
                key.tenant_id,
                keys::scopes_text(&key.scopes)
            );
        }
        KeysAction::List => {
            println!("ID\tTENANT\tSCOPES\tNAME\tCREATED\tREVOKED");
            for key in store.list_api_keys().await? {
                println!("{}", key_line(&key));
            }
        }
        KeysAction::Revoke { id } => match store.revoke_api_key(&id, clock.now()).await? {
            Some(key) => eprintln!("cairn keys: key {} revoked", key.id),
            None => anyhow::bail!("no key with id {id:?} (see `cairn keys list`)"),
        },
    }
    Ok(())
}

fn key_line(key: &ApiKey) -> String {
    let time =
        |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    format!(
        "{}\t{}\t{}\t{}\t{}\t{}",
        key.id,
        key.tenant_id,
        keys::scopes_text(&key.scopes),
        key.name.as_deref().unwrap_or("-"),
        time(key.created_at),
        key.revoked_at.map_or_else(|| "-".to_string(), time)
    )
}
