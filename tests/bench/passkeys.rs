//! `--passkeys`: what a passkey vote adds — the bytes its evidence takes on the approval's
//! item, the time the server takes to check its assertion — and a 3-of-5 certificate's size
//! and the time `countersign verify` takes over it. Real P-256 signatures (software
//! authenticators; a local key stands in for KMS, whose Sign is a network call measured by
//! the paths above, not here).

use std::time::Instant;

use countersign::domain::passkey::{Expected, verify_certificate};
use countersign_tests::passkeys::{SAMPLE_ORIGIN, SAMPLE_RP, sample_vote, three_of_five};

fn micros(runs: u32, mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..runs {
        f();
    }
    start.elapsed().as_secs_f64() * 1e6 / f64::from(runs)
}

pub fn run(quick: bool) {
    let runs = if quick { 200 } else { 2_000 };
    // One vote: its assertion, checked as the review page's post is.
    let (vote, assertion, key, challenge) = sample_vote();
    let check = micros(runs, || {
        let checked = assertion.verify(
            &key,
            Expected {
                challenge: &challenge,
                origin: Some(SAMPLE_ORIGIN),
                rp_id: Some(SAMPLE_RP),
            },
        );
        assert!(checked.is_ok());
    });
    let stored = countersign::store::size::passkey_evidence_bytes(&vote);
    let (sealed, jwks) = three_of_five();
    let size = sealed.to_string().len();
    let verify = micros(runs / 4, || {
        assert!(verify_certificate(&sealed, &jwks, None, None).is_ok());
    });
    println!("\npasskey votes ({runs} runs each, one core)");
    println!("  evidence stored per vote:            {stored} bytes (DynamoDB item bytes)");
    println!("  a vote's assertion check (server):   {check:.0} µs");
    println!("  a 3-of-5 certificate:                {size} bytes of JSON");
    println!("  countersign verify over it:          {verify:.0} µs (4 ES256 verifications)");
}
