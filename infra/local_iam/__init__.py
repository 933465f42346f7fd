"""IAM in the local stack: each function calls the local AWS as its own role, and a request is
allowed only when that role's policy in infra/template.yaml allows it, as AWS evaluates an
identity-based policy (docs/LOCAL_AWS.md, "IAM").

- `policy`: the evaluation (actions, resource ARNs with `*` and `?`, conditions), pure.
- `template`: the roles of infra/template.yaml resolved against one local stack's tables,
  queues, secrets and parameter values.
- `requests`: what a request to DynamoDB, DynamoDB Streams, SQS, Secrets Manager or Step
  Functions, or a Lambda durable-execution callback, asks for (its IAM action and resources,
  each table of a transaction or batch).
- `gate`: the WSGI layer in front of moto that registers stacks, refuses what a role does not
  allow with AWS's AccessDeniedException, and records which grants the calls used.
"""
