//! A TCP front for the API under test that loses connections and answers 503 on demand, as the
//! network and an overloaded API would between a pipeline and Countersign.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the front does to a new connection.
#[derive(Debug, Clone, Copy)]
pub enum Fault {
    /// Reads the request and closes the connection unanswered.
    Drop,
    /// Answers 503 with a problem, as an overloaded API would.
    Unavailable,
    /// Forwards the request, then closes the connection as the answer begins: the request took
    /// effect, its answer is lost.
    LoseAnswer,
}

/// A TCP front for the API that relays connections, except new ones it was told to fault.
pub struct FlakyFront {
    pub base: String,
    faults: Arc<Mutex<VecDeque<Fault>>>,
    relays: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl FlakyFront {
    pub async fn start(upstream: &str) -> Self {
        let upstream = upstream.trim_start_matches("http://").to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let faults: Arc<Mutex<VecDeque<Fault>>> = Arc::default();
        let relays: Arc<Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let (queue, live) = (faults.clone(), relays.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let fault = queue.lock().expect("faults").pop_front();
                let task = tokio::spawn(connection(client, upstream.clone(), fault));
                if fault.is_none() {
                    live.lock().expect("relays").push(task.abort_handle());
                }
            }
        });
        Self {
            base,
            faults,
            relays,
        }
    }

    /// Faults for the next new connections; the connections open now are cut, so that the
    /// client's next request needs a new one.
    pub fn inject(&self, faults: &[Fault]) {
        self.faults.lock().expect("faults").extend(faults);
        for relay in self.relays.lock().expect("relays").drain(..) {
            relay.abort();
        }
    }

    pub fn pending(&self) -> usize {
        self.faults.lock().expect("faults").len()
    }
}

async fn connection(mut client: TcpStream, upstream: String, fault: Option<Fault>) {
    match fault {
        Some(Fault::Drop) => {
            read_request(&mut client).await;
        }
        Some(Fault::Unavailable) => {
            read_request(&mut client).await;
            let body = json!({"type": "about:blank", "title": "Service unavailable", "status": 503,
                              "detail": "injected by the test", "code": "unavailable"})
            .to_string();
            let response = format!(
                "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/problem+json\r\n\
                 content-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = client.write_all(response.as_bytes()).await;
            let _ = client.shutdown().await;
        }
        Some(Fault::LoseAnswer) => {
            let Ok(server) = TcpStream::connect(&upstream).await else {
                return;
            };
            let (mut from_client, _to_client) = client.into_split();
            let (mut from_server, mut to_server) = server.into_split();
            let forward =
                tokio::spawn(
                    async move { tokio::io::copy(&mut from_client, &mut to_server).await },
                );
            let mut first = [0u8; 1];
            let _ = from_server.read(&mut first).await;
            forward.abort();
            // Both halves drop here: the client sees its connection close mid-answer.
        }
        None => {
            if let Ok(mut server) = TcpStream::connect(&upstream).await {
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            }
        }
    }
}

/// Reads one request (head and `content-length` body), so that closing the connection after it
/// is not a reset of unread data.
async fn read_request(client: &mut TcpStream) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if buffer.len() >= end + 4 + length {
                return;
            }
        }
        match client.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    }
}
