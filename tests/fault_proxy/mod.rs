//! A TCP proxy a test controls, standing in for a database that restarts: `cut` drops every
//! connection and refuses new ones (the port is closed), `restore` listens again on the same
//! port. Everything in between is relayed byte for byte.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::watch;
use tokio::task::AbortHandle;

pub struct FaultProxy {
    addr: SocketAddr,
    up: watch::Sender<bool>,
    relays: Arc<Mutex<Vec<AbortHandle>>>,
}

impl FaultProxy {
    /// Starts relaying `127.0.0.1:<free port>` to `upstream`.
    pub async fn start(upstream: SocketAddr) -> FaultProxy {
        let listener = bind("127.0.0.1:0".parse().expect("addr"));
        let addr = listener.local_addr().expect("local addr");
        let (up, up_rx) = watch::channel(true);
        let relays = Arc::new(Mutex::new(Vec::new()));
        tokio::spawn(serve(listener, upstream, up_rx, relays.clone()));
        FaultProxy { addr, up, relays }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Drops every relayed connection and closes the port.
    pub fn cut(&self) {
        self.up.send_replace(false);
        for relay in self.relays.lock().expect("relays").drain(..) {
            relay.abort();
        }
    }

    /// Listens again on the same port.
    pub fn restore(&self) {
        self.up.send_replace(true);
    }
}

fn bind(addr: SocketAddr) -> TcpListener {
    let socket = TcpSocket::new_v4().expect("socket");
    socket.set_reuseaddr(true).expect("reuseaddr");
    socket.bind(addr).expect("bind the proxy port");
    socket.listen(128).expect("listen")
}

async fn serve(
    first: TcpListener,
    upstream: SocketAddr,
    mut up: watch::Receiver<bool>,
    relays: Arc<Mutex<Vec<AbortHandle>>>,
) {
    let addr = first.local_addr().expect("local addr");
    let mut listener = Some(first);
    loop {
        match listener.take() {
            Some(open) => {
                tokio::select! {
                    accepted = open.accept() => {
                        if let Ok((client, _)) = accepted
                            && *up.borrow()
                        {
                            let relay = tokio::spawn(relay(client, upstream));
                            relays.lock().expect("relays").push(relay.abort_handle());
                        }
                        listener = Some(open);
                    }
                    changed = up.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        if *up.borrow() {
                            listener = Some(open);
                        }
                        // Otherwise `open` is dropped here: the port refuses connections.
                    }
                }
            }
            None => {
                if up.wait_for(|up| *up).await.is_err() {
                    return;
                }
                listener = Some(bind(addr));
            }
        }
    }
}

async fn relay(mut client: TcpStream, upstream: SocketAddr) {
    if let Ok(mut server) = TcpStream::connect(upstream).await {
        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
    }
}
