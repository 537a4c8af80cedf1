//! No Docker engine runs where the tests run, so the Dockerfile and docker-compose.yml are kept
//! correct by reading them: these tests parse both and check what `docker build` and
//! `docker compose up` rely on.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use std::collections::HashSet;
use std::path::Path;

const INSTRUCTIONS: &[&str] = &[
    "FROM",
    "RUN",
    "CMD",
    "LABEL",
    "EXPOSE",
    "ENV",
    "ADD",
    "COPY",
    "ENTRYPOINT",
    "VOLUME",
    "USER",
    "WORKDIR",
    "ARG",
    "ONBUILD",
    "STOPSIGNAL",
    "HEALTHCHECK",
    "SHELL",
];

/// Joins continuation lines and drops comments: one entry per instruction.
fn dockerfile_instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if pending.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        if let Some(head) = trimmed.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(trimmed);
        let (keyword, rest) = pending
            .split_once(char::is_whitespace)
            .unwrap_or((&pending, ""));
        out.push((keyword.to_ascii_uppercase(), rest.trim().to_string()));
        pending.clear();
    }
    assert!(
        pending.is_empty(),
        "Dockerfile ends inside a continuation line"
    );
    out
}

#[test]
fn dockerfile_is_a_valid_multi_stage_build() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("Dockerfile")).expect("Dockerfile exists");
    let instructions = dockerfile_instructions(&text);
    let mut stages: Vec<String> = Vec::new();
    let mut exposed = Vec::new();
    let mut final_entry = String::new();
    for (keyword, args) in &instructions {
        assert!(
            INSTRUCTIONS.contains(&keyword.as_str()),
            "unknown instruction {keyword}"
        );
        match keyword.as_str() {
            "FROM" => {
                let parts: Vec<&str> = args.split_whitespace().collect();
                assert!(
                    parts.len() == 3 && parts[1].eq_ignore_ascii_case("AS"),
                    "every stage is named: FROM {args}"
                );
                stages.push(parts[2].to_string());
                final_entry.clear();
            }
            "COPY" => {
                let parts: Vec<&str> = args.split_whitespace().collect();
                assert!(
                    parts.len() >= 2,
                    "COPY needs a source and a destination: {args}"
                );
                if let Some(stage) = parts[0].strip_prefix("--from=") {
                    assert!(
                        stages[..stages.len() - 1].iter().any(|s| s == stage),
                        "COPY --from={stage} names no earlier stage"
                    );
                } else {
                    for source in &parts[..parts.len() - 1] {
                        assert!(
                            root.join(source).exists(),
                            "COPY source {source} is missing from the repository"
                        );
                    }
                }
            }
            "EXPOSE" => exposed.push(args.clone()),
            "ENTRYPOINT" | "CMD" => {
                let parsed: Vec<String> = serde_json::from_str(args)
                    .unwrap_or_else(|e| panic!("{keyword} uses the JSON (exec) form: {e}"));
                final_entry.push_str(&parsed.join(" "));
                final_entry.push(' ');
            }
            _ => {}
        }
    }
    assert!(
        stages.len() >= 2,
        "multi-stage: a build stage and a runtime stage"
    );
    let unique: HashSet<&String> = stages.iter().collect();
    assert_eq!(unique.len(), stages.len(), "stage names are unique");
    assert!(
        text.contains("cargo build --release --locked"),
        "builds the locked release binary"
    );
    assert!(
        final_entry.contains("cairn serve"),
        "the image runs `cairn serve`: {final_entry}"
    );
    assert_eq!(exposed, vec!["8080".to_string()]);
    assert!(
        std::fs::read_to_string(root.join(".dockerignore"))
            .expect(".dockerignore exists")
            .lines()
            .any(|l| l.trim() == "target"),
        ".dockerignore keeps target/ out of the build context"
    );
}

#[test]
fn compose_runs_cairn_on_postgres_with_health_checks() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text =
        std::fs::read_to_string(root.join("docker-compose.yml")).expect("docker-compose.yml");
    let doc: serde_yaml::Value = serde_yaml::from_str(&text).expect("docker-compose.yml is YAML");
    let services = doc.get("services").expect("services");
    let postgres = services.get("postgres").expect("a postgres service");
    let cairn = services.get("cairn").expect("a cairn service");

    assert!(
        postgres["image"]
            .as_str()
            .is_some_and(|i| i.starts_with("postgres:")),
        "postgres runs the official image"
    );
    assert!(
        postgres.get("healthcheck").is_some(),
        "postgres has a health check"
    );
    let env = &postgres["environment"];
    let (user, password, db) = (
        env["POSTGRES_USER"].as_str().expect("POSTGRES_USER"),
        env["POSTGRES_PASSWORD"]
            .as_str()
            .expect("POSTGRES_PASSWORD"),
        env["POSTGRES_DB"].as_str().expect("POSTGRES_DB"),
    );

    assert_eq!(
        cairn["build"].as_str(),
        Some("."),
        "cairn is built from this Dockerfile"
    );
    let url = cairn["environment"]["CAIRN_DATABASE_URL"]
        .as_str()
        .expect("cairn is configured for Postgres");
    assert_eq!(
        url,
        format!("postgres://{user}:{password}@postgres:5432/{db}")
    );
    assert_eq!(
        cairn["environment"]["CAIRN_LISTEN_ADDR"].as_str(),
        Some("0.0.0.0:8080"),
        "listens on all interfaces inside the container"
    );
    assert_eq!(
        cairn["depends_on"]["postgres"]["condition"].as_str(),
        Some("service_healthy"),
        "cairn starts once Postgres is healthy"
    );
    let check: Vec<&str> = cairn["healthcheck"]["test"]
        .as_sequence()
        .expect("cairn has a health check")
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert!(
        check.iter().any(|part| part.ends_with("/readyz")),
        "{check:?}"
    );
    let ports: Vec<&str> = cairn["ports"]
        .as_sequence()
        .expect("ports")
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(ports, vec!["8080:8080"]);
}
