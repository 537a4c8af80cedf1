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

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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
}

impl Frames {
    fn feed(&mut self, mut data: &[u8], counts: &Counts) {
        while !data.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(data.len());
                self.skip -= n;
                data = &data[n..];
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
            }
            self.started = true;
            self.skip = (len as usize).saturating_sub(4);
            self.header.clear();
        }
    }
}
