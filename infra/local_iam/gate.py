"""The IAM gate in front of moto: who is calling, and whether its role allows the call.

A local stack registers with `POST /_countersign/iam/stacks` (its variables and parameter
values, see `template.Resolver`) and gets credentials for each function: an access key, a
secret and a session token, as Lambda gives a function its role's. From then on a request
signed with a function's access key is checked against that function's role, resource by
resource, and refused as AWS refuses it (`AccessDeniedException`, naming the role, the action
and the resource) when no statement allows it. The administrator's key (`test`, what `make run`,
the tests' own set-up and inspection and the CLI's `keys` use: the deployer, not a function)
is allowed everything; any other key is unknown (`UnrecognizedClientException`), and a request
to a service that is not signed at all is refused as AWS refuses it
(`MissingAuthenticationTokenException`), never taken for the administrator.

What it does not check: signatures (the SDK signs; AWS verifies), resource-based policies,
session policies and permission boundaries (the template has none).

`MOTO_IAM=off` lets every call through, for one debugging run (never in `make test`).
`MOTO_IAM_WITHOUT="Role action resource;..."` withholds grants from every stack (a mutation run:
which tests fail without a grant); a registration's "without" does the same for its stack.
`MOTO_IAM_PARAMETERS='{"Name": "value", ...}'` gives parameter values to every stack that
registers without its own value for them (a local deployment's settings: `make run` and the Rust
tests give ResumeStateMachineArns and ResumeFunctionArns, so that their stacks may resume the
workflows they create).
`MOTO_IAM_USAGE=DIR` records, once each, every grant a call used and every call refused, as JSON
lines in DIR/<pid>.jsonl, for infra/iam_coverage.py.
"""

from __future__ import annotations

import base64
import hmac
import io
import json
import os
import secrets
import string
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from local_resume.control import callback_call, lambda_error
from local_resume.durable import execution_of

from . import requests as needs_of
from .policy import Grant, evaluate
from .template import Resolver, Role, load

ADMIN_KEY = "test"
ACCOUNT = "123456789012"
STACKS_PATH = "/_countersign/iam/stacks"

_JSON_SERVICES = {
    "DynamoDB_20120810": "dynamodb",
    "DynamoDBStreams_20120810": "streams",
    "secretsmanager": "secretsmanager",
    "AmazonSQS": "sqs",
    "AWSStepFunctions": "states",
    "TrentService": "kms",
}


@dataclass(frozen=True)
class Identity:
    stack: str
    # Some grant of the stack was withheld on purpose: its refusals are expected.
    withholding: bool
    role: Role
    secret_access_key: str
    session_token: str

    @property
    def role_name(self) -> str:
        return f"{self.stack}-{self.role.logical_id}"

    @property
    def arn(self) -> str:
        return f"arn:aws:sts::{ACCOUNT}:assumed-role/{self.role_name}/{self.role.function}"


def _random(alphabet: str, length: int) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(length))


class Usage:
    """Grants used and calls refused, each written once, when MOTO_IAM_USAGE names a folder."""

    def __init__(self, folder: str | None) -> None:
        self.path = os.path.join(folder, f"{os.getpid()}.jsonl") if folder else None
        if folder:
            os.makedirs(folder, exist_ok=True)
        self.seen: set[tuple[Any, ...]] = set()
        self.lock = threading.Lock()

    def _write(self, key: tuple[Any, ...], record: dict[str, Any]) -> None:
        if self.path is None:
            return
        with self.lock:
            if key in self.seen:
                return
            self.seen.add(key)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record, sort_keys=True) + "\n")

    def used(self, identity: Identity, grant: Grant) -> None:
        record = {"role": identity.role.logical_id, "action": grant.action, "resource": grant.resource}
        self._write(("used", record["role"], grant.action, grant.resource), record)

    def refused(self, identity: Identity, action: str, resource: str) -> None:
        record = {
            "refused": True,
            "withholding": identity.withholding,
            "stack": identity.stack,
            "function": identity.role.function,
            "action": action,
            "resource": resource,
        }
        self._write(("refused", identity.stack, identity.role.function, action, resource), record)


class Refusal(Exception):
    def __init__(self, status: int, code: str, message: str, query_code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.query_code = status, code, message, query_code


class Gate:
    """WSGI middleware: registers stacks and checks each request before `app` sees it."""

    def __init__(self, app: Callable[..., Iterable[bytes]], enforce: bool, usage: Usage,
                 stream_of: Callable[[str, str], str | None], secret_arn: Callable[[str, str], str]) -> None:
        self.app = app
        self.enforce = enforce
        self.usage = usage
        self.stream_of = stream_of
        self.secret_arn = secret_arn
        self.template = load()
        self.identities: dict[str, Identity] = {}
        self.withheld: set[tuple[str, ...]] = set()
        # MOTO_IAM_PARAMETERS: values for the parameters a registration does not give.
        self.default_parameters: dict[str, str] = {}

    # ---------------------------------------------------------------- registration
    def register(self, payload: dict[str, Any]) -> dict[str, Any]:
        name = str(payload["name"])
        region = str(payload.get("region") or "us-east-1")
        resolver = Resolver(
            self.template,
            {str(k): str(v) for k, v in (payload.get("variables") or {}).items()},
            {**self.default_parameters, **{str(k): str(v) for k, v in (payload.get("parameters") or {}).items()}},
            region,
            ACCOUNT,
            lambda table: self.stream_of(region, table),
        )
        # Grants withheld (a test of what a missing grant does, a mutation run): by the
        # registration's "without" and MOTO_IAM_WITHOUT, each "Role action resource" as the
        # template writes them.
        withheld = {tuple(w) for w in payload.get("without") or []} | self.withheld
        functions = {}
        for function, role in resolver.roles().items():
            role = role.without({w for w in withheld if w[0] == role.logical_id})
            key = "ASIA" + _random(string.ascii_uppercase + string.digits, 16)
            identity = Identity(
                name,
                bool(withheld),
                role,
                _random(string.ascii_letters + string.digits + "/+", 40),
                base64.b64encode(secrets.token_bytes(48)).decode(),
            )
            self.identities[key] = identity
            functions[function] = {
                "access_key_id": key,
                "secret_access_key": identity.secret_access_key,
                "session_token": identity.session_token,
                "role": identity.role_name,
                "variables": list(role.variables),
            }
        return {"enforced": self.enforce, "functions": functions}

    # ---------------------------------------------------------------- checking
    def _identity(self, environ: dict[str, Any]) -> Identity | None:
        """The calling function, or None for the administrator."""
        authorization = environ.get("HTTP_AUTHORIZATION", "")
        key = authorization.partition("Credential=")[2].partition("/")[0]
        if key == ADMIN_KEY:
            return None
        identity = self.identities.get(key)
        token = environ.get("HTTP_X_AMZ_SECURITY_TOKEN", "")
        if identity is None or not hmac.compare_digest(token, identity.session_token):
            raise Refusal(400, "UnrecognizedClientException", "The security token included in the request is invalid.")
        return identity

    def _allow(self, identity: Identity, action: str, resource: str, context: dict[str, list[str]], code: str,
               query_code: str | None = None, status: int | None = None) -> None:
        grant = evaluate(identity.role.statements, action, resource, context)
        if grant is None:
            self.usage.refused(identity, action, resource)
            raise Refusal(
                status or (403 if query_code else 400),
                code,
                f"User: {identity.arn} is not authorized to perform: {action} on resource: {resource} "
                f"because no identity-based policy allows the {action} action",
                query_code,
            )
        self.usage.used(identity, grant)

    def _check(self, identity: Identity, service: str, operation: str, body: dict[str, Any], region: str) -> dict[str, Any] | None:
        """Refuses what the role does not allow. For BatchGetSecretValue, returns the errors of
        the secrets it may not read (they are left out of the request, as AWS answers them)."""
        if service == "dynamodb":
            needs = needs_of.dynamodb(operation, body, region, ACCOUNT)
            code = "com.amazon.coral.service#AccessDeniedException"
        elif service == "streams":
            needs = needs_of.streams(operation, body)
            code = "com.amazon.coral.service#AccessDeniedException"
        elif service == "states":
            needs = needs_of.stepfunctions(operation, body)
            code = "AccessDeniedException"
        elif service == "kms":
            needs = needs_of.kms(operation, body, region, ACCOUNT)
            code = "AccessDeniedException"
        elif service == "sqs":
            for need in needs_of.sqs(operation, body, region):
                self._allow(identity, need.action, need.resource, need.context,
                            "com.amazon.coral.service#AccessDeniedException", "AccessDenied;Sender")
            return None
        else:
            if operation == "BatchGetSecretValue":
                return self._batch_get_secret_value(identity, body, region)
            needs = needs_of.secretsmanager(operation, body, lambda id_: self.secret_arn(region, id_))
            code = "AccessDeniedException"
        for need in needs:
            self._allow(identity, need.action, need.resource, need.context, code)
        return None

    def _batch_get_secret_value(self, identity: Identity, body: dict[str, Any], region: str) -> dict[str, Any]:
        # The batch action takes no resource but "*" and grants nothing alone: each secret needs
        # GetSecretValue, and one it may not read is answered in Errors (BatchGetSecretValue API
        # reference, "Required permissions").
        self._allow(identity, "secretsmanager:BatchGetSecretValue", "*", {}, "AccessDeniedException")
        if body.get("Filters"):
            raise Refusal(400, "AccessDeniedException", "BatchGetSecretValue with Filters needs ListSecrets: not modelled by the local IAM check")
        allowed, errors = [], []
        for secret_id in body.get("SecretIdList") or []:
            arn = self.secret_arn(region, secret_id)
            try:
                self._allow(identity, "secretsmanager:GetSecretValue", arn, {}, "AccessDeniedException")
                allowed.append(secret_id)
            except Refusal as refusal:
                errors.append({"SecretId": secret_id, "ErrorCode": "AccessDeniedException", "Message": refusal.message})
        return {"allowed": allowed, "errors": errors}

    # ---------------------------------------------------------------- WSGI
    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(raw)
        if environ.get("PATH_INFO") == STACKS_PATH and environ.get("REQUEST_METHOD") == "POST":
            return _respond(start_response, 200, self.register(json.loads(raw or b"{}")), "application/json")
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        prefix, _, operation = target.partition(".")
        service = _JSON_SERVICES.get(prefix)
        content_type = "application/x-amz-json-1.0" if service in ("dynamodb", "streams", "sqs", "states") else "application/x-amz-json-1.1"
        durable = callback_call(environ)
        if durable is not None:
            return self._durable_callback(environ, start_response, *durable)
        if environ.get("PATH_INFO") == needs_of.SES_SEND_PATH and environ.get("REQUEST_METHOD") == "POST":
            return self._ses_send(environ, start_response, raw)
        try:
            if service is not None and "HTTP_AUTHORIZATION" not in environ and self.enforce:
                # AWS answers a request that is not signed at all before looking at it
                # ("Signing AWS API requests": every request must be signed); it is never the
                # administrator's.
                raise Refusal(400, "MissingAuthenticationTokenException",
                              "Request is missing Authentication Token", "MissingAuthenticationToken;Sender"
                              if service == "sqs" else None)
            identity = self._identity(environ) if "HTTP_AUTHORIZATION" in environ else None
            if identity is None or not self.enforce:
                return self.app(environ, start_response)
            if service is None:
                raise Refusal(400, "AccessDeniedException",
                              "the local IAM check reads JSON-protocol requests to DynamoDB, DynamoDB Streams, SQS, "
                              "Secrets Manager, Step Functions and KMS, and Lambda's durable-execution callbacks, only")
            body = json.loads(raw or b"{}")
            region = environ.get("HTTP_AUTHORIZATION", "").partition("Credential=")[2].split("/")[2]
            batch = self._check(identity, service, operation, body, region)
        except Refusal as refusal:
            return _refuse(start_response, refusal, content_type)
        if batch is None:
            return self.app(environ, start_response)
        return self._forward_batch(environ, start_response, body, batch)

    def _ses_send(self, environ: dict[str, Any], start_response: Callable[..., Any], raw: bytes) -> Iterable[bytes]:
        """An SES v2 SendEmail (restJson1): `ses:SendEmail` on its From identity and configuration
        set; a refusal as SES answers one (403, `x-amzn-ErrorType: AccessDeniedException`)."""
        try:
            if "HTTP_AUTHORIZATION" not in environ and self.enforce:
                raise Refusal(403, "MissingAuthenticationTokenException", "Missing Authentication Token")
            identity = self._identity(environ) if "HTTP_AUTHORIZATION" in environ else None
            if identity is not None and self.enforce:
                region = environ.get("HTTP_AUTHORIZATION", "").partition("Credential=")[2].split("/")[2]
                for need in needs_of.ses_send_email(json.loads(raw or b"{}"), region, ACCOUNT):
                    self._allow(identity, need.action, need.resource, need.context, "AccessDeniedException", status=403)
        except Refusal as refusal:
            return lambda_error(start_response, refusal.code, refusal.status, refusal.message)
        return self.app(environ, start_response)

    def _durable_callback(self, environ: dict[str, Any], start_response: Callable[..., Any], callback_id: str,
                          kind: str) -> Iterable[bytes]:
        """A Lambda durable-execution callback (restJson1): its action on the durable execution
        its id names; a refusal as Lambda answers one (403, `x-amzn-ErrorType`)."""
        try:
            if "HTTP_AUTHORIZATION" not in environ and self.enforce:
                raise Refusal(403, "MissingAuthenticationTokenException", "Missing Authentication Token")
            identity = self._identity(environ) if "HTTP_AUTHORIZATION" in environ else None
            if identity is not None and self.enforce:
                for need in needs_of.durable_callback(kind, callback_id, execution_of):
                    self._allow(identity, need.action, need.resource, need.context, "AccessDeniedException", status=403)
        except Refusal as refusal:
            return lambda_error(start_response, refusal.code, refusal.status, refusal.message)
        return self.app(environ, start_response)

    def _forward_batch(self, environ: dict[str, Any], start_response: Callable[..., Any], body: dict[str, Any],
                       batch: dict[str, Any]) -> Iterable[bytes]:
        if not batch["allowed"]:
            return _respond(start_response, 200, {"SecretValues": [], "Errors": batch["errors"]}, "application/x-amz-json-1.1")
        raw = json.dumps({**body, "SecretIdList": batch["allowed"]}).encode()
        environ["wsgi.input"] = io.BytesIO(raw)
        environ["CONTENT_LENGTH"] = str(len(raw))
        captured: dict[str, Any] = {}

        def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
            captured["status"], captured["headers"] = status, headers
            return lambda _: None

        answer = b"".join(self.app(environ, capture))
        if not captured["status"].startswith("200") or not batch["errors"]:
            start_response(captured["status"], captured["headers"])
            return [answer]
        merged = json.loads(answer)
        merged["Errors"] = list(merged.get("Errors") or []) + batch["errors"]
        return _respond(start_response, 200, merged, "application/x-amz-json-1.1")


def _respond(start_response: Callable[..., Any], status: int, payload: dict[str, Any], content_type: str) -> list[bytes]:
    body = json.dumps(payload).encode()
    reason = {200: "OK", 400: "Bad Request", 403: "Forbidden"}[status]
    start_response(f"{status} {reason}", [("Content-Type", content_type), ("Content-Length", str(len(body)))])
    return [body]


def _refuse(start_response: Callable[..., Any], refusal: Refusal, content_type: str) -> list[bytes]:
    body = json.dumps({"__type": refusal.code, "Message": refusal.message, "message": refusal.message}).encode()
    headers = [("Content-Type", content_type), ("Content-Length", str(len(body))), ("x-amzn-RequestId", secrets.token_hex(16))]
    if refusal.query_code:
        headers.append(("x-amzn-query-error", refusal.query_code))
    reason = {400: "Bad Request", 403: "Forbidden"}[refusal.status]
    start_response(f"{refusal.status} {reason}", headers)
    return [body]


def moto_lookups() -> tuple[Callable[[str, str], str | None], Callable[[str, str], str]]:
    """The two things the gate asks moto: a table's current stream ARN, a secret's ARN."""
    from moto.dynamodb.models import dynamodb_backends
    from moto.secretsmanager.models import secretsmanager_backends

    def stream_of(region: str, table_name: str) -> str | None:
        table = dynamodb_backends[ACCOUNT][region].tables.get(table_name)
        if table is None or not getattr(table, "latest_stream_label", None):
            return None
        return f"{table.table_arn}/stream/{table.latest_stream_label}"

    def secret_arn(region: str, secret_id: str) -> str:
        secret = secretsmanager_backends[ACCOUNT][region].secrets.get(secret_id)
        if secret is not None:
            return secret.arn
        if secret_id.startswith("arn:"):
            return secret_id
        return f"arn:aws:secretsmanager:{region}:{ACCOUNT}:secret:{secret_id}"

    return stream_of, secret_arn


def install(app: Callable[..., Iterable[bytes]]) -> Gate:
    """The gate around `app`, configured from MOTO_IAM and MOTO_IAM_USAGE."""
    mode = os.environ.get("MOTO_IAM", "on").strip().lower()
    if mode not in ("on", "off"):
        raise SystemExit(f"MOTO_IAM={mode!r}: on (the default) or off")
    stream_of, secret_arn = moto_lookups()
    gate = Gate(app, mode == "on", Usage(os.environ.get("MOTO_IAM_USAGE") or None), stream_of, secret_arn)
    # MOTO_IAM_WITHOUT: grants withheld from every stack, ";"-separated "Role action resource".
    for grant in filter(None, (g.strip() for g in os.environ.get("MOTO_IAM_WITHOUT", "").split(";"))):
        parts = tuple(grant.split())
        if len(parts) != 3:
            raise SystemExit(f"MOTO_IAM_WITHOUT: {grant!r} is not 'Role action resource'")
        gate.withheld.add(parts)
    defaults = os.environ.get("MOTO_IAM_PARAMETERS", "").strip()
    if defaults:
        try:
            parsed = json.loads(defaults)
        except ValueError as e:
            raise SystemExit(f"MOTO_IAM_PARAMETERS: not JSON: {e}")
        if not isinstance(parsed, dict):
            raise SystemExit('MOTO_IAM_PARAMETERS: a JSON object {"Parameter": "value"}')
        unknown = set(parsed) - set(gate.template.get("Parameters", {}))
        if unknown:
            raise SystemExit(f"MOTO_IAM_PARAMETERS: not parameters of infra/template.yaml: {sorted(unknown)}")
        gate.default_parameters = {str(k): str(v) for k, v in parsed.items()}
    return gate
