//! The README's callback receiver (`examples/callback_receiver.py`, which verifies every
//! delivery with the official Standard Webhooks library), run as the tests' subscription.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

pub struct CallbackReceiver {
    pub url: String,
    lines: Arc<Mutex<Vec<Value>>>,
    child: Child,
}

impl CallbackReceiver {
    /// Starts the receiver with the subscription's `secret`; it answers 500 to the first
    /// `fail_first` deliveries of each event.
    pub fn start(secret: &str, fail_first: u32) -> Self {
        let python = super::python();
        let mut child = Command::new(&python)
            .arg(super::workspace_root().join("examples/callback_receiver.py"))
            .env("CALLBACK_SECRET", secret)
            .env("FAIL_FIRST", fail_first.to_string())
            .stdout(Stdio::piped())
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start the receiver with {}: {e}", python.display()));
        let stdout = child.stdout.take().expect("stdout was piped");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(value) = serde_json::from_str::<Value>(&line) {
                    sink.lock().expect("lines lock").push(value);
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        let port = loop {
            if let Some(port) = lines
                .lock()
                .expect("lines lock")
                .iter()
                .find_map(|l| l["listening"].as_u64())
            {
                break port;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the receiver exited: {status} (is standardwebhooks installed?)");
            }
            assert!(Instant::now() < deadline, "the receiver did not start");
            std::thread::sleep(Duration::from_millis(20));
        };
        Self {
            url: format!("http://127.0.0.1:{port}/callbacks"),
            lines,
            child,
        }
    }

    /// Every line the receiver printed: `{"delivery", "type", "verified", "answer", "first"}` per
    /// delivery, `{"handled", …}` per event handled, `{"refused": …}` per delivery that did
    /// not verify.
    pub fn lines(&self) -> Vec<Value> {
        self.lines.lock().expect("lines lock").clone()
    }
}

impl Drop for CallbackReceiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
