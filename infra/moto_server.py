"""Serve moto (DynamoDB, DynamoDB Streams, SQS, Secrets Manager, Step Functions) and a stand-in for
Lambda's durable-execution callbacks on one port, one request at a time.

moto's own threaded server does not apply a conditional write atomically under concurrent
requests; DynamoDB does. Here every request runs under one global lock, so each is applied
whole and the races our tests start are decided the way DynamoDB decides them. Connections are
still served by threads with HTTP/1.1 keep-alive, so clients reuse them instead of opening one
per request (with a single-threaded HTTP/1.0 server, a busy client opens thousands per minute,
and the kernel's connection queues make some requests wait seconds).

moto itself is patched first (`moto_patches.py`): transactions roll back through a journal
instead of swapping in deep copies of the tables, shard iterators expire as on AWS, and what AWS
refuses where our guarantees depend on it is refused here too (duplicate keys in a
BatchWriteItem, SQS characters and sizes, TransactWriteItems client tokens, the 4 MB
transaction).

In front of moto, inside the lock, the IAM gate (`local_iam/gate.py`): each function calls as its
own role, and what its role in infra/template.yaml does not allow is refused with AWS's
AccessDeniedException. `MOTO_IAM=off` switches that off for one debugging run.

Behind the gate, `local_resume/control.py` answers Lambda's durable-execution callbacks (moto has
no durable functions) and the tests' control API for them (`/_countersign/durable/callbacks`,
`/_countersign/faults`). Step Functions runs state machines (moto's parser mode, switched on by
`moto_patches.install`): an execution runs in a thread of its own and calls other services
(SQS's sendMessage) through this server, taking its turn at the lock like any request; so a
request must never wait for an execution inside the lock (StartSyncExecution of a state machine
that calls a service would: it is not supported).

Usage: python moto_server.py PORT [--exit-with-stdin]
With --exit-with-stdin the server exits when its standard input closes, so a test process that
started it never leaves it behind, however that process ends.
"""

import logging
import os
import sys
import threading

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import WSGIRequestHandler, run_simple

import moto_patches
from local_iam import gate
from local_resume.control import Control


class Serialized:
    """A WSGI app that lets one request at a time into moto, body and all."""

    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        with self.lock:
            # Consume the whole response inside the lock: moto may build it lazily.
            return list(self.app(environ, start_response))


def main() -> None:
    port = int(sys.argv[1])
    moto_patches.install(port)
    if "--exit-with-stdin" in sys.argv[2:]:
        def watch_stdin() -> None:
            sys.stdin.read()
            os._exit(0)

        threading.Thread(target=watch_stdin, daemon=True).start()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    # The state machines' interpreter logs every state that fails (a rejection, a time-out) as an
    # unhandled exception, with its whole parse tree: what an execution did is in its history.
    logging.getLogger("moto.stepfunctions.parser").setLevel(logging.CRITICAL)
    WSGIRequestHandler.protocol_version = "HTTP/1.1"
    checked = gate.install(Control(DomainDispatcherApplication(create_backend_app)))
    if not checked.enforce:
        print("MOTO_IAM=off: every call is allowed, whatever its role (a debugging run only)", file=sys.stderr)
    app = Serialized(checked)
    run_simple("127.0.0.1", port, app, threaded=True, use_reloader=False)


if __name__ == "__main__":
    main()
