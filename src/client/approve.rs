//! `cairn approve TASK`: shows what a waiting task asks a person to sign off (the exact calls,
//! or the plan's new and changed milestones) and sends the decision, bound to the digest of
//! what was shown: if the task asked for something else meanwhile, the server refuses it.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use clap::Args;
use serde_json::{Value, json};

use super::api::{Api, ClientError};
use super::render::say;
use super::{Connection, EXIT_SUCCEEDED, EXIT_USAGE, connect, print, report, with_api};

#[derive(Debug, Args)]
pub struct ApproveArgs {
    #[command(flatten)]
    pub connection: Connection,
    /// The waiting task's id.
    pub task: String,
    /// Approve without asking.
    #[arg(long, conflicts_with_all = ["reject", "revise"])]
    pub yes: bool,
    /// Reject, with this reason: a call is refused and its milestone repaired; a plan ends the
    /// task.
    #[arg(long, value_name = "REASON", conflicts_with = "revise")]
    pub reject: Option<String>,
    /// Send the plan back with this change for the planner.
    #[arg(long, value_name = "CHANGE")]
    pub revise: Option<String>,
    /// Print the request (and the decision) as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `cairn approve`.
pub fn approve(args: ApproveArgs) -> ExitCode {
    with_api(connect(&args.connection), move |api| async move {
        decide(&api, &args).await.unwrap_or_else(|e| report(&e))
    })
}

async fn decide(api: &Api, args: &ApproveArgs) -> Result<u8, ClientError> {
    let list = api.approvals(&args.task).await?;
    let pending = list["items"]
        .as_array()
        .and_then(|items| items.iter().rev().find(|a| a["state"] == "pending"))
        .cloned();
    let Some(pending) = pending else {
        say(&format!("task {} waits for no approval", args.task));
        return Ok(EXIT_SUCCEEDED);
    };
    if args.json {
        print::json(&pending);
    } else {
        show(&pending);
    }
    let decision = match chosen(args) {
        Some(decision) => decision,
        None if std::io::stdin().is_terminal() => match ask(&pending) {
            Some(decision) => decision,
            None => {
                say("nothing decided");
                return Ok(EXIT_SUCCEEDED);
            }
        },
        None => {
            eprintln!(
                "cairn: not at a terminal: decide with --yes, --reject REASON or --revise CHANGE"
            );
            return Ok(EXIT_USAGE);
        }
    };
    let id = pending["id"].as_u64().unwrap_or(0);
    let mut body = json!({"decision": decision.0, "digest": pending["digest"]});
    if let Some(comment) = decision.1 {
        body["comment"] = json!(comment);
    }
    let decided = api.decide(&args.task, id, &body).await?;
    if args.json {
        print::json(&decided);
    } else {
        say(&format!(
            "approval {id} of task {} {}; the task goes on",
            args.task,
            decided["state"].as_str().unwrap_or("decided")
        ));
    }
    Ok(EXIT_SUCCEEDED)
}

/// The decision the flags give, if any.
fn chosen(args: &ApproveArgs) -> Option<(&'static str, Option<String>)> {
    if args.yes {
        return Some(("approve", None));
    }
    if let Some(reason) = &args.reject {
        return Some(("reject", Some(reason.clone())));
    }
    args.revise
        .as_ref()
        .map(|change| ("revise", Some(change.clone())))
}

/// What the request asks, in lines a person reads.
fn show(pending: &Value) {
    let request = &pending["request"];
    match pending["kind"].as_str() {
        Some("plan") => {
            let since = match request["approved_version"].as_i64() {
                Some(v) => format!(" (changed since approved version {v})"),
                None => String::new(),
            };
            say(&format!(
                "plan version {} asks for sign-off{since}:",
                request["plan_version"]
            ));
            for m in request["milestones"].as_array().into_iter().flatten() {
                say(&format!(
                    "  {}: {}  tools {}  check {}",
                    m["id"].as_str().unwrap_or("?"),
                    m["title"].as_str().unwrap_or(""),
                    m["tools"],
                    m["accept"]
                ));
            }
        }
        _ => {
            say("these calls ask for sign-off:");
            for c in request["calls"].as_array().into_iter().flatten() {
                say(&format!(
                    "  {} {}",
                    c["tool"].as_str().unwrap_or("?"),
                    c["args"]
                ));
            }
        }
    }
    say(&format!(
        "digest {}",
        pending["digest"].as_str().unwrap_or("")
    ));
}

/// Asks on the terminal; `None` decides nothing.
fn ask(pending: &Value) -> Option<(&'static str, Option<String>)> {
    let plan = pending["kind"] == "plan";
    let choices = if plan {
        "[a]pprove, [r]eject, re[v]ise, or nothing"
    } else {
        "[a]pprove, [r]eject, or nothing"
    };
    let answer = prompt(&format!("{choices}? "))?;
    match answer.to_ascii_lowercase().as_str() {
        "a" | "approve" | "y" | "yes" => Some(("approve", None)),
        "r" | "reject" => Some(("reject", prompt("why? ").filter(|s| !s.is_empty()))),
        "v" | "revise" if plan => {
            let change = prompt("what should change? ").filter(|s| !s.is_empty())?;
            Some(("revise", Some(change)))
        }
        _ => None,
    }
}

fn prompt(question: &str) -> Option<String> {
    print!("{question}");
    std::io::stdout().flush().ok()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).ok()?;
    Some(line.trim().to_string())
}
