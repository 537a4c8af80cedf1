//! Third-party MCP servers for the MCP tests, run with Node from `tests/mcp/node_modules`
//! (`scripts/install-mcp-servers.sh`): `server-everything` over streamable HTTP, and
//! `server-memory` (stdio) behind the operator's HTTP wrapper `tests/mcp/memory-http.mjs`,
//! which counts the calls it relays.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::process::{Child, Command};

/// Where the servers are installed.
pub fn mcp_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp")
}

/// A free port on 127.0.0.1 (bound, then released for the child to take).
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// A running Node MCP server; killed when dropped.
pub struct NodeServer {
    child: Child,
    pub port: u16,
}

impl NodeServer {
    /// `server-everything` over streamable HTTP on `port`, with `env` added to its environment.
    pub async fn everything(port: u16, env: &[(&str, &str)]) -> NodeServer {
        let script =
            mcp_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
        let mut command = Command::new("node");
        command.arg(script).arg("streamableHttp");
        Self::spawn(command, port, env).await
    }

    /// `server-memory` behind the HTTP wrapper, keeping its graph in `file`; `delay` holds
    /// one tool's calls that long before they are relayed.
    pub async fn memory(
        port: u16,
        file: &std::path::Path,
        delay: Option<(&str, u64)>,
    ) -> NodeServer {
        let mut command = Command::new("node");
        command
            .arg(mcp_dir().join("memory-http.mjs"))
            .env("MEMORY_FILE_PATH", file);
        if let Some((tool, ms)) = delay {
            command
                .env("DELAY_TOOL", tool)
                .env("DELAY_MS", ms.to_string());
        }
        Self::spawn(command, port, &[]).await
    }

    async fn spawn(mut command: Command, port: u16, env: &[(&str, &str)]) -> NodeServer {
        assert!(
            mcp_dir().join("node_modules").is_dir(),
            "the MCP test servers are not installed: run scripts/install-mcp-servers.sh"
        );
        command
            .current_dir(mcp_dir())
            .env("PORT", port.to_string())
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let child = command.spawn().expect("start node");
        let deadline = Instant::now() + Duration::from_secs(30);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(
                Instant::now() < deadline,
                "MCP server on {port} did not start"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        NodeServer { child, port }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// SIGKILL, and wait until the port is free.
    pub async fn kill(mut self) {
        self.stop().await;
    }

    /// [`NodeServer::kill`] in place.
    pub async fn stop(&mut self) {
        self.child.kill().await.expect("kill node");
        let deadline = Instant::now() + Duration::from_secs(10);
        while tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .is_ok()
        {
            assert!(Instant::now() < deadline, "port {} still open", self.port);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The memory wrapper's counts: `{"relayed": {tool: n}, "in_flight": {tool: n}}`.
    pub async fn calls(&self) -> Value {
        reqwest::get(format!("http://127.0.0.1:{}/calls", self.port))
            .await
            .expect("GET /calls")
            .json()
            .await
            .expect("counts")
    }

    /// Waits until `tool` has a call in flight at the wrapper.
    pub async fn wait_in_flight(&self, tool: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let calls = self.calls().await;
            if calls["in_flight"][tool].as_u64().unwrap_or(0) > 0 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no {tool} call in flight: {calls}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// How many `tool` calls the wrapper relayed to the server.
    pub async fn relayed(&self, tool: &str) -> u64 {
        self.calls().await["relayed"][tool].as_u64().unwrap_or(0)
    }
}
