//! A counting TCP relay between cairn and Postgres: it forwards every byte unchanged and reads
//! the frontend's messages (the protocol's type byte + length framing) to count what cairn
//! asks of the database. `Sync` and simple `Query` messages each end with the server's
//! `ReadyForQuery`, so their sum is the number of round trips; `Bind` + `Query` is the number
//! of statements executed. A ping (sqlx tests a connection on return with a bare `Sync`) is a
//! round trip without a statement.
//!
//! The relay adds a hop of its own, so a run through it counts and is not timed: the
//! orchestration bench uses it only with `WIRE=1`. Connect with `sslmode=disable` (a TLS
//! request would hide the messages).

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Frontend messages seen so far, over every relayed connection.
#[derive(Debug, Default)]
pub struct Counts {
    syncs: AtomicU64,
    queries: AtomicU64,
    binds: AtomicU64,
    parses: AtomicU64,
    connections: AtomicU64,
    /// Statements executed, by the start of their text.
    by_statement: Mutex<BTreeMap<String, u64>>,
}

/// A snapshot of [`Counts`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Tally {
    pub round_trips: u64,
    pub statements: u64,
    pub parses: u64,
    pub pings_or_empty: u64,
    pub connections: u64,
}

impl Counts {
    pub fn tally(&self) -> Tally {
        let syncs = self.syncs.load(Ordering::Relaxed);
        let queries = self.queries.load(Ordering::Relaxed);
        let binds = self.binds.load(Ordering::Relaxed);
        Tally {
            round_trips: syncs + queries,
            statements: binds + queries,
            parses: self.parses.load(Ordering::Relaxed),
            // A Sync that closes no Bind: a ping, or the describe step of a new statement.
            pings_or_empty: syncs.saturating_sub(binds),
            connections: self.connections.load(Ordering::Relaxed),
        }
    }

    /// Statements executed so far, by the start of their text.
    pub fn statements(&self) -> BTreeMap<String, u64> {
        self.by_statement.lock().expect("counts").clone()
    }

    fn executed(&self, label: &str) {
        *self
            .by_statement
            .lock()
            .expect("counts")
            .entry(label.to_string())
            .or_default() += 1;
    }

    fn count(&self, kind: u8) {
        let counter = match kind {
            b'S' => &self.syncs,
            b'Q' => &self.queries,
            b'B' => &self.binds,
            b'P' => &self.parses,
            _ => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

pub struct WireCounter {
    pub addr: SocketAddr,
    pub counts: Arc<Counts>,
}

impl WireCounter {
    /// Relays `127.0.0.1:<free port>` to `upstream`.
    pub async fn start(upstream: SocketAddr) -> WireCounter {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind relay");
        let addr = listener.local_addr().expect("relay addr");
        let counts = Arc::new(Counts::default());
        let shared = counts.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                shared.connections.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(relay(client, upstream, shared.clone()));
            }
        });
        WireCounter { addr, counts }
    }
}

async fn relay(client: TcpStream, upstream: SocketAddr, counts: Arc<Counts>) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_rx, mut client_tx) = client.into_split();
    let (mut server_rx, mut server_tx) = server.into_split();
    let down = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut server_rx, &mut client_tx).await;
    });
    let mut frames = Frames::default();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match client_rx.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        frames.feed(&buf[..n], &counts);
        if server_tx.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    down.abort();
}

/// Incremental framing of the frontend stream: the untyped startup message, then messages
/// of one type byte and a big-endian length that counts itself but not the type byte.
#[derive(Default)]
struct Frames {
    started: bool,
    header: Vec<u8>,
    skip: usize,
    /// The message whose body is being read (`P`, `B`, `Q`), and the body so far.
    reading: Option<u8>,
    body: Vec<u8>,
    /// This connection's prepared statements: name -> label.
    prepared: HashMap<String, String>,
}

/// The first words of a statement, whitespace collapsed: enough to tell them apart.
fn label(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut label = words.join(" ");
    label.truncate(60);
    label
}

/// The NUL-terminated strings at the start of a message body.
fn cstrings(body: &[u8], n: usize) -> Vec<String> {
    body.split(|b| *b == 0)
        .take(n)
        .map(|part| String::from_utf8_lossy(part).into_owned())
        .collect()
}

impl Frames {
    fn feed(&mut self, mut data: &[u8], counts: &Counts) {
        while !data.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(data.len());
                if self.reading.is_some() {
                    self.body.extend_from_slice(&data[..n]);
                }
                self.skip -= n;
                data = &data[n..];
                if self.skip == 0 {
                    self.finish(counts);
                }
                continue;
            }
            let need = if self.started { 5 } else { 4 };
            let n = (need - self.header.len()).min(data.len());
            self.header.extend_from_slice(&data[..n]);
            data = &data[n..];
            if self.header.len() < need {
                continue;
            }
            let len_at = need - 4;
            let len = u32::from_be_bytes(self.header[len_at..need].try_into().expect("4 bytes"));
            if self.started {
                counts.count(self.header[0]);
                if matches!(self.header[0], b'P' | b'B' | b'Q') {
                    self.reading = Some(self.header[0]);
                }
            }
            self.started = true;
            self.skip = (len as usize).saturating_sub(4);
            self.header.clear();
            if self.skip == 0 {
                self.finish(counts);
            }
        }
    }

    /// A whole `P`, `B` or `Q` body was read: remember or count its statement.
    fn finish(&mut self, counts: &Counts) {
        let body = std::mem::take(&mut self.body);
        match self.reading.take() {
            Some(b'P') => {
                let parts = cstrings(&body, 2);
                if let [name, text] = parts.as_slice() {
                    self.prepared.insert(name.clone(), label(text));
                }
            }
            Some(b'B') => {
                let parts = cstrings(&body, 2);
                if let Some(name) = parts.get(1) {
                    let label = self
                        .prepared
                        .get(name)
                        .cloned()
                        .unwrap_or_else(|| format!("(statement {name})"));
                    counts.executed(&label);
                }
            }
            Some(_) => counts.executed(&label(&String::from_utf8_lossy(&body))),
            None => {}
        }
    }
}
