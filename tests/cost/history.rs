//! History: the target, and scenario (b)'s figures at each cut since issue 24.

pub(crate) const TARGET_PER_MILLION: f64 = 50.0;
pub(crate) const GOAL_PER_MILLION: f64 = 25.0;

/// Scenario (b) at each step of issue 24's cuts, and each change since: (what changed, write
/// units, dollars per million approvals). The last row must be what this test computes now.
pub(crate) const CUTS: &[(&str, f64, f64)] = &[
    ("first measurement", 182.0, 130.10),
    (
        "a transaction of one update is sent as that conditional update (ledger begins, ends without an event): half the units, the same atomicity",
        171.0,
        122.86,
    ),
    (
        "callbacks keep no ledger item: their outcome event is their record (delivered and failed share one id, put once), read before each delivery",
        139.0,
        103.59,
    ),
    (
        "the quorum marker `while_pending` cut to a boolean (the votes' conditions test only that it exists): a quorum approval's create fits in 1 KB, for the item and each index",
        135.0,
        101.09,
    ),
    (
        "not a cut — metrics (issue 26): each invocation's EMF documents, 1650 bytes in all, ingested by CloudWatch Logs; and the create's trace kept on the approval in 17 bytes (a binary attribute), which keeps every write's units",
        135.0,
        101.92,
    ),
    (
        "not a cut — `ApprovalCreated` names its `Channel` (api, or github for a GitHub deployment's round): 36 more EMF bytes",
        135.0,
        101.93,
    ),
    (
        "the approvals' listing indexes keys only: `by_status_keys` (status, then id) replaces `by_status` and `by_tenant`, which copied the whole item on every write; a keys-only index is written only when its keys move (the status), and a listing page is its query (one per status, sent together, without a status filter) and one BatchGetItem",
        118.0,
        91.31,
    ),
    (
        "the trail keyed by its order in the events table itself, its local index no longer written: the events one change derives share one item, an event the executor records (a notification, a callback's outcome) is one item of its own",
        96.0,
        77.56,
    ),
    (
        "the listing index keyed by facet and status, written once at the create and moved once at the decision (a delete and a put, no index entry to move), and without the approver-and-requester facets (4 items for three approvers, not 7): that filter reads the approver's facet and keeps the requester's approvals, a page possibly short",
        73.0,
        63.18,
    ),
    (
        "an approval's notifications one job under one ledger item (each approver still called once, with its own key, all at once; a retry calls only those not done), their events one item per attempt",
        63.0,
        56.73,
    ),
    (
        "not a cut — the log lines counted: the functions' JSON lines at the default `LogLevel` info (one per API request; a job's routine progress is debug, the trail records it), 1,316 bytes; Lambda's own START/END/REPORT lines none (`SystemLogLevel: WARN`)",
        63.0,
        57.39,
    ),
    (
        "not a cut, a truer model — an executor's batch runs its jobs at once (as `handle_batch` always has) and a notify job calls its approvers together: an invocation is billed its longest job, not the sum of all",
        63.0,
        54.33,
    ),
    (
        "an execution's ledger on its approval (`execution.lg_*`): its attempt's begin and end each one conditional update of the approval instead of a transaction of two items (the ledger item and the approval); an execution begun before v5 keeps its ledger item",
        55.0,
        49.26,
    ),
    (
        "the idempotency record's saved response deflated: the create's record fits 1 KB, half its units in the transaction",
        53.0,
        48.01,
    ),
    (
        "not a cut, a cost of delegation — the dispatcher reads the approvers' delegations (one eventually consistent `BatchGetItem` per batch that notifies) so a delegate gets a copy of each notification",
        53.0,
        48.23,
    ),
    (
        "not a cut, a cost of approval policies — a create reads its tenant's policy and groups (one strongly consistent `BatchGetItem`, 2 read units) and, for a tenant with none, warns once that requesters choose their approvers; a warm function does both once per `KEY_CACHE_SECONDS`, this model counts every create cold",
        53.0,
        48.62,
    ),
];
