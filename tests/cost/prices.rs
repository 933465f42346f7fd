//! The list prices the model applies, each with its page and the date it was read.

/// List prices, US East (N. Virginia), as AWS's pricing pages give them on the date below.
pub(crate) struct Price {
    pub(crate) what: &'static str,
    pub(crate) usd: f64,
    pub(crate) per: &'static str,
    pub(crate) source: &'static str,
}

pub(crate) const PRICES_TAKEN: &str = "2026-12-02";
pub(crate) const API_REQUEST: f64 = 1.00 / 1e6;
pub(crate) const LAMBDA_REQUEST: f64 = 0.20 / 1e6;
pub(crate) const LAMBDA_GB_SECOND_ARM: f64 = 0.000_013_333_4;
pub(crate) const WRITE_UNIT: f64 = 0.625 / 1e6;
pub(crate) const READ_UNIT: f64 = 0.125 / 1e6;
pub(crate) const SQS_REQUEST: f64 = 0.40 / 1e6;
pub(crate) const STORAGE_GB_MONTH: f64 = 0.25;
pub(crate) const STATE_TRANSITION: f64 = 0.025 / 1e3;
pub(crate) const LOGS_INGESTED_GB: f64 = 0.50;
pub(crate) const XRAY_TRACE: f64 = 5.00 / 1e6;

pub(crate) const PRICES: &[Price] = &[
    Price {
        what: "API Gateway HTTP API, request",
        usd: API_REQUEST * 1e6,
        per: "million (first 300 million a month)",
        source: "https://aws.amazon.com/api-gateway/pricing/",
    },
    Price {
        what: "Lambda, request",
        usd: LAMBDA_REQUEST * 1e6,
        per: "million",
        source: "https://aws.amazon.com/lambda/pricing/",
    },
    Price {
        what: "Lambda, arm64 duration",
        usd: LAMBDA_GB_SECOND_ARM,
        per: "GB-second (first 7.5 billion a month)",
        source: "https://aws.amazon.com/lambda/pricing/",
    },
    Price {
        what: "DynamoDB on demand, write request unit",
        usd: WRITE_UNIT * 1e6,
        per: "million",
        source: "https://aws.amazon.com/dynamodb/pricing/on-demand/",
    },
    Price {
        what: "DynamoDB on demand, read request unit",
        usd: READ_UNIT * 1e6,
        per: "million",
        source: "https://aws.amazon.com/dynamodb/pricing/on-demand/",
    },
    Price {
        what: "CloudWatch Logs, data ingested (the EMF metrics' documents and the log lines)",
        usd: LOGS_INGESTED_GB,
        per: "GB",
        source: "https://aws.amazon.com/cloudwatch/pricing/",
    },
    Price {
        what: "DynamoDB storage (Standard table class)",
        usd: STORAGE_GB_MONTH,
        per: "GB-month (first 25 GB free)",
        source: "https://aws.amazon.com/dynamodb/pricing/on-demand/",
    },
    Price {
        what: "DynamoDB Streams read by Lambda",
        usd: 0.0,
        per: "(free)",
        source: "https://aws.amazon.com/dynamodb/pricing/on-demand/",
    },
    Price {
        what: "SQS standard queue, request (64 KiB chunk)",
        usd: SQS_REQUEST * 1e6,
        per: "million (after the first million a month)",
        source: "https://aws.amazon.com/sqs/pricing/",
    },
    Price {
        what: "X-Ray, trace recorded",
        usd: XRAY_TRACE * 1e6,
        per: "million (after the first 100,000 a month)",
        source: "https://aws.amazon.com/xray/pricing/",
    },
    Price {
        what: "Step Functions Standard, state transition",
        usd: STATE_TRANSITION * 1e3,
        per: "thousand",
        source: "https://aws.amazon.com/step-functions/pricing/",
    },
];
