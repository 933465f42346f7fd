//! The command line: global connection flags, one subcommand per thing a person or a pipeline
//! does with approvals.

use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::duration;

const EXIT_CODES: &str = "\
Exit codes:
  0  done (request --wait: approved and the action executed, or approved with --no-execution)
  1  request --wait: rejected
  2  request --wait: expired or cancelled
  3  request --wait: approved, but the execution failed or needs reconciliation
  4  usage or transport error, an API error (its detail and code are shown), or --timeout ran out

Configuration: COUNTERSIGN_URL and COUNTERSIGN_API_KEY (--url and --api-key override them).
Keep the key in the environment (a CI secret), not on the command line.";

#[derive(Debug, Parser)]
#[command(
    name = "countersign",
    version,
    about = "Ask for, watch and decide Countersign approvals; gate a CI pipeline on one.",
    after_help = EXIT_CODES,
    // A flag given twice takes its last value: a pipeline may append to a base command.
    args_override_self = true
)]
pub struct Cli {
    /// The API's base URL, e.g. https://approvals.example.com
    #[arg(
        long,
        env = "COUNTERSIGN_URL",
        global = true,
        value_name = "URL",
        help_heading = "Global options"
    )]
    pub url: Option<String>,

    /// The API key (prefer the environment variable: a flag shows in process listings)
    #[arg(
        long,
        env = "COUNTERSIGN_API_KEY",
        global = true,
        hide_env_values = true,
        value_name = "KEY",
        help_heading = "Global options"
    )]
    pub api_key: Option<String>,

    /// Print JSON for machines instead of text (errors too, on standard error)
    #[arg(long, global = true, help_heading = "Global options")]
    pub json: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Ask for an approval; with --wait, wait for its outcome (the pipeline gate)
    Request(RequestArgs),
    /// List approvals, newest first
    List(ListArgs),
    /// Show one approval: status, votes, decision, execution
    Show(IdArg),
    /// Vote on an approval (approve or reject)
    Vote(VoteArgs),
    /// Show an approval's audit trail; --follow prints new events until it ends
    Events(EventsArgs),
    /// Withdraw a pending approval
    Cancel(CancelArgs),
    /// Claim an approved approval-only execution before performing it: prints the approval
    /// (the payload its approvers saw). Of several claimers one wins; the same --key again
    /// replays the claim
    Claim(ClaimArgs),
    /// Report a claimed execution's outcome, with the claim's --key
    Report(ReportArgs),
    /// Serve AI agents over the Model Context Protocol on stdio (tools: request_approval,
    /// wait_for_decision, get_approval, claim, report, permission_prompt). The permission
    /// prompt reads COUNTERSIGN_AGENT_ACTION, COUNTERSIGN_AGENT_APPROVERS (comma-separated;
    /// optional where the deployment's approval policy chooses the approvers) and
    /// COUNTERSIGN_AGENT_WAIT (seconds, 1-55, default 50)
    Mcp,
    /// Let someone vote in a person's place for a while: set, show or end the person's
    /// delegation (with the person's own approver key, or an operator's)
    #[command(subcommand)]
    Delegate(DelegateCommand),
    /// Create, list, revoke and roll the service's API keys (the keys table, over your AWS
    /// credentials: the SDK's default chain; AWS_ENDPOINT_URL locally). Exit 1 on a refusal
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Push, show, roll back and test a tenant's approval policy (Cedar): who must approve
    /// what (the keys table, over your AWS credentials; test and schema offline). Exit 1 on a
    /// refusal; test: 0 allow or auto, 3 forbid, 4 error
    #[command(subcommand)]
    Policy(crate::policy::args::PolicyCommand),
    /// Set, list and delete a tenant's groups: whom a policy's @require counts (the keys
    /// table, over your AWS credentials). Exit 1 on a refusal
    #[command(subcommand)]
    Groups(crate::policy::args::GroupsCommand),
    /// Check a passkey-only approval's certificate offline: Countersign's signature, each
    /// vote's passkey signature over its statement, the payload's digest, every rule met by
    /// distinct people other than the requester (and, with --credentials, every passkey
    /// pinned). Exit 0 with one line per rule; 1 with the first reason it fails
    Verify(VerifyArgs),
    /// List, export and revoke people's passkeys (the keys table, over your AWS
    /// credentials). `export` writes what a verifier pins (--credentials)
    #[command(subcommand)]
    Passkeys(PasskeysCommand),
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The certificate (JSON, as GET /approvals/{id}/certificate answers), or - for stdin
    pub certificate: String,

    /// Countersign's public keys: a JWKS file, or its URL [default:
    /// $COUNTERSIGN_URL/.well-known/countersign/jwks.json]
    #[arg(long, value_name = "FILE|URL")]
    pub jwks: Option<String>,

    /// The passkeys to trust (`countersign passkeys export`): every vote's credential must be
    /// one of them, for that person, with that key
    #[arg(long, value_name = "FILE")]
    pub credentials: Option<String>,

    /// The payload the target holds (JSON): it must be the certificate's
    #[arg(long, value_name = "FILE")]
    pub payload: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum PasskeysCommand {
    /// List a tenant's passkeys (credential id, identity, when registered)
    List(PasskeysListArgs),
    /// Print every passkey of a tenant as JSON: {"credentials": [{credential_id, identity,
    /// public_key_jwk, iss, sub, registered_at}]} — the file `verify --credentials` pins
    Export(PasskeysTenantArgs),
    /// Remove a person's passkey: it signs no vote from then on
    Revoke(PasskeyRevokeArgs),
}

#[derive(Debug, Args)]
pub struct PasskeysListArgs {
    #[arg(long)]
    pub tenant: String,

    /// Only this person's
    #[arg(long)]
    pub identity: Option<String>,

    #[command(flatten)]
    pub table: KeysTable,
}

#[derive(Debug, Args)]
pub struct PasskeysTenantArgs {
    #[arg(long)]
    pub tenant: String,

    #[command(flatten)]
    pub table: KeysTable,
}

#[derive(Debug, Args)]
pub struct PasskeyRevokeArgs {
    #[arg(long)]
    pub tenant: String,

    /// Whose passkey: the person's identity, e.g. alice@example.com
    #[arg(long)]
    pub identity: String,

    /// The credential id (base64url, as `passkeys list` shows it)
    pub credential_id: String,

    #[command(flatten)]
    pub table: KeysTable,
}

#[derive(Debug, Subcommand)]
pub enum DelegateCommand {
    /// Set (replace) PERSON's delegation: --to votes in their place until --until (or for
    /// --for), from --from (default now); at most 90 days
    Set(DelegateSetArgs),
    /// Show PERSON's delegation (until it ends)
    Show(PersonArg),
    /// End PERSON's delegation now
    End(PersonArg),
}

#[derive(Debug, Args)]
pub struct PersonArg {
    /// Whose place: the person's identity, e.g. alice@example.com
    pub person: String,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("end").required(true).args(["until", "for_"])))]
pub struct DelegateSetArgs {
    /// Whose place: the person's identity, e.g. alice@example.com
    pub person: String,

    /// Who may vote in their place
    #[arg(long, value_name = "DELEGATE")]
    pub to: String,

    /// When it starts (RFC 3339) [default: now]
    #[arg(long, value_name = "TIME")]
    pub from: Option<String>,

    /// When it ends (RFC 3339)
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,

    /// How long it lasts from --from (or now), e.g. 14d
    #[arg(long = "for", value_name = "DURATION", value_parser = duration::parse)]
    pub for_: Option<Duration>,

    /// Why (shown with the delegation)
    #[arg(long)]
    pub reason: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create a key and print it once (it is never shown again: store it now)
    Create(KeyCreateArgs),
    /// List keys: ids, holders, roles and times (never a secret or a hash)
    List(KeyListArgs),
    /// Revoke a key: refused from then on (within the service's KEY_CACHE_SECONDS)
    Revoke(KeyIdArgs),
    /// Create a key with the same tenant, principal and roles, and end the old one after
    /// --overlap, in one transaction; the new key is printed once
    Roll(KeyRollArgs),
}

/// The keys table.
#[derive(Debug, Clone, Args)]
pub struct KeysTable {
    /// The keys table's name
    #[arg(long, env = "KEYS_TABLE", default_value = "countersign-api-keys")]
    pub table: String,
}

#[derive(Debug, Args)]
pub struct KeyCreateArgs {
    /// The tenant the key belongs to
    #[arg(long)]
    pub tenant: String,

    /// Who holds it (a person's identity, or a service's such as ci@acme)
    #[arg(long)]
    pub principal: String,

    /// Its roles (repeat the flag): requester, approver, decider, operator, reader
    #[arg(long = "role", required = true, value_delimiter = ',')]
    pub roles: Vec<String>,

    /// How long it stays valid, e.g. 90d [default: until revoked]
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub expires_in: Option<Duration>,

    /// What it is for (shown by `keys list`)
    #[arg(long)]
    pub description: Option<String>,

    #[command(flatten)]
    pub table: KeysTable,
}

#[derive(Debug, Args)]
pub struct KeyListArgs {
    /// Only this tenant's keys
    #[arg(long)]
    pub tenant: Option<String>,

    #[command(flatten)]
    pub table: KeysTable,
}

#[derive(Debug, Args)]
pub struct KeyIdArgs {
    /// The key's id (the 16 characters after csk_)
    pub key_id: String,

    #[command(flatten)]
    pub table: KeysTable,
}

#[derive(Debug, Args)]
pub struct KeyRollArgs {
    /// The key's id (the 16 characters after csk_)
    pub key_id: String,

    /// How long the old key keeps working beside the new one, e.g. 24h
    #[arg(long, default_value = "24h", value_parser = duration::parse)]
    pub overlap: Duration,

    #[command(flatten)]
    pub table: KeysTable,
}

#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct RequestArgs {
    /// The action type (one the service is configured with), e.g. deploy
    #[arg(long = "type", value_name = "TYPE")]
    pub action_type: String,

    /// The action's payload: a JSON object, @FILE, or @- for standard input [default: {}]
    #[arg(long, value_name = "JSON|@FILE")]
    pub payload: Option<String>,

    /// Who may approve (repeat the flag, or separate with commas). Leave it out where the
    /// deployment's approval policy chooses the approvers; those named only add to them
    #[arg(long = "approver", value_name = "APPROVER", value_delimiter = ',')]
    pub approvers: Vec<String>,

    /// How many of the approvers must approve [default: 1]
    #[arg(
        long,
        value_name = "N",
        value_parser = clap::value_parser!(u32).range(1..),
        requires = "approvers"
    )]
    pub min_approvals: Option<u32>,

    /// Context shown to the approvers: a JSON object, @FILE, or @-
    #[arg(long, value_name = "JSON|@FILE")]
    pub context: Option<String>,

    /// How long the approval stays open, e.g. 2h [server default: 7 days; 60s to 30d]
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub expires_in: Option<Duration>,

    /// Makes a re-run attach to the approval the first run created (use the pipeline's id,
    /// e.g. "$CI_PIPELINE_ID-deploy"); a random one when left out
    #[arg(long, value_name = "KEY")]
    pub idempotency_key: Option<String>,

    /// Wait for the outcome, and exit with its code (see below)
    #[arg(long)]
    pub wait: bool,

    /// Give up waiting after this long (e.g. 30m), with exit code 4 [default: no limit]
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub timeout: Option<Duration>,

    /// With --wait: exit 0 once approved, without waiting for the action to run
    #[arg(long, requires = "wait")]
    pub no_execution: bool,

    #[command(flatten)]
    pub polling: Polling,
}

/// How often a waiting command asks: from `poll_interval`, doubling while nothing changes, up
/// to `max_poll_interval`. Hidden: the defaults suit people, the tests want them short.
#[derive(Debug, Clone, Copy, Args)]
pub struct Polling {
    #[arg(long, hide = true, default_value = "1s", value_parser = duration::parse)]
    pub poll_interval: Duration,

    #[arg(long, hide = true, default_value = "15s", value_parser = duration::parse)]
    pub max_poll_interval: Duration,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only approvals in this status
    #[arg(long, value_enum)]
    pub status: Option<StatusFilter>,

    /// Only approvals this approver may decide; `me` is the API key's own principal
    #[arg(long, value_name = "APPROVER|me")]
    pub approver: Option<String>,

    /// Only approvals this principal requested; `me` is the API key's own principal
    #[arg(long, value_name = "PRINCIPAL|me")]
    pub requested_by: Option<String>,

    /// Approvals per page (1–100)
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub limit: u32,

    /// The next page: the cursor printed under the previous one
    #[arg(long)]
    pub cursor: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum StatusFilter {
    Pending,
    Approved,
    Rejected,
    Expired,
    Cancelled,
}

impl StatusFilter {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Rejected => "rejected",
            Self::Expired => "expired",
            Self::Cancelled => "cancelled",
        }
    }
}

#[derive(Debug, Args)]
pub struct IdArg {
    /// The approval's id (apr_…)
    pub id: String,
}

#[derive(Debug, Args)]
pub struct VoteArgs {
    /// The approval's id (apr_…)
    pub id: String,

    pub decision: VoteChoice,

    /// A comment recorded with the vote
    #[arg(long)]
    pub comment: Option<String>,

    /// Vote on behalf of this approver (a `decider` key; or an approver's key, in the place of
    /// a person whose delegation to it is in force)
    #[arg(long = "as", value_name = "APPROVER")]
    pub on_behalf_of: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum VoteChoice {
    Approve,
    Reject,
}

impl VoteChoice {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approve => "approve",
            Self::Reject => "reject",
        }
    }
}

#[derive(Debug, Args)]
pub struct EventsArgs {
    /// The approval's id (apr_…)
    pub id: String,

    /// Keep printing new events until the approval reaches its final state (or Ctrl-C)
    #[arg(long)]
    pub follow: bool,

    #[command(flatten)]
    pub polling: Polling,
}

#[derive(Debug, Args)]
pub struct CancelArgs {
    /// The approval's id (apr_…)
    pub id: String,

    /// Why it is withdrawn (recorded and shown to the approvers)
    #[arg(long)]
    pub reason: Option<String>,
}

#[derive(Debug, Args)]
pub struct ClaimArgs {
    /// The approval's id (apr_…)
    pub id: String,

    /// The claim's Idempotency-Key: keep it to report with (and to claim again safely after a
    /// lost answer)
    #[arg(long)]
    pub key: String,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The approval's id (apr_…)
    pub id: String,

    /// The claim's Idempotency-Key
    #[arg(long)]
    pub key: String,

    /// What became of the action
    #[arg(long, value_enum)]
    pub outcome: ReportOutcome,

    /// What happened, in a line (the execution's note)
    #[arg(long)]
    pub detail: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ReportOutcome {
    Succeeded,
    Failed,
}
