"""The local stack for a test class: infra/moto_server.py in a process of its own, and boto3
clients that talk to it over the wire (no moto in the test process, so what is tested is what
the services see).
"""

import os
import socket
import subprocess
import sys
import time
from typing import Any

import boto3
from botocore.config import Config

INFRA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, INFRA)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MotoServer:
    """A started moto_server.py; `env` is added to its environment."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        port = free_port()
        # --exit-with-stdin: the server goes when this process does, however it ends.
        self.process = subprocess.Popen(
            [sys.executable, os.path.join(INFRA, "moto_server.py"), str(port), "--exit-with-stdin"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if self.process.poll() is not None:
                    raise RuntimeError(f"moto_server.py exited: {self.process.returncode}")
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("moto_server.py did not start within 60 s")
                time.sleep(0.05)
        self.endpoint = f"http://127.0.0.1:{port}"

    def client(self, service: str) -> Any:
        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
            config=Config(retries={"max_attempts": 1}),
        )

    def stop(self) -> None:
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
