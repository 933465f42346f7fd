"""Serve moto (DynamoDB, DynamoDB Streams, SQS) on one port, one request at a time.

moto's own threaded server does not apply a conditional write atomically under concurrent
requests; DynamoDB does. Serving moto's WSGI app with threaded=False applies every request
whole, so the races our tests start are decided the way DynamoDB decides them.

Usage: python moto_server.py PORT [--exit-with-stdin]
With --exit-with-stdin the server exits when its standard input closes, so a test process that
started it never leaves it behind, however that process ends.
"""

import logging
import os
import sys
import threading

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple


def main() -> None:
    port = int(sys.argv[1])
    if "--exit-with-stdin" in sys.argv[2:]:
        def watch_stdin() -> None:
            sys.stdin.read()
            os._exit(0)

        threading.Thread(target=watch_stdin, daemon=True).start()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    app = DomainDispatcherApplication(create_backend_app)
    run_simple("127.0.0.1", port, app, threaded=False, use_reloader=False)


if __name__ == "__main__":
    main()
