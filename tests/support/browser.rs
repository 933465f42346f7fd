//! A real headless Chromium (Debian's `chromium`), driven over WebDriver by `chromedriver`.
//! Missing browser or driver fails the test: `make test` installs both.

use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder};
use serde_json::json;

pub struct Browser {
    pub client: Client,
    driver: Child,
    _profile: TempDir,
}

/// A throwaway directory, removed on drop.
struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn find(program: &str, candidates: &[&str]) -> String {
    candidates
        .iter()
        .find(|path| std::path::Path::new(path).exists())
        .map(|path| (*path).to_owned())
        .unwrap_or_else(|| {
            panic!("{program} is not installed: run `make test` (it installs Debian's chromium and chromium-driver)")
        })
}

impl Browser {
    /// Starts chromedriver on a free port and opens one headless Chromium session.
    pub async fn start() -> Self {
        let chromium = find(
            "chromium",
            &["/usr/bin/chromium", "/usr/bin/chromium-browser"],
        );
        let chromedriver = find(
            "chromedriver",
            &["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"],
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("free port");
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        let profile =
            std::env::temp_dir().join(format!("countersign-chromium-{}", ulid::Ulid::new()));
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-quic", "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--window-size=1000,1200",
                    format!("--user-data-dir={}", profile.display()),
                ]
            }
        });
        let capabilities = capabilities.as_object().cloned().unwrap_or_default();
        let client = ClientBuilder::rustls()
            .expect("TLS roots")
            .capabilities(capabilities)
            .connect(&format!("http://{addr}"))
            .await
            .expect("open a Chromium session");
        Self {
            client,
            driver,
            _profile: TempDir(profile),
        }
    }

    /// Closes the session and stops the driver.
    pub async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
    }
}
