"""A Countersign callback receiver: each delivery is verified with the official Standard Webhooks
library, and each event is handled once — deliveries repeat (a lost 2xx, a retry after a 5xx),
event ids (`webhook-id`) do not.

    CALLBACK_SECRET=whsec_... python examples/callback_receiver.py 8080

It prints one JSON line per delivery. (`FAIL_FIRST` answers 500 to the first N deliveries of
each event, for the tests: a receiver that is down for a while.)
"""

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

fail_first = int(os.environ.get("FAIL_FIRST", "0"))
lock = threading.Lock()
deliveries = {}  # event id -> deliveries seen (for FAIL_FIRST and the log)


def handle(event_type, approval, event):
    """Your code: react to the event once."""
    print(json.dumps({"handled": event["id"], "type": event_type, "status": approval["status"]}), flush=True)


# README: receive
from standardwebhooks.webhooks import Webhook, WebhookVerificationError  # pip install standardwebhooks

webhook = Webhook(os.environ["CALLBACK_SECRET"])  # the subscription's whsec_... secret
handled = set()  # event ids already handled: in production, a unique key in your database


def receive(body: bytes, headers: dict) -> int:
    """One delivery: verify it, handle its event once, answer with a status code."""
    try:
        payload = webhook.verify(body, headers)  # raises unless signed with the secret, and fresh
    except WebhookVerificationError:
        return 400
    event_id = headers["webhook-id"]  # the event id: the same on every delivery of the event
    with lock:
        first = event_id not in handled
        handled.add(event_id)
    if first:
        handle(payload["type"], payload["data"]["approval"], payload["data"]["event"])
    return 204  # 2xx: delivered; anything else and the delivery is retried
# README: end


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        headers = {k.lower(): v for k, v in self.headers.items()}
        event_id = headers.get("webhook-id", "")
        try:  # for the log: every delivery is checked, the failing ones too
            webhook.verify(body, headers)
            verified = True
        except WebhookVerificationError:
            verified = False
        with lock:
            deliveries[event_id] = deliveries.get(event_id, 0) + 1
            failing = deliveries[event_id] <= fail_first
        status = 500 if failing else receive(body, headers)
        line = {"delivery": event_id, "verified": verified, "answer": status}
        if verified:
            line["type"] = json.loads(body).get("type")
        else:
            line["refused"] = "the signature did not verify"
        print(json.dumps(line), flush=True)
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 0), Receiver)
    print(json.dumps({"listening": server.server_address[1]}), flush=True)
    server.serve_forever()
