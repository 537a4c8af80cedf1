//! The `cairn` command line: a thin shell over the library.
//!
//! Configuration and start-up errors are printed as one clear line and end the process with a
//! non-zero status; nothing here panics on user input.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use cairn::config::{Config, LogFormat};

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
    Eval {
        /// Suite directory (holding suite.toml) or file.
        #[arg(long)]
        suite: PathBuf,
        #[arg(long, default_value = "one_shot,reactive,v1,v2,auto")]
        strategies: String,
        #[arg(long, default_value_t = 1)]
        repeat: u32,
        #[arg(long)]
        out: PathBuf,
        /// Postgres URL; without it a fresh SQLite file under --out is used.
        #[arg(long)]
        database_url: Option<String>,
        #[arg(long, default_value_t = 8)]
        workers: usize,
    },
}

fn main() -> ExitCode {
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
        Command::Eval {
            suite,
            strategies,
            repeat,
            out,
            database_url,
            workers,
        } => eval(suite, &strategies, repeat, out, database_url, workers),
        Command::Migrate { config } => run(config, |config| async move {
            cairn::server::open_migrated(&config).await.map(|_| ())
        }),
        Command::Sim { scenario, port } => run_sim(scenario, port),
    }
}

/// `cairn sim`: needs no config or store, only the scenario.
fn run_sim(scenario: PathBuf, port: u16) -> ExitCode {
    init_tracing(LogFormat::Text, "info");
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

/// `cairn eval`: errors end the process with status 1 and one line.
fn eval(
    suite: PathBuf,
    strategies: &str,
    repeat: u32,
    out: PathBuf,
    database_url: Option<String>,
    workers: usize,
) -> ExitCode {
    init_tracing(LogFormat::Text, "warn");
    let result = (|| -> anyhow::Result<()> {
        let params = cairn::eval::runner::EvalParams {
            suite,
            strategies: cairn::eval::runner::parse_strategies(strategies)?,
            repeat,
            out,
            database_url,
            workers,
            progress: true,
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        runtime.block_on(cairn::wiring::eval::evaluate(&params))?;
        Ok(())
    })();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("cairn eval: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Loads the config, starts logging and the runtime, runs `body`, maps failure to exit code 1.
fn run<F, Fut>(file: Option<PathBuf>, body: F) -> ExitCode
where
    F: FnOnce(Config) -> Fut,
    Fut: std::future::Future<Output = Result<(), cairn::server::ServeError>>,
{
    let config = match Config::from_process_env(file.as_deref()) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("cairn: configuration error: {error}");
            return ExitCode::from(2);
        }
    };
    init_tracing(config.log_format, "info");
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
    match runtime.block_on(body(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "cairn failed");
            eprintln!("cairn: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Logs go to stderr (stdout carries the lines scripts parse); `RUST_LOG` sets the filter.
fn init_tracing(format: LogFormat, default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}
