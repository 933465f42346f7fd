"""What the local AWS adds for a paused workflow's resumption (docs/LOCAL_AWS.md, "Resuming a
workflow"): Lambda durable functions' callbacks, which moto does not have, and faults injected
into the answers to Step Functions' and Lambda's callbacks.

- `durable`: a stand-in for Lambda's durable-execution callbacks (SendDurableExecutionCallback
  Success, Failure and Heartbeat on the wire, and the callbacks they answer), with AWS's rules.
- `faults`: errors queued for the next calls of an operation (throttling, a service error).
- `control`: the WSGI layer that serves both, and the tests' control API
  (`/_countersign/durable/callbacks`, `/_countersign/faults`).

Step Functions' task tokens are moto's own state machines, run by its parser mode and held to
AWS's rules by `moto_fixes/sfn_tasks.py` and `moto_fixes/sfn_answers.py`.
"""
