//! The metrics Countersign emits: one list, read by the code that records them, by the tests, and
//! by the template's dashboard (its test checks that the dashboard names only these).

/// A metric's CloudWatch unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Count,
    Milliseconds,
}

impl Unit {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Count => "Count",
            Self::Milliseconds => "Milliseconds",
        }
    }
}

/// A dimension a metric may carry beside `Function` (and `Tenant`, when configured). Every value
/// is bounded: a configured action type, a closed set of outcomes, channels and reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dimension {
    Function,
    ActionType,
    Outcome,
    Channel,
    Reason,
    Tenant,
}

impl Dimension {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Function => "Function",
            Self::ActionType => "ActionType",
            Self::Outcome => "Outcome",
            Self::Channel => "Channel",
            Self::Reason => "Reason",
            Self::Tenant => "Tenant",
        }
    }
}

macro_rules! metrics {
    ($($(#[doc = $doc:literal])* $name:ident: $unit:ident [$($dim:ident),*];)*) => {
        /// Every metric, by its CloudWatch name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Metric {
            $($(#[doc = $doc])* $name,)*
        }

        impl Metric {
            /// Every metric the code emits, in docs/OPERATIONS.md's order.
            pub const ALL: &'static [Metric] = &[$(Metric::$name,)*];

            pub fn name(self) -> &'static str {
                match self {
                    $(Metric::$name => stringify!($name),)*
                }
            }

            pub fn unit(self) -> Unit {
                match self {
                    $(Metric::$name => Unit::$unit,)*
                }
            }

            /// The dimensions it carries beside `Function` (and `Tenant`), in order.
            pub fn dimensions(self) -> &'static [Dimension] {
                match self {
                    $(Metric::$name => &[$(Dimension::$dim),*],)*
                }
            }
        }
    };
}

metrics! {
    /// An approval was created (the first request with its key); `Channel` is what opened it:
    /// `api`, or `github` (a GitHub deployment's round).
    ApprovalCreated: Count [ActionType, Channel];
    /// A create repeated an earlier one (same key, same body): the first answer was replayed.
    CreateReplayed: Count [ActionType];
    /// A tenant's approval policy in `log_only` would have refused a create that went ahead
    /// (forbidden, an evaluation error, or groups it could not meet).
    PolicyWouldRefuse: Count [ActionType];
    /// A request answered 4xx; `Reason` is the problem's `code`.
    RequestRefused: Count [Reason];
    /// A vote was counted; `Channel` is where it was cast (api, review_page, slack, webhook).
    VoteCounted: Count [Channel];
    /// A vote was refused; `Reason` is the problem's `code`.
    VoteRefused: Count [Reason];
    /// An approval reached its decision: approved, rejected, expired or cancelled.
    ApprovalDecided: Count [Outcome];
    /// From creation to the deciding vote (approved or rejected).
    TimeToDecision: Milliseconds [Outcome];
    /// An execution ended: succeeded, failed or needs_reconciliation.
    ExecutionEnded: Count [Outcome];
    /// From the decision to the target's answer that ended the execution.
    DecisionToEffect: Milliseconds [ActionType];
    /// A call to an action's target (each attempt, retries included).
    ExecutionAttempt: Count [ActionType];
    /// A status query to a target; `Outcome` is its answer (succeeded, failed, not_found, pending,
    /// unknown).
    StatusQuery: Count [Outcome];
    /// A provider webhook refused: signature, stale, unknown_source, or the problem's `code`.
    WebhookRefused: Count [Reason];
    /// A provider webhook delivery seen before (answered from the inbox, not acted on again).
    WebhookDuplicate: Count [];
    /// A notification call that failed: refused (the notification fails) or not answered (it
    /// is tried again).
    NotificationFailed: Count [];
    /// A callback delivery that failed: refused (the callback fails) or not answered (it is
    /// tried again).
    CallbackFailed: Count [];
    /// A job left to come back and be tried again: a retryable failure, an outcome to ask the
    /// target about, or a store error (not a message on its way to the DLQ).
    JobRetried: Count [];
    /// Items a scheduled run acted on (expired approvals; executions re-queued or ended).
    SweepItems: Count [];
    /// Items a scheduled run failed to act on (it will try them again on its next run).
    SweepFailures: Count [];
    /// Secrets could not be read again from Secrets Manager (or no longer parsed): the last
    /// good values stay in force.
    SecretRefreshFailed: Count [];
}
