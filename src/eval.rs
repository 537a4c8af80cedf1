//! `cairn eval`: a suite through several strategies (the flags), or `cairn eval calls`, one
//! stored run of a live evaluation read back call by call.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use cairn::config::LogFormat;
use cairn::domain::task::Strategy;
use cairn_eval::calls::read::Query;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct EvalCommand {
    #[command(subcommand)]
    action: Option<EvalAction>,
    /// Suite directory (holding suite.toml) or file.
    #[arg(long, required = true)]
    suite: Option<PathBuf>,
    #[arg(long, default_value = "one_shot,reactive,v1,v2,auto")]
    strategies: String,
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    #[arg(long, required = true)]
    out: Option<PathBuf>,
    /// Postgres URL; without it a fresh SQLite file under --out is used.
    #[arg(long)]
    database_url: Option<String>,
    /// Runs at a time (default 8; 1 with --live, since a local model serves one call at a
    /// time).
    #[arg(long)]
    workers: Option<usize>,
    /// Take the model answers from the configured endpoint (CAIRN_LLM_*, or --config)
    /// instead of the world's policy; tools and acceptance checks stay the world's.
    #[arg(long)]
    live: bool,
    /// Config file for --live (the same format as `cairn serve --config`).
    #[arg(long, requires = "live")]
    config: Option<PathBuf>,
    /// Wall-clock budget of each live run, in seconds.
    #[arg(long, default_value_t = 600, requires = "live")]
    run_wall_s: u64,
    /// With --live, only these calls go to the model (gate,strategic,tactical,verifier).
    #[arg(long, requires = "live")]
    live_purposes: Option<String>,
    /// Run the suite once per value of one world parameter, e.g.
    /// `guess_success=0.3,0.5,0.7`, and chart verified success per strategy against it
    /// (sweep.md, sweep.json, sweep.svg under --out).
    #[arg(long)]
    sweep: Option<cairn_eval::sweep::Sweep>,
    /// The model the simulated world plays: `suite` (the suite's slip rates: for the default
    /// suites, fitted to a small real model) or `competent` (no slips).
    #[arg(long, default_value = "suite")]
    profile: cairn_eval::suite::Profile,
    /// Keep the runs already recorded in --out (runs.jsonl) and run only the rest of the
    /// matrix, then report on all of them; refused when the suite, model or prompts
    /// differ from those the recorded runs used.
    #[arg(long)]
    resume: bool,
    /// Run at most this many of the runs still owed, then report (with --resume, a long
    /// live evaluation in bounded sittings; 0 only writes the report).
    #[arg(long)]
    max_runs: Option<usize>,
    /// Only these tasks of the suite, comma-separated ids (default: every task).
    #[arg(long, value_delimiter = ',')]
    tasks: Option<Vec<String>>,
}

#[derive(Debug, Subcommand)]
enum EvalAction {
    /// Print one run of a live evaluation call by call, from OUT/calls.jsonl (or .gz).
    ///
    /// Per call: what it was, what it cost and its verdict, then its input, turns and answer.
    Calls {
        /// The live evaluation's --out folder, or a calls.jsonl(.gz) file.
        out: PathBuf,
        /// The suite task whose run to print.
        #[arg(long)]
        task: String,
        /// The run's strategy (one_shot, reactive, v1, v2, auto), when the task has several.
        #[arg(long, value_parser = parse_strategy)]
        strategy: Option<Strategy>,
        /// The run's repeat (0-based), when the task has several.
        #[arg(long)]
        repeat: Option<u32>,
        /// Also print each call's prompt text, whole input, turns and answer schema.
        #[arg(long)]
        full: bool,
    },
}

fn parse_strategy(text: &str) -> Result<Strategy, String> {
    Strategy::parse(text).ok_or_else(|| {
        let known: Vec<&str> = Strategy::ALL.iter().map(|s| s.as_str()).collect();
        format!("unknown strategy {text:?} (use {})", known.join(", "))
    })
}

/// `cairn eval ...`: errors end the process with status 1 and one line.
pub fn run(command: EvalCommand) -> ExitCode {
    let Some(EvalAction::Calls {
        out,
        task,
        strategy,
        repeat,
        full,
    }) = command.action
    else {
        return evaluate(command);
    };
    let query = Query {
        task,
        strategy,
        repeat,
    };
    match cairn_eval::calls::show_run(&out, &query, full) {
        // A reader that stops early (`| head`) closes the pipe: not an error.
        Ok(text) => match std::io::stdout().lock().write_all(text.as_bytes()) {
            Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => {
                eprintln!("cairn eval calls: cannot write to stdout: {error}");
                ExitCode::FAILURE
            }
            _ => ExitCode::SUCCESS,
        },
        Err(error) => {
            eprintln!("cairn eval calls: {error}");
            ExitCode::FAILURE
        }
    }
}

/// `cairn eval --suite .. --out ..`: the matrix, the reports, the summary.
fn evaluate(args: EvalCommand) -> ExitCode {
    let _traces = super::otel::init(LogFormat::Text, "warn");
    let result = (|| -> anyhow::Result<()> {
        let (Some(suite), Some(out)) = (args.suite, args.out) else {
            anyhow::bail!("--suite and --out are required");
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        // The model client is built inside the runtime (its HTTP client needs one).
        let live = match args.live {
            true => {
                let _guard = runtime.enter();
                let mut live = cairn_eval::compose::live_model(
                    args.config.as_deref(),
                    args.run_wall_s.saturating_mul(1000),
                )?;
                live.live_for = args
                    .live_purposes
                    .as_deref()
                    .map(cairn_eval::routed::parse_purposes)
                    .transpose()?;
                Some(live)
            }
            false => None,
        };
        let default_workers = if live.is_some() { 1 } else { 8 };
        let params = cairn_eval::runner::EvalParams {
            suite,
            strategies: cairn_eval::runner::parse_strategies(&args.strategies)?,
            repeat: args.repeat,
            out,
            database_url: args.database_url,
            workers: args.workers.unwrap_or(default_workers),
            progress: true,
            live,
            overrides: Vec::new(),
            profile: args.profile,
            resume: args.resume,
            max_runs: args.max_runs,
            tasks: args.tasks,
        };
        match &args.sweep {
            Some(sweep) => {
                runtime.block_on(cairn_eval::compose::sweep(&params, sweep))?;
            }
            None => {
                runtime.block_on(cairn_eval::compose::evaluate(&params))?;
            }
        }
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
