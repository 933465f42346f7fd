//! `docs/COST.md`'s passkey section: what a passkey vote adds to its approval's item and what
//! a 3-of-5 certificate weighs (computed here, from real signatures), and what checking them
//! takes (measured by `make bench -- --passkeys`, whose figures are recorded below).

use std::fmt::Write as _;

use countersign_tests::passkeys::{sample_vote, three_of_five};

use crate::prices::{STORAGE_GB_MONTH, WRITE_UNIT};

/// KMS: asymmetric requests other than RSA 2048 (an ECC_NIST_P256 `Sign`), per request; and
/// the key, per month (aws.amazon.com/kms/pricing).
const KMS_ASYMMETRIC_REQUEST: f64 = 0.15 / 1e4;
const KMS_KEY_MONTH: f64 = 1.00;

/// `make bench -- --passkeys` on the development machine (2 cores, release build): the
/// server's check of one assertion, and `countersign verify` over the 3-of-5 below.
const MEASURED_CHECK_MICROS: &str = "about 310 (304, 326 in two runs)";
const MEASURED_VERIFY_MICROS: &str = "about 1,300 (1,320, 1,288)";

pub(crate) fn render(w: &mut String) {
    let (vote, ..) = sample_vote();
    let stored = countersign::store::size::passkey_evidence_bytes(&vote);
    let (certificate, _) = three_of_five();
    let size = certificate.to_string().len();
    // A vote's write is one write request either way; the evidence takes write units as its
    // item grows (1 KB each), and storage for as long as the approval is kept.
    let units = stored.div_ceil(1024);
    let per_million_storage = stored as f64 * 1e6 / 1e9 * STORAGE_GB_MONTH;
    writeln!(w, "## Passkey votes\n").expect("write");
    writeln!(
        w,
        "A passkey-only approval's vote carries its evidence (the statement, the assertion, the \
         credential's public key; [VERIFY.md](VERIFY.md)), and an approved one yields a certificate, \
         signed once by KMS (one `Sign`, one conditional write, in the dispatch function).\n"
    )
    .expect("write");
    writeln!(w, "| | |\n|---|---|").expect("write");
    writeln!(
        w,
        "| a vote's evidence, on the approval's item | {stored} bytes: up to {units} more write unit(s) on each later write of the item; {} a month per million votes kept |",
        crate::render::money(per_million_storage)
    )
    .expect("write");
    writeln!(
        w,
        "| the server's check of a vote's assertion (ES256) | {MEASURED_CHECK_MICROS} µs of CPU |"
    )
    .expect("write");
    writeln!(w, "| a 3-of-5 certificate (JSON) | {size} bytes |").expect("write");
    writeln!(
        w,
        "| `countersign verify` over it (4 ES256 verifications) | {MEASURED_VERIFY_MICROS} µs |"
    )
    .expect("write");
    writeln!(
        w,
        "| issuing it (one KMS `Sign` at $0.15 per 10,000 asymmetric requests, one write of the seal) | {} per million approvals, and the key's {} a month |\n",
        crate::render::money(1e6 * (KMS_ASYMMETRIC_REQUEST + WRITE_UNIT)),
        crate::render::money(KMS_KEY_MONTH)
    )
    .expect("write");
}
