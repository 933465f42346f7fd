//! GET /health reports whether the service can reach its tables.

use countersign_tests::TestApp;

#[tokio::test]
async fn health_is_ok_when_the_tables_answer() {
    let t = TestApp::start().await;
    let reply = t.send(t.http.get(t.url("/health"))).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.json(), serde_json::json!({"status": "ok"}));
}

#[tokio::test]
async fn health_is_unavailable_without_its_tables() {
    let t = TestApp::build(&[]).await; // tables never created
    let reply = t.send_any(t.http.get(t.url("/health"))).await;
    assert_eq!(reply.status, 503);
    assert_eq!(reply.code(), "unavailable");
}
