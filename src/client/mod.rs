//! The command-line client: `cairn submit`, `cairn tasks ...` and `cairn tools` speak the REST
//! API of a running `cairn serve` (docs/cli.md), like any other client would.
//!
//! Exit codes: 0 succeeded, 1 failed, 2 usage error, 3 budget exhausted, 4 cancelled, 5 the
//! server was unreachable or answered with an error. Only a followed task's outcome gives 1, 3
//! or 4; a command that is answered exits 0.

mod api;
mod approve;
mod args;
mod follow;
mod live;
mod print;
mod render;
mod view;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use cairn::domain::task::Strategy;
use clap::{Args, Subcommand};
use serde_json::json;

use api::{Api, ClientError};
pub use approve::{ApproveArgs, approve};
use args::{
    BudgetArg, ToolList, parse_approval, parse_budget, parse_status, parse_strategy, parse_tools,
};
use render::{say, text};
use view::View;

pub const EXIT_SUCCEEDED: u8 = 0;
pub const EXIT_FAILED: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_BUDGET_EXHAUSTED: u8 = 3;
pub const EXIT_CANCELLED: u8 = 4;
pub const EXIT_SERVER: u8 = 5;

/// Where the server is and the key to show it.
#[derive(Debug, Clone, Args)]
pub struct Connection {
    /// The server's base URL.
    #[arg(
        long,
        env = "CAIRN_URL",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    pub url: String,
    /// An API key, sent as `Authorization: Bearer`; not needed by a server in dev mode.
    #[arg(long, env = "CAIRN_API_KEY", hide_env_values = true, global = true)]
    pub api_key: Option<String>,
}

#[derive(Debug, Args)]
pub struct SubmitArgs {
    #[command(flatten)]
    pub connection: Connection,
    /// What the task must achieve, in words.
    pub goal: String,
    /// Any of tokens=N,tool_calls=N,wall_ms=N; a unit left out, or the whole budget, is the
    /// server's default.
    #[arg(long, value_parser = parse_budget)]
    pub budget: Option<BudgetArg>,
    /// auto (the gate decides), direct, v2, or the baselines one_shot, reactive, v1.
    #[arg(long, value_parser = parse_strategy)]
    pub strategy: Option<Strategy>,
    /// Registered tools the task may use, separated by commas (`cairn tools` lists them).
    #[arg(long, value_parser = parse_tools)]
    pub tools: Option<ToolList>,
    /// What a person signs off before it runs: plan or steps (`cairn approve` decides).
    #[arg(long, value_parser = parse_approval)]
    pub approval: Option<cairn::domain::approval::ApprovalMode>,
    /// Makes a retried submission answer the task the first one created.
    #[arg(long)]
    pub idempotency_key: Option<String>,
    /// Show the task's progress until it ends; the exit code then says how it ended.
    #[arg(long)]
    pub follow: bool,
    /// Print JSON: the task, or with --follow each event on its own line.
    #[arg(long)]
    pub json: bool,
    /// With --follow: how many seconds to keep reconnecting while the server is away.
    #[arg(long, default_value_t = 60)]
    pub reconnect_s: u64,
}

#[derive(Debug, Args)]
pub struct TasksArgs {
    #[command(flatten)]
    pub connection: Connection,
    #[command(subcommand)]
    pub action: TasksAction,
}

#[derive(Debug, Subcommand)]
pub enum TasksAction {
    /// List tasks, newest first.
    List {
        /// Only tasks in this status: queued, running, awaiting_approval, succeeded, failed,
        /// budget_exhausted, cancelled.
        #[arg(long, value_parser = parse_status)]
        status: Option<String>,
        /// At most this many (the server's page limit applies).
        #[arg(long)]
        limit: Option<u32>,
        #[arg(long)]
        json: bool,
    },
    /// Show one task: status, budget, plan version, and its result once it has ended.
    Show {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Print a task's events; with --follow, follow them until the task ends.
    Events {
        id: String,
        #[arg(long)]
        follow: bool,
        /// Each event as one line of JSON.
        #[arg(long)]
        json: bool,
        /// With --follow: how many seconds to keep reconnecting while the server is away.
        #[arg(long, default_value_t = 60)]
        reconnect_s: u64,
    },
    /// Cancel a queued or running task.
    Cancel {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Steer a queued or running task: the text is a constraint its plan must respect from
    /// now on (a plan that did not know it is replaced, keeping finished work).
    Steer {
        id: String,
        /// The constraint, in plain words.
        text: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct ToolsArgs {
    #[command(flatten)]
    pub connection: Connection,
    #[arg(long)]
    pub json: bool,
}

/// `cairn submit`.
pub fn submit(args: SubmitArgs) -> ExitCode {
    with_api(connect(&args.connection), move |api| async move {
        submit_task(&api, &args)
            .await
            .unwrap_or_else(|e| report(&e))
    })
}

/// `cairn tasks ...`.
pub fn tasks(args: TasksArgs) -> ExitCode {
    with_api(connect(&args.connection), move |api| async move {
        tasks_action(&api, args.action)
            .await
            .unwrap_or_else(|e| report(&e))
    })
}

/// `cairn tools`.
pub fn tools(args: ToolsArgs) -> ExitCode {
    with_api(connect(&args.connection), move |api| async move {
        match api.tools().await {
            Ok(list) if args.json => print::json(&list),
            Ok(list) => print::tools(&list),
            Err(error) => return report(&error),
        }
        EXIT_SUCCEEDED
    })
}

/// Runs `work` with the server's client, or exits with the code `connect` chose.
fn with_api<F, Fut>(api: Result<Api, u8>, work: F) -> ExitCode
where
    F: FnOnce(Api) -> Fut,
    Fut: std::future::Future<Output = u8>,
{
    match api {
        Ok(api) => block_on(work(api)),
        Err(code) => ExitCode::from(code),
    }
}

fn block_on(work: impl std::future::Future<Output = u8>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("cairn: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    ExitCode::from(runtime.block_on(work))
}

fn connect(connection: &Connection) -> Result<Api, u8> {
    let url = connection.url.trim();
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        eprintln!(
            "cairn: the server URL (--url or CAIRN_URL) must start with http:// or https://, \
             got {url:?}"
        );
        return Err(EXIT_USAGE);
    }
    Api::new(url, connection.api_key.clone()).map_err(|e| report(&e))
}

/// Prints the error in words on stderr and answers exit code 5.
fn report(error: &ClientError) -> u8 {
    eprintln!("cairn: {error}");
    if let ClientError::Problem { errors, .. } = error
        && errors.len() > 1
    {
        for item in errors {
            eprintln!("  - {item}");
        }
    }
    EXIT_SERVER
}

async fn submit_task(api: &Api, args: &SubmitArgs) -> Result<u8, ClientError> {
    let mut body = json!({ "goal": args.goal });
    if let Some(object) = body.as_object_mut() {
        if let Some(budget) = args.budget {
            object.insert("budget".to_string(), budget.to_json());
        }
        if let Some(strategy) = args.strategy {
            object.insert("strategy".to_string(), json!(strategy.as_str()));
        }
        if let Some(tools) = &args.tools {
            object.insert("tools".to_string(), json!(tools.0));
        }
        if let Some(approval) = args.approval {
            object.insert("approval".to_string(), json!(approval));
        }
    }
    let task = api.submit(&body, args.idempotency_key.as_deref()).await?;
    let id = text(&task, "id");
    match (args.follow, args.json) {
        (false, true) => print::json(&task),
        (false, false) => say(&id),
        (true, true) => {}
        (true, false) => say(&format!("task {id}")),
    }
    if !args.follow {
        return Ok(EXIT_SUCCEEDED);
    }
    follow_to_end(api, &id, args.json, args.reconnect_s).await
}

async fn tasks_action(api: &Api, action: TasksAction) -> Result<u8, ClientError> {
    match action {
        TasksAction::List {
            status,
            limit,
            json,
        } => {
            let page = api.list(status.as_deref(), limit).await?;
            if json {
                print::json(&page);
            } else {
                print::task_page(&page);
            }
        }
        TasksAction::Show { id, json } => {
            let task = api.task(&id).await?;
            if json {
                print::json(&task);
            } else {
                print::task(&task);
            }
        }
        TasksAction::Events {
            id,
            follow: keep_following,
            json,
            reconnect_s,
        } => {
            if keep_following {
                return follow_to_end(api, &id, json, reconnect_s).await;
            }
            let mut view = View::new(&id, json, false);
            follow::replay(api, &id, &mut view).await?;
        }
        TasksAction::Cancel { id, json } => {
            let task = api.cancel(&id).await?;
            if json {
                print::json(&task);
            } else {
                say(&format!(
                    "task {} {}",
                    text(&task, "id"),
                    text(&task, "status")
                ));
            }
        }
        TasksAction::Steer {
            id,
            text: said,
            json,
        } => {
            let message = api.steer(&id, &said).await?;
            if json {
                print::json(&message);
            } else {
                say(&format!(
                    "message {} sent to task {id}; the task takes it at its next step",
                    message["seq"]
                ));
            }
        }
    }
    Ok(EXIT_SUCCEEDED)
}

async fn follow_to_end(
    api: &Api,
    id: &str,
    json: bool,
    reconnect_s: u64,
) -> Result<u8, ClientError> {
    let mut view = View::new(id, json, std::io::stdout().is_terminal());
    let status = follow::follow(api, id, Duration::from_secs(reconnect_s), &mut view).await?;
    Ok(exit_for(&status))
}

/// The exit code of a task's final status.
fn exit_for(status: &str) -> u8 {
    match status {
        "succeeded" => EXIT_SUCCEEDED,
        "failed" => EXIT_FAILED,
        "budget_exhausted" => EXIT_BUDGET_EXHAUSTED,
        "cancelled" => EXIT_CANCELLED,
        _ => EXIT_SERVER,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_final_status_has_its_exit_code() {
        assert_eq!(exit_for("succeeded"), 0);
        assert_eq!(exit_for("failed"), 1);
        assert_eq!(exit_for("budget_exhausted"), 3);
        assert_eq!(exit_for("cancelled"), 4);
        assert_eq!(exit_for("running"), 5);
    }
}
