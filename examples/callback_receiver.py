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

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

webhook = Webhook(os.environ["CALLBACK_SECRET"])  # the subscription's whsec_… secret
fail_first = int(os.environ.get("FAIL_FIRST", "0"))
lock = threading.Lock()
handled = set()  # event ids already handled (use your database in production)
deliveries = {}  # event id -> deliveries seen


def handle(event_type, approval, event):
    """Your code: react to the event once."""
    print(json.dumps({"handled": event["id"], "type": event_type, "status": approval["status"]}), flush=True)


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        try:
            payload = webhook.verify(body, dict(self.headers))  # raises unless signed and fresh
        except WebhookVerificationError as error:
            print(json.dumps({"refused": str(error)}), flush=True)
            return self.answer(400)
        event_id = self.headers["webhook-id"]
        with lock:
            deliveries[event_id] = deliveries.get(event_id, 0) + 1
            failing = deliveries[event_id] <= fail_first
            first = not failing and event_id not in handled
            if first:
                handled.add(event_id)
        print(json.dumps({"delivery": event_id, "type": payload["type"], "verified": True,
                          "answer": 500 if failing else 204, "first": first}), flush=True)
        if failing:
            return self.answer(500)
        if first:
            handle(payload["type"], payload["data"]["approval"], payload["data"]["event"])
        self.answer(204)

    def answer(self, status):
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 0), Receiver)
    print(json.dumps({"listening": server.server_address[1]}), flush=True)
    server.serve_forever()
