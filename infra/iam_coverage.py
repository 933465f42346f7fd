"""Least privilege both ways, checked after the whole suite ran with IAM enforced.

The local AWS records, once each, every grant a call used and every call it refused
(MOTO_IAM_USAGE, see infra/local_iam/gate.py). This check reads those records and fails when:

- a call of the suite was refused, outside a stack that withheld a grant on purpose (every
  call the code makes must be granted: a refusal a test did not notice is a grant missing on
  AWS, or a path a test does not check);
- a grant of infra/template.yaml was used by no test and is not listed below with its reason
  (every grant must be needed: a grant nothing uses is privilege nobody needs);
- a grant listed below was used after all, or is no longer in the template (the list stays true).

A grant is one action on one resource, as the template writes them: (role, action, resource).

Usage: python infra/iam_coverage.py USAGE_DIR   (make test runs it after the Rust tests)
"""

from __future__ import annotations

import fnmatch
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from local_iam.template import all_grants, load  # noqa: E402

# Grants no test uses, each with why it is kept. Role and resource may use `*` (fnmatch).
UNUSED: dict[tuple[str, str, str], str] = {
    ("*", "logs:CreateLogStream", "*"): "Lambda writes the function's logs itself; no code calls CloudWatch Logs.",
    ("*", "logs:PutLogEvents", "*"): "Lambda writes the function's logs itself; no code calls CloudWatch Logs.",
    ("*", "xray:PutTraceSegments", "*"): "Lambda sends the function's X-Ray segments (Tracing); no code calls X-Ray.",
    ("*", "xray:PutTelemetryRecords", "*"): "Lambda sends the function's X-Ray telemetry (Tracing); no code calls X-Ray.",
    ("DispatchRole", "sqs:SendMessage", "DispatchFailureQueue.Arn"):
        "The approvals stream's event source mapping sends a batch the dispatcher failed for good to its "
        "on-failure destination, as the function's role; the local runner retries a batch until it succeeds.",
    ("ExecutorRole", "sqs:GetQueueAttributes", "JobsQueue.Arn"):
        "Lambda's SQS event source mapping needs it on the function's role (with ReceiveMessage and "
        "DeleteMessage); the local poller never asks for the queue's attributes.",
    ("ReconcilerRole", "dynamodb:UpdateItem", "ExecutionLedgerTable.Arn"):
        "An execution begun before v5 keeps its ledger item in the ledger table, and the reconciler ends it "
        "there when it is stuck: a path only an upgraded stack takes, which no test makes stuck.",
    ("DecideRole", "dynamodb:BatchWriteItem", "ApprovalIndexTable.Arn"):
        "The inbox is the listing's approver facet, and a listing removes the approval index's items from "
        "before v5 it finds stale: only a stack upgraded from before v5 holds them, and the upgrade tests "
        "list through the API function.",
    ("DispatchRole", "kms:Sign", "CertificateKeyArn"):
        "A deployer's own certificate key (the CertificateKeyArn parameter): the local stack always makes "
        "its own, so the suite signs through the grant's other branch, CertificateKey.Arn.",
    ("ReadRole", "kms:GetPublicKey", "CertificateKeyArn"):
        "A deployer's own certificate key (the CertificateKeyArn parameter): the suite reads the stack's "
        "own key's, through the grant's other branch, CertificateKey.Arn.",
    ("DispatchRole", "dynamodb:ListStreams", "ApprovalsTable.StreamArn"):
        "Lambda's event source mapping may list the table's streams; the local poller is given the stream "
        "as CloudFormation gives the mapping (its ARN) and never lists.",
}


def listed(grant: tuple[str, str, str]) -> str | None:
    for (role, action, resource), reason in UNUSED.items():
        if fnmatch.fnmatchcase(grant[0], role) and grant[1] == action and fnmatch.fnmatchcase(grant[2], resource):
            return reason
    return None


def read(folder: str) -> tuple[set[tuple[str, str, str]], list[dict[str, object]]]:
    used: set[tuple[str, str, str]] = set()
    refused: list[dict[str, object]] = []
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            for line in f:
                record = json.loads(line)
                if record.get("refused"):
                    if not record.get("withholding"):
                        refused.append(record)
                else:
                    used.add((record["role"], record["action"], record["resource"]))
    return used, refused


def main(folder: str) -> int:
    grants = all_grants(load())
    used, refused = read(folder) if os.path.isdir(folder) else (set(), [])
    problems = []
    for record in refused:
        problems.append(
            f"refused: the {record['function']} function's {record['action']} on {record['resource']} "
            f"(stack {record['stack']}): grant it, or make the test that called it expect the refusal"
        )
    unused = sorted(g for g in grants - used if listed(g) is None)
    for role, action, resource in unused:
        problems.append(f"unused: {role} {action} on {resource}: no test calls it; remove it, or list it here with why it stays")
    for key, reason in UNUSED.items():
        matching = [g for g in grants if listed(g) == reason and fnmatch.fnmatchcase(g[0], key[0])
                    and g[1] == key[1] and fnmatch.fnmatchcase(g[2], key[2])]
        if not matching:
            problems.append(f"stale: {key} is listed as unused but the template has no such grant")
        elif all(g in used for g in matching):
            problems.append(f"stale: {key} is listed as unused but the suite used it")
    kept = sorted(g for g in grants - used if listed(g) is not None)
    print(f"IAM: {len(grants)} grants in infra/template.yaml; {len(grants & used)} used by the suite; "
          f"{len(kept)} unused and listed with a reason; {len(refused)} calls refused")
    for problem in problems:
        print(f"  {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: iam_coverage.py USAGE_DIR")
    sys.exit(main(sys.argv[1]))
