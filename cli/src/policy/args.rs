//! `countersign policy …` and `countersign groups …`: their command lines.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

use crate::args::KeysTable;

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Push a tenant's approval policy set (Cedar) as its next version; in force on every
    /// function within KEY_CACHE_SECONDS. Exit 1 when the set is refused (nothing stored)
    Push(PushArgs),
    /// Show the tenant's current version (or --version N): its text and its facts
    Show(ShowArgs),
    /// One line a version, oldest first
    History(TenantArgs),
    /// Push version N's text and mode again, as the next version
    Rollback(RollbackArgs),
    /// Evaluate a set offline on one create (no AWS): prints the decision as JSON; exit 0 for
    /// allow or auto, 3 for forbid, 4 for error — the unit test of a policy repository
    Test(TestArgs),
    /// Print the base Cedar schema of the requests Countersign makes
    Schema(SchemaArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    /// The policy decides: forbidden is refused, its groups are required
    Enforce,
    /// The requesters' own approvers apply; what enforcement would do is recorded
    #[value(name = "log_only")]
    LogOnly,
}

#[derive(Debug, Args)]
pub struct PushArgs {
    /// The tenant whose policy it is
    #[arg(long)]
    pub tenant: String,

    /// The policy set, in Cedar's syntax
    pub file: PathBuf,

    /// A Cedar schema (.cedarschema): the set is validated against it in strict mode
    #[arg(long, value_name = "FILE")]
    pub schema: Option<PathBuf>,

    /// How it is applied
    #[arg(long, value_enum, default_value = "enforce")]
    pub mode: ModeArg,

    #[command(flatten)]
    pub table: KeysTable,
}

#[derive(Debug, Args)]
pub struct TenantArgs {
    /// The tenant whose policy it is
    #[arg(long)]
    pub tenant: String,

    #[command(flatten)]
    pub table: KeysTable,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The tenant whose policy it is
    #[arg(long)]
    pub tenant: String,

    /// A version other than the current one
    #[arg(long)]
    pub version: Option<u32>,

    #[command(flatten)]
    pub table: KeysTable,
}

#[derive(Debug, Args)]
pub struct RollbackArgs {
    /// The tenant whose policy it is
    #[arg(long)]
    pub tenant: String,

    /// The version whose text and mode become current again (as a new version)
    #[arg(long)]
    pub to: u32,

    #[command(flatten)]
    pub table: KeysTable,
}

#[derive(Debug, Args)]
pub struct TestArgs {
    /// The policy set, in Cedar's syntax
    pub file: PathBuf,

    /// The groups: a JSON object {"<group>": ["<identity>", …]}
    #[arg(long, value_name = "GROUPS.json")]
    pub groups: PathBuf,

    /// A Cedar schema (.cedarschema): the set is validated against it first, as a push would
    #[arg(long, value_name = "FILE")]
    pub schema: Option<PathBuf>,

    /// Who asks (the requester key's principal; `github:{login}` for a GitHub deployment)
    #[arg(long)]
    pub principal: String,

    /// The requester key's roles, comma-separated
    #[arg(long, value_delimiter = ',', default_value = "requester")]
    pub roles: Vec<String>,

    /// The create's body (POST /approvals), as JSON
    #[arg(long, value_name = "CREATE.json")]
    pub request: PathBuf,

    /// The channel: api, or github (a GitHub deployment)
    #[arg(long, default_value = "api")]
    pub channel: String,

    /// The tenant (what the resource names)
    #[arg(long, default_value = "test")]
    pub tenant: String,
}

#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// An action type a policy may name (repeat the flag); default: those of ACTION_TARGETS,
    /// and github_deployment
    #[arg(long = "action", value_name = "TYPE")]
    pub actions: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum GroupsCommand {
    /// Set (replace) GROUP's members: 1 to 200 identities; in force within KEY_CACHE_SECONDS
    Set(GroupSetArgs),
    /// Every group of the tenant, with its members
    List(TenantArgs),
    /// Delete GROUP (a policy requiring it then fails closed: policy_error)
    Delete(GroupDeleteArgs),
}

#[derive(Debug, Args)]
pub struct GroupSetArgs {
    /// The tenant whose group it is
    #[arg(long)]
    pub tenant: String,

    /// The group's name: 1 to 64 of a-z 0-9 _ . -
    pub group: String,

    /// Its members' identities, e.g. alice@example.com
    #[arg(required = true)]
    pub members: Vec<String>,

    #[command(flatten)]
    pub table: KeysTable,
}

#[derive(Debug, Args)]
pub struct GroupDeleteArgs {
    /// The tenant whose group it is
    #[arg(long)]
    pub tenant: String,

    /// The group's name
    pub group: String,

    #[command(flatten)]
    pub table: KeysTable,
}
