//! The list prices the model applies: US East (N. Virginia), each with the AWS pricing page it
//! comes from and the day it was read there. Free tiers are left out of every figure.

pub(crate) struct Price {
    pub(crate) what: &'static str,
    pub(crate) usd: f64,
    pub(crate) per: &'static str,
    pub(crate) source: &'static str,
    /// The day the price was read on its page.
    pub(crate) read: &'static str,
}

pub(crate) const API_REQUEST: f64 = 1.00 / 1e6;
pub(crate) const LAMBDA_REQUEST: f64 = 0.20 / 1e6;
pub(crate) const LAMBDA_GB_SECOND_ARM: f64 = 0.000_013_333_4;
pub(crate) const WRITE_UNIT: f64 = 0.625 / 1e6;
pub(crate) const READ_UNIT: f64 = 0.125 / 1e6;
pub(crate) const SQS_REQUEST: f64 = 0.40 / 1e6;
pub(crate) const STORAGE_GB_MONTH: f64 = 0.25;
pub(crate) const RECOVERY_GB_MONTH: f64 = 0.20;
pub(crate) const STATE_TRANSITION: f64 = 0.025 / 1e3;
pub(crate) const LOGS_INGESTED_GB: f64 = 0.50;
pub(crate) const LOGS_STORED_GB_MONTH: f64 = 0.03;
pub(crate) const XRAY_TRACE: f64 = 5.00 / 1e6;
pub(crate) const XRAY_TRACE_READ: f64 = 0.50 / 1e6;
pub(crate) const SECRET_MONTH: f64 = 0.40;
pub(crate) const SECRET_CALL: f64 = 0.05 / 1e4;
pub(crate) const ALARM_METRIC_MONTH: f64 = 0.10;
pub(crate) const ALARM_METRIC_HIGH_RESOLUTION_MONTH: f64 = 0.30;
pub(crate) const DASHBOARD_MONTH: f64 = 3.00;
pub(crate) const CUSTOM_METRIC_MONTH: f64 = 0.30;

const API_GATEWAY: &str = "https://aws.amazon.com/api-gateway/pricing/";
const LAMBDA: &str = "https://aws.amazon.com/lambda/pricing/";
const DYNAMODB: &str = "https://aws.amazon.com/dynamodb/pricing/on-demand/";
const CLOUDWATCH: &str = "https://aws.amazon.com/cloudwatch/pricing/";
const SQS: &str = "https://aws.amazon.com/sqs/pricing/";
const XRAY: &str = "https://aws.amazon.com/xray/pricing/";
const SECRETS_MANAGER: &str = "https://aws.amazon.com/secrets-manager/pricing/";
const STEP_FUNCTIONS: &str = "https://aws.amazon.com/step-functions/pricing/";

/// The first prices, read for issue 24's measurements.
const FIRST: &str = "2026-12-02";
/// The whole bill's prices, and the first ones read again (unchanged).
const BILL: &str = "2026-12-05";

const fn price(
    what: &'static str,
    usd: f64,
    per: &'static str,
    source: &'static str,
    read: &'static str,
) -> Price {
    Price {
        what,
        usd,
        per,
        source,
        read,
    }
}

pub(crate) const PRICES: &[Price] = &[
    price(
        "API Gateway HTTP API, request",
        API_REQUEST * 1e6,
        "million (first 300 million a month)",
        API_GATEWAY,
        FIRST,
    ),
    price(
        "Lambda, request",
        LAMBDA_REQUEST * 1e6,
        "million",
        LAMBDA,
        FIRST,
    ),
    price(
        "Lambda, arm64 duration",
        LAMBDA_GB_SECOND_ARM,
        "GB-second (first 7.5 billion a month)",
        LAMBDA,
        FIRST,
    ),
    price(
        "DynamoDB on demand, write request unit",
        WRITE_UNIT * 1e6,
        "million",
        DYNAMODB,
        FIRST,
    ),
    price(
        "DynamoDB on demand, read request unit",
        READ_UNIT * 1e6,
        "million",
        DYNAMODB,
        FIRST,
    ),
    price(
        "DynamoDB storage (Standard table class)",
        STORAGE_GB_MONTH,
        "GB-month (first 25 GB free: not taken)",
        DYNAMODB,
        FIRST,
    ),
    price(
        "DynamoDB point-in-time recovery (table data and local indexes)",
        RECOVERY_GB_MONTH,
        "GB-month",
        DYNAMODB,
        BILL,
    ),
    price(
        "DynamoDB Streams read by Lambda",
        0.0,
        "(free)",
        DYNAMODB,
        FIRST,
    ),
    price(
        "CloudWatch Logs, data ingested (the EMF metrics' documents and the log lines)",
        LOGS_INGESTED_GB,
        "GB",
        CLOUDWATCH,
        FIRST,
    ),
    price(
        "CloudWatch Logs, storage",
        LOGS_STORED_GB_MONTH,
        "GB-month",
        CLOUDWATCH,
        BILL,
    ),
    price(
        "CloudWatch custom metric",
        CUSTOM_METRIC_MONTH,
        "metric-month (first 10,000; by the hour it receives data)",
        CLOUDWATCH,
        BILL,
    ),
    price(
        "CloudWatch alarm, standard resolution",
        ALARM_METRIC_MONTH,
        "alarm metric-month",
        CLOUDWATCH,
        BILL,
    ),
    price(
        "CloudWatch alarm, high resolution",
        ALARM_METRIC_HIGH_RESOLUTION_MONTH,
        "alarm metric-month",
        CLOUDWATCH,
        BILL,
    ),
    price(
        "CloudWatch dashboard",
        DASHBOARD_MONTH,
        "dashboard-month (first 3 an account free: not taken)",
        CLOUDWATCH,
        BILL,
    ),
    price(
        "Secrets Manager, secret",
        SECRET_MONTH,
        "secret-month",
        SECRETS_MANAGER,
        BILL,
    ),
    price(
        "Secrets Manager, API call",
        SECRET_CALL * 1e4,
        "10,000 calls",
        SECRETS_MANAGER,
        BILL,
    ),
    price(
        "SQS standard queue, request (64 KiB chunk)",
        SQS_REQUEST * 1e6,
        "million (after the first million a month)",
        SQS,
        FIRST,
    ),
    price(
        "X-Ray, trace recorded",
        XRAY_TRACE * 1e6,
        "million (after the first 100,000 a month)",
        XRAY,
        FIRST,
    ),
    price(
        "X-Ray, trace retrieved or scanned",
        XRAY_TRACE_READ * 1e6,
        "million (only when traces are read: not in the bill)",
        XRAY,
        BILL,
    ),
    price(
        "Step Functions Standard, state transition",
        STATE_TRANSITION * 1e3,
        "thousand",
        STEP_FUNCTIONS,
        FIRST,
    ),
];
